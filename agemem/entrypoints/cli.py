"""The `agemem` command line. Each subcommand takes ``--config FILE`` and ``key.sub=value`` overrides."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from agemem.core.configlib import ConfigError, parse_override, read_yaml, set_dotted
from agemem.core.plugins import load_entry_points, load_plugins, plugins_of
from agemem.entrypoints.quiet import quiet_third_party
from agemem.entrypoints.roots import COMMAND_ROOTS, load_command_config, load_eval_config, load_resume_config
from agemem.eval.benchmarks import command_evaluations, limit_key
from agemem.eval.memory_systems import eval_variants
from agemem.tasks import streams


def _add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML file overriding the built-in defaults (see configs/)")
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import MODULE first: it registers environments, tools or memory systems (adds to `plugins`)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="dotted overrides applied after --config, e.g. env.context.filter_threshold=0.5",
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from agemem.entrypoints.demo import run_demo

    run_demo(load_command_config("demo", args.config, args.overrides), out=args.out)
    return 0


def _cmd_rollout(args: argparse.Namespace) -> int:
    from agemem.tasks.rollout import run_rollouts, task_scorer

    config = load_command_config("rollout", args.config, args.overrides)
    run_rollouts(config, args.out, make_scorer=None if args.no_rewards else task_scorer(config))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    if args.dry_run:
        return _cmd_plan(args)
    flags = [flag for flag, value in _plan_flags(args).items() if value is not None]
    if flags:
        raise ConfigError(f"{', '.join(flags)} apply to the memory plan only; add --dry-run (or run `agemem plan`)")
    from rich.console import Console

    from agemem.core.runs import is_main_process, latest_checkpoint, read_trainer_state
    from agemem.train.loop import train
    from agemem.train.preemption import TrainingStoppedAtOnceError
    from agemem.train.summary import summary_table, weight_change

    if args.resume or args.resume_from:  # --resume alone continues with the run's own config
        config = load_resume_config(args.config, args.overrides)
    else:
        config = load_command_config("train", args.config, args.overrides)
    try:
        history = train(config, resume=args.resume, resume_from=args.resume_from)
    except KeyboardInterrupt:  # a second Ctrl-C: stopped where it was; the last checkpoint is what is left
        raise TrainingStoppedAtOnceError(latest_checkpoint(Path(config.output_dir))) from None
    checkpoint = latest_checkpoint(Path(config.output_dir))
    if history and checkpoint is not None and is_main_process():
        last_step = read_trainer_state(checkpoint).step
        Console().print(summary_table(history, weight_change(config, checkpoint), last_step=last_step))
        print(f"run: {config.output_dir} (metrics.jsonl, trajectories.jsonl); checkpoint: {checkpoint}")
    return 0


def _add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    plan = parser.add_argument_group("memory plan (nothing is loaded: sizes come from the model's config.json)")
    plan.add_argument("--gpus", type=int, help="GPUs (data-parallel ranks); default: the accelerate config's, else 8")
    plan.add_argument(
        "--gpu-memory-gb", type=float, metavar="GIB", help="memory of one GPU in GiB, as torch reports it (default: 80)"
    )
    plan.add_argument(
        "--accelerate-config", metavar="FILE", help="the accelerate config of the launch (launch/accelerate/*.yaml)"
    )
    plan.add_argument("--zero", type=int, metavar="STAGE", help="ZeRO stage 0 (DDP), 2 or 3; overrides the above")
    plan.add_argument("--json", metavar="PATH", help="also write the plan as JSON")


def _plan_flags(args: argparse.Namespace) -> dict[str, object]:
    return {
        "--gpus": args.gpus,
        "--gpu-memory-gb": args.gpu_memory_gb,
        "--accelerate-config": args.accelerate_config,
        "--zero": args.zero,
        "--json": args.json,
    }


def _cmd_plan(args: argparse.Namespace) -> int:
    """Print the per-GPU memory plan; exit 0 when it fits, 1 when it does not."""
    from rich.console import Console

    from agemem.train.parallelism import read_accelerate_config
    from agemem.train.plan import plan_memory, render_plan, write_plan_json

    config = load_command_config("plan", args.config, args.overrides)
    accelerate = read_accelerate_config(args.accelerate_config) if args.accelerate_config else None
    memory = 80.0 if args.gpu_memory_gb is None else args.gpu_memory_gb
    plan = plan_memory(config, gpus=args.gpus, zero=args.zero, gpu_memory_gib=memory, accelerate=accelerate)
    console = Console(width=None if sys.stdout.isatty() else 160)  # a log keeps the table's formulas readable
    for part in render_plan(plan, title=f"per-GPU memory plan: {args.config or 'built-in defaults'}"):
        console.print(part)
    if args.json:
        write_plan_json(plan, args.json)
        console.print(f"plan: {args.json}", soft_wrap=True)
    return 0 if plan.fits else 1


def _cmd_learn(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agemem.recipes.learn import learn, report_table

    overrides = [*args.overrides, *(["reward.mode=answer_only"] if args.answer_only else [])]
    config = load_command_config("learn", args.config, overrides)
    if args.bundle_warm_start:
        from agemem.recipes.learn.bundle import bundle_warm_start

        # the manifest names the command that rebuilds it: this one, a variant recipe's config and overrides included
        config_args = ["--config", args.config] if args.config else []
        command = shlex.join(
            ["agemem", "learn", *config_args, *overrides, "--bundle-warm-start", args.bundle_warm_start]
        )
        manifest = bundle_warm_start(config, args.bundle_warm_start, progress=config.logging.progress, command=command)
        print(f"warm start of seed {manifest['seed']} bundled in {args.bundle_warm_start} (MANIFEST.json: its hashes)")
        return 0
    report = learn(config, progress=config.logging.progress)
    console = Console()
    console.print(report_table(report))
    console.print(f"report: {config.output_dir}/learning.json, plot: {config.output_dir}/learning.png")
    return 0


def _eval_overrides(args: argparse.Namespace) -> list[str]:
    """The benchmark flags as dotted overrides, applied after the user's (a flag wins)."""
    flags = []
    if args.model:
        flags.append(f"eval.models={json.dumps(args.model)}")
    if args.variant:
        flags.append(f"eval.variants={json.dumps(args.variant)}")
    entry = command_evaluations()[args.benchmark]
    for option in entry.options:
        value = getattr(args, option.flag.lstrip("-").replace("-", "_"))
        if value is not None:
            value = json.dumps([part.strip() for part in value.split(",") if part.strip()]) if option.listed else value
            flags.append(f"{option.key}={value}")
    if args.limit is not None:
        flags.append(f"{limit_key(args.benchmark)}={args.limit}")
    return [*args.overrides, *flags]


def _stream_overrides(args: argparse.Namespace) -> list[str]:
    """`eval stream` flags as dotted overrides, applied after the user's (a flag wins). ``--capacity`` alone bounds
    the bank with Xiong et al.'s capacity mode (retention=utility)."""
    flags = [f"eval.models={json.dumps(args.model)}"] if args.model else []
    if args.data is not None:
        flags.append(f"data.source={args.data}")
    if args.data_dir is not None:
        flags.append(f"alfworld.data_dir={args.data_dir}")
    if args.split is not None:
        flags.append(f"alfworld.split={args.split}")
    for flag, key in (("task", "task"), ("addition", "addition"), ("deletion", "deletion"), ("order", "order")):
        if getattr(args, flag) is not None:
            flags.append(f"stream.{key}={getattr(args, flag)}")
    for flag in ("retention", "retrieval", "agent", "capacity", "limit", "replay_of"):
        if getattr(args, flag) is not None:
            flags.append(f"stream.{flag}={getattr(args, flag)}")
    if args.capacity is not None and args.retention is None:
        flags.append("stream.retention=utility")
    return [*args.overrides, *flags]


def _cmd_eval_stream(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agemem.eval.stream.evaluate import evaluate_stream, results_table, tune_retention

    config = load_eval_config(args.config, _stream_overrides(args), args.model or [], command="stream")
    console = Console()
    if args.tune_retention:
        report = tune_retention(config, args.out)
        console.print(f"CEM objective {report['objective']:.4f}; weights: {args.out}/retention_weights.json")
        return 0
    if args.sweep:
        from agemem.eval.stream.sweep import load_sweep, run_sweep

        runs = run_sweep(config, load_sweep(args.sweep), args.out)
        files = ["comparison.json", "comparison.md", "comparison.png"]
    else:
        runs = [evaluate_stream(config, args.out)]
        files = ["results.json", "results.md", "stream.png", "steps.jsonl"]
    console.print(results_table(f"stream: {runs[0]['task']}", runs))
    console.print(f"results: {', '.join(f'{args.out}/{name}' for name in files)}", soft_wrap=True)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    if args.benchmark == "stream":
        return _cmd_eval_stream(args)
    from rich.console import Console

    from agemem.eval.benchmarks import get_benchmark
    from agemem.eval.runner import evaluate, results_table

    benchmark = get_benchmark(args.benchmark)
    config = load_eval_config(args.config, _eval_overrides(args), args.model or [])
    runs = evaluate(benchmark, config, args.out)
    console = Console()
    console.print(results_table(benchmark, runs))
    stem = "results" if len(runs) == 1 else "comparison"
    files = ", ".join(f"{args.out}/{stem}.{ext}" for ext in ("json", "md", *(["png"] if config.eval.plot else [])))
    console.print(f"results: {files}", soft_wrap=True)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agemem.eval.compare import benchmark_overrides, check_benchmarks, compare, console_tables

    configs = {
        name: load_eval_config(
            args.config,
            benchmark_overrides(
                name, args.overrides, models=args.model or [], variants=args.variant or [], limit=args.limit
            ),
            args.model or [],
        )
        for name in check_benchmarks(args.benchmark or [])
    }
    comparison = compare(configs, args.out, reference=args.reference)
    console = Console(width=None if sys.stdout.isatty() else 160)  # a log keeps a row of many benchmarks on a line
    for table in console_tables(comparison):
        console.print(table)
    plot = ["png"] if all(config.eval.plot for config in configs.values()) else []
    files = ", ".join(f"{args.out}/comparison.{ext}" for ext in ("json", "md", *plot))
    console.print(f"comparison: {files}", soft_wrap=True)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agemem.entrypoints.export import ExportError, ExportSettings, export_policy

    console = Console(stderr=True)
    try:
        settings = ExportSettings(
            merge_lora=args.merge_lora,
            dtype=args.dtype,
            force=args.force,
            check=not args.no_check,
            eval_results=tuple(args.eval_results),
            device=args.device,
        )
        with console.status(f"exporting {args.checkpoint} → {args.out}"):
            report = export_policy(
                args.checkpoint, args.out, settings, overrides=args.overrides, config_file=args.config
            )
    except ExportError as err:
        console.print(f"agemem export: {err}", markup=False)
        return 2
    episode = report.check.get("episode", {})
    calls = [name for turn in episode.get("turns", []) for name in turn["tool_calls"]]
    lines = [
        f"exported {report.kind} (step {report.step}) to {report.out} in {report.seconds:.1f} s: dtype {report.dtype}, "
        + ("LoRA merged" if report.merged else "LoRA kept in adapter/" if report.adapter else "full weights"),
    ]
    if report.check:
        lines.append(
            f"self-check: reloaded with transformers, max |logit difference| "
            f"{report.check.get('max_abs_logit_difference', 0.0):.2g}; scripted conversation made "
            f"{len(calls)} tool call(s) {calls}"
        )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agemem.core.memory_store import MemoryFileError
    from agemem.entrypoints.agent import MemoryAgent
    from agemem.entrypoints.terminal import run_chat

    try:
        agent = MemoryAgent.from_pretrained(
            args.model,
            memory=None if args.memory in ("", "none", ":memory:") else args.memory,
            endpoint=args.endpoint,
            served_model=args.served_model,
            api=args.api,
            device=args.device,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            user=args.user,
            max_steps_per_turn=args.max_steps,
        )
    except MemoryFileError as err:
        sys.stderr.write(f"agemem chat: {err}\n")
        return 2
    with agent:
        return run_chat(agent, Console(highlight=False))


def _cmd_config(args: argparse.Namespace) -> int:
    from agemem.entrypoints.provenance import print_config

    sys.stdout.write(print_config(args.command_root, args.config, args.overrides))
    return 0


def _cmd_tools(args: argparse.Namespace) -> int:
    from agemem.core.prompts import system_prompt
    from agemem.core.tools import PAPER_STAGE_TOOLS, TOOL_NAMES, schemas_json

    # --stage N: what Stage N offers under rollout.stage_tools=paper, as the env renders it then
    tools = PAPER_STAGE_TOOLS[args.stage] if args.stage else TOOL_NAMES
    staged = args.stage is not None
    text = system_prompt(args.format, tools=tools, staged=staged) if args.system_prompt else schemas_json(tools)
    sys.stdout.write(text + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agemem", description="Train LLM agents to manage their own memory (AgeMem).")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the third-party warnings, logs and progress bars hidden by default",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}

    demo = commands.add_parser("demo", help="run one scripted three-stage episode on a HotpotQA question")
    _add_config_arguments(demo)
    demo.add_argument("--out", help="also write the episode record (JSON) here")
    handlers["demo"] = _cmd_demo

    rollout = commands.add_parser("rollout", help="play tasks x K three-stage rollouts with the policy; write JSONL")
    _add_config_arguments(rollout)
    rollout.add_argument("--out", default="runs/rollouts", help="output directory (trajectories.jsonl, summary.json)")
    rollout.add_argument("--no-rewards", action="store_true", help="skip scoring (no judge calls)")
    handlers["rollout"] = _cmd_rollout

    train = commands.add_parser("train", help="step-wise GRPO training (accelerate; see launch/ for multi-GPU)")
    _add_config_arguments(train)
    train.add_argument(
        "--resume", action="store_true", help="continue from the newest checkpoint in output_dir that verifies"
    )
    train.add_argument(
        "--resume-from", metavar="step_N", help="continue from this checkpoint of output_dir (step_N, N, or a path)"
    )
    train.add_argument(
        "--dry-run", action="store_true", help="print the per-GPU memory plan and exit (the same as `agemem plan`)"
    )
    _add_plan_arguments(train)
    handlers["train"] = _cmd_train

    plan = commands.add_parser(
        "plan", help="per-GPU memory of `agemem train` (weights, optimizer, reference, vLLM, activations): fits?"
    )
    _add_config_arguments(plan)
    _add_plan_arguments(plan)
    handlers["plan"] = _cmd_plan

    learn = commands.add_parser(
        "learn", help="CPU demo: tokenizer -> SFT warm start -> GRPO -> held-out eval, with a table and a plot"
    )
    _add_config_arguments(learn)
    learn.add_argument(
        "--answer-only", action="store_true", help="ablation: train with R = R_task + penalties (reward.mode)"
    )
    learn.add_argument(
        "--bundle-warm-start",
        metavar="DIR",
        help="only train the first seed's warm start (stages 1-3) and copy it with its tokenizer and a manifest of "
        "hashes into DIR (agemem/assets/models/learn-warm-start: the package's bundled:learn-warm-start)",
    )
    handlers["learn"] = _cmd_learn

    evaluate = commands.add_parser("eval", help="evaluate checkpoints, models or endpoints on task benchmarks")
    benchmarks = evaluate.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, entry in command_evaluations().items():
        sub = benchmarks.add_parser(name, help=entry.help)
        _add_config_arguments(sub)
        sub.add_argument(
            "--model",
            action="append",
            metavar="M",
            help="a training run or checkpoint directory, a LoRA adapter or Hugging Face directory, a hub id, or "
            "openai:<model>@<base_url>; repeat to compare models side by side (default: policy.model)",
        )
        for option in entry.options:
            sub.add_argument(option.flag, choices=option.choices, metavar=option.metavar, help=option.help)
        sub.add_argument("--out", default=f"runs/eval/{name}", metavar="DIR", help="output directory (resumable)")
        sub.add_argument(
            "--variant",
            action="append",
            choices=eval_variants(),
            help="tool variant; repeat for several (default: agemem)",
        )
        sub.add_argument("--limit", type=int, metavar="N", help=f"evaluate the first N items ({entry.limit_key})")
    stream = benchmarks.add_parser(
        "stream",
        help="a long stream of tasks with an experience memory: memory addition, deletion and bounded retention",
    )
    _add_config_arguments(stream)
    stream.add_argument("--task", choices=sorted(streams()), help="the stream (stream.task)")
    stream.add_argument("--model", action="append", metavar="M", help="the model, in any --model form of eval hotpotqa")
    stream.add_argument("--data", metavar="PATH", help="HotpotQA JSON file, datasets directory or hub id (data.source)")
    stream.add_argument("--data-dir", metavar="DIR", help="ALFWorld games folder (alfworld.data_dir)")
    stream.add_argument("--split", choices=["valid_seen", "valid_unseen"], help="ALFWorld split (alfworld.split)")
    stream.add_argument(
        "--addition", choices=["fixed", "add_all", "coarse", "strict", "policy"], help="stream.addition"
    )
    stream.add_argument("--deletion", choices=["none", "periodic", "history", "combined"], help="stream.deletion")
    stream.add_argument(
        "--retention",
        choices=["none", "utility", "fifo", "lru", "lfu", "random", "ebbinghaus", "linear"],
        help="bounded-bank eviction policy (stream.retention)",
    )
    stream.add_argument("--capacity", type=int, metavar="N", help="bank size bound; alone: retention=utility")
    stream.add_argument("--retrieval", choices=["similar", "recent", "none"], help="stream.retrieval")
    stream.add_argument(
        "--agent",
        choices=["standard", "remem"],
        help="who solves the tasks (stream.agent): standard (the retrieved records as demonstrations) or remem "
        "(ReMem, Evo-Memory's Think / Refine / Act agent)",
    )
    stream.add_argument("--order", choices=["given", "shuffled", "shift"], help="task order (stream.order)")
    stream.add_argument("--limit", type=int, metavar="N", help="tasks in the stream (stream.limit)")
    stream.add_argument("--replay-of", metavar="DIR", help="error-free replay of a finished run (stream.replay_of)")
    stream.add_argument("--sweep", metavar="FILE", help="run the strategies of a sweep file (configs/sweeps/)")
    stream.add_argument(
        "--tune-retention", action="store_true", help="CEM search of the linear retention weights on this stream"
    )
    stream.add_argument("--out", default="runs/eval/stream", metavar="DIR", help="output directory (resumable)")
    handlers["eval"] = _cmd_eval

    compare = commands.add_parser(
        "compare", help="models x variants over several benchmarks: the AgeMem paper's main table (JSON, md, plot)"
    )
    _add_config_arguments(compare)
    compare.add_argument(
        "--benchmark", action="append", metavar="NAME", help=f"repeat for several: {', '.join(command_evaluations())}"
    )
    compare.add_argument("--model", action="append", metavar="M", help="as for agemem eval; repeat for several")
    compare.add_argument(
        "--variant", action="append", choices=eval_variants(), help="repeat for several (default: agemem)"
    )
    compare.add_argument("--limit", type=int, metavar="N", help="play the first N items of every benchmark")
    compare.add_argument("--out", default="runs/compare", metavar="DIR", help="one folder per benchmark (resumable)")
    compare.add_argument("--reference", action="store_true", help="also show the paper's rows (Qwen2.5-7B-Instruct)")
    handlers["compare"] = _cmd_compare

    export = commands.add_parser(
        "export", help="write a checkpoint as a plain Hugging Face model directory with the agent's tools and prompt"
    )
    export.add_argument("--checkpoint", required=True, help="training run, checkpoints/step_N, LoRA adapter or model")
    export.add_argument("--out", required=True, help="the export directory (must be empty unless --force)")
    export.add_argument(
        "--merge-lora",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="merge a LoRA adapter into its base (default); --no-merge-lora writes the base plus adapter/",
    )
    export.add_argument(
        "--dtype", default="auto", help="auto (as trained), bf16, fp16 or fp32: dtype of the written weights"
    )
    export.add_argument("--force", action="store_true", help="replace a non-empty --out after the new export passed")
    export.add_argument(
        "--eval-results", action="append", default=[], help="results.json (or a folder of them) for the model card"
    )
    export.add_argument("--no-check", action="store_true", help="skip the reload and scripted-conversation check")
    export.add_argument("--device", default="cpu", help="where the model is loaded for the export (cpu, cuda, auto)")
    export.add_argument("--config", help="the YAML a checkpoint outside its run was trained with (a run has its own)")
    export.add_argument("overrides", nargs="*", metavar="key.sub=value", help="overrides of the run's config.json")
    handlers["export"] = _cmd_export

    chat = commands.add_parser("chat", help="talk to an exported policy in the terminal; its tool calls are shown")
    chat.add_argument("--model", required=True, help="a directory written by agemem export")
    chat.add_argument("--memory", default="memory.sqlite", help="long-term memory file (SQLite); none: in RAM only")
    chat.add_argument("--endpoint", help="OpenAI-compatible API root serving the export, e.g. http://localhost:8000/v1")
    chat.add_argument("--served-model", help="the endpoint's model name (default: the --model path, as vllm serve)")
    chat.add_argument("--api", choices=["completions", "chat"], default="completions", help="endpoint API")
    chat.add_argument("--device", default="auto", help="local model device (auto, cpu, cuda)")
    chat.add_argument("--temperature", type=float, help="sampling temperature (default: as trained)")
    chat.add_argument("--max-tokens", type=int, help="longest reply in tokens (default: as trained)")
    chat.add_argument("--max-steps", type=int, help="replies per user turn before giving up (default: from export)")
    chat.add_argument("--user", default="default", help="memory scope: one bank per user in the same file")
    handlers["chat"] = _cmd_chat

    config = commands.add_parser(
        "config", help="print the effective configuration as YAML, each value marked with the source that set it"
    )
    _add_config_arguments(config)
    config.add_argument(
        "--command",
        dest="command_root",
        default="config",
        choices=sorted(COMMAND_ROOTS),
        help="print the sections this command reads (default: every section of every command)",
    )
    handlers["config"] = _cmd_config

    tools = commands.add_parser("tools", help="print the six tool schemas (JSON lines) or the system prompt")
    tools.add_argument("--system-prompt", action="store_true", help="print the full system prompt instead")
    tools.add_argument("--format", choices=["agemem", "native"], default="agemem", help="tool format of the prompt")
    tools.add_argument(
        "--stage",
        type=int,
        choices=[1, 2, 3],
        help="only the tools this stage offers under rollout.stage_tools=paper (and the prompt the env shows then)",
    )
    handlers["tools"] = _cmd_tools

    parser.set_defaults(handlers=handlers)
    return parser


def requested_plugins(argv: list[str]) -> list[str]:
    """The plugin modules a command line asks for, read before the parser exists (subcommands and choices come from
    the registries the plugins fill): ``plugins`` of its ``--config`` file and of a ``plugins=[...]`` override, then
    every ``--plugin M``."""
    config = _flag_values(argv, "--config")
    tree = read_yaml(config[-1]) if config else {}
    for word in argv:
        if word.startswith("plugins="):
            set_dotted(tree, *parse_override(word))
    return list(dict.fromkeys([*plugins_of(tree), *_flag_values(argv, "--plugin")]))


def _flag_values(argv: list[str], flag: str) -> list[str]:
    values = []
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            values.append(argv[index + 1])
        elif word.startswith(f"{flag}="):
            values.append(word.split("=", 1)[1])
    return values


def parse_command_line(argv: list[str] | None = None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and the parsed arguments of ``agemem <argv>``; a bad argument exits 2 with argparse's message.
    Installed plugins (entry points) and the ones the line asks for are imported first; ``--plugin M`` is kept in
    the config as ``plugins`` (so a run's ``config.json`` names it)."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        load_entry_points()
        load_plugins(requested_plugins(words))
    except ConfigError as err:
        sys.exit(f"agemem: configuration error: {err}")
    parser = build_parser()
    args, extra = parser.parse_known_args(words)
    # flags may come between overrides (`a=1 --resume b=2`): argparse leaves the later overrides over
    stray = [item for item in extra if "=" not in item or item.startswith("-")]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    if getattr(args, "plugin", None):
        args.overrides = [*args.overrides, f"plugins={json.dumps(requested_plugins(words))}"]
    return parser, args


def main(argv: list[str] | None = None) -> int:
    parser, args = parse_command_line(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from agemem.core.runs import CheckpointError
    from agemem.rollouts.engines.base import EngineError
    from agemem.train.preemption import INTERRUPTED_EXIT_CODE, TrainingPreemptedError, TrainingStoppedAtOnceError

    quiet = contextlib.nullcontext() if args.verbose else quiet_third_party(load_models=args.command in MODEL_COMMANDS)
    try:
        with quiet:
            return args.handlers[args.command](args)
    except ConfigError as err:
        parser.exit(2, f"agemem {args.command}: configuration error: {err}\n")
    except CheckpointError as err:
        parser.exit(1, f"agemem {args.command}: checkpoint error: {err}\n")
    except EngineError as err:  # an endpoint that is down or answers garbage: its message says which and why
        parser.exit(1, f"agemem {args.command}: generation engine error: {err}\n")
    except TrainingPreemptedError as err:
        parser.exit(err.exit_code, f"agemem {args.command}: {err}; continue with: {resume_command(argv)}\n")
    except TrainingStoppedAtOnceError as err:
        follow = f"continue with: {resume_command(argv)}" if err.checkpoint else "the same command starts afresh"
        parser.exit(INTERRUPTED_EXIT_CODE, f"agemem {args.command}: {err}; {follow}\n")
    except KeyboardInterrupt:  # no traceback for a Ctrl-C: what a command finished is on disk, as it documents
        parser.exit(INTERRUPTED_EXIT_CODE, f"\nagemem {args.command}: interrupted (Ctrl-C)\n")


MODEL_COMMANDS = frozenset({"demo", "rollout", "train", "learn", "eval", "compare", "export", "chat"})
"""commands that load models (and so quiet transformers' own logs and bars unless --verbose)."""


def resume_command(argv: list[str] | None) -> str:
    """The command line that continues this training run: the same arguments with ``--resume`` (a
    ``--resume-from`` dropped: the newest checkpoint that verifies is the one to continue from)."""
    words = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--resume-from":
            skip = True
        elif not word.startswith("--resume-from="):
            kept.append(word)
    if "--resume" not in kept:
        kept.append("--resume")
    return "agemem " + shlex.join(kept)


if __name__ == "__main__":
    raise SystemExit(main())

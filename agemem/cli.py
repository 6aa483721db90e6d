"""The `agemem` command line. Each subcommand takes ``--config FILE`` and ``key.sub=value`` overrides."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import yaml

from agemem.config import EVAL_VARIANTS, AgeMemConfig
from agemem.configlib import ConfigError, load_config, to_dict


def _add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML file overriding the built-in defaults (see configs/)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="dotted overrides applied after --config, e.g. env.context.filter_threshold=0.5",
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from agemem.demo import run_demo

    run_demo(load_config(AgeMemConfig, args.config, args.overrides), out=args.out)
    return 0


def _cmd_rollout(args: argparse.Namespace) -> int:
    from functools import partial

    from rewards.build import build_scorer
    from rollouts.run import run_rollouts

    config = load_config(AgeMemConfig, args.config, args.overrides)
    run_rollouts(config, args.out, make_scorer=None if args.no_rewards else partial(build_scorer, config))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from train.loop import train

    config = load_config(AgeMemConfig, args.config, args.overrides)
    train(config, resume=args.resume)
    return 0


def _cmd_learn(args: argparse.Namespace) -> int:
    from rich.console import Console

    from recipes.learn import learn, report_table

    overrides = [*args.overrides, *(["reward.mode=answer_only"] if args.answer_only else [])]
    config = load_config(AgeMemConfig, args.config, overrides)
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
    if args.data is not None:
        flags.append(f"data.source={args.data}")
    if args.limit is not None:
        flags.append(f"data.limit={args.limit}")
    return [*args.overrides, *flags]


def _cmd_eval(args: argparse.Namespace) -> int:
    from rich.console import Console

    from eval.hotpotqa import evaluate_hotpotqa, results_table

    config = load_config(AgeMemConfig, args.config, _eval_overrides(args))
    runs = evaluate_hotpotqa(config, args.out)
    console = Console()
    console.print(results_table(runs))
    stem = "results" if len(runs) == 1 else "comparison"
    files = ", ".join(f"{args.out}/{stem}.{ext}" for ext in ("json", "md", *(["png"] if config.eval.plot else [])))
    console.print(f"results: {files}", soft_wrap=True)
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    config = load_config(AgeMemConfig, args.config, args.overrides)
    sys.stdout.write(yaml.safe_dump(to_dict(config), sort_keys=False))
    return 0


def _cmd_tools(args: argparse.Namespace) -> int:
    from agemem.prompts import system_prompt
    from agemem.tools import schemas_json

    sys.stdout.write((system_prompt(args.format) if args.system_prompt else schemas_json()) + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agemem", description="Train LLM agents to manage their own memory (AgeMem).")
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
    train.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in output_dir")
    handlers["train"] = _cmd_train

    learn = commands.add_parser(
        "learn", help="CPU demo: tokenizer -> SFT warm start -> GRPO -> held-out eval, with a table and a plot"
    )
    _add_config_arguments(learn)
    learn.add_argument(
        "--answer-only", action="store_true", help="ablation: train with R = R_task + penalties (reward.mode)"
    )
    handlers["learn"] = _cmd_learn

    evaluate = commands.add_parser("eval", help="evaluate checkpoints, models or endpoints on task benchmarks")
    benchmarks = evaluate.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    hotpotqa = benchmarks.add_parser(
        "hotpotqa", help="HotpotQA as three-stage memory episodes: J, EM, F1, MQ, TN, TC (table, JSON, plot)"
    )
    _add_config_arguments(hotpotqa)
    hotpotqa.add_argument(
        "--model",
        action="append",
        metavar="M",
        help="a training run or checkpoint directory, a LoRA adapter or Hugging Face directory, a hub id, or "
        "openai:<model>@<base_url>; repeat to compare models side by side (default: policy.model)",
    )
    hotpotqa.add_argument(
        "--data", metavar="PATH", help="HotpotQA JSON file, datasets directory or hub id (data.source)"
    )
    hotpotqa.add_argument("--out", default="runs/eval/hotpotqa", metavar="DIR", help="output directory (resumable)")
    hotpotqa.add_argument(
        "--variant", action="append", choices=EVAL_VARIANTS, help="tool variant; repeat for several (default: agemem)"
    )
    hotpotqa.add_argument("--limit", type=int, metavar="N", help="evaluate the first N questions (data.limit)")
    handlers["eval"] = _cmd_eval

    config = commands.add_parser("config", help="print the resolved configuration as YAML")
    _add_config_arguments(config)
    handlers["config"] = _cmd_config

    tools = commands.add_parser("tools", help="print the six tool schemas (JSON lines) or the system prompt")
    tools.add_argument("--system-prompt", action="store_true", help="print the full system prompt instead")
    tools.add_argument("--format", choices=["agemem", "native"], default="agemem", help="tool format of the prompt")
    handlers["tools"] = _cmd_tools

    parser.set_defaults(handlers=handlers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # flags may come between overrides (`a=1 --resume b=2`): argparse leaves the later overrides over
    stray = [item for item in extra if "=" not in item or item.startswith("-")]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.handlers[args.command](args)
    except ConfigError as err:
        parser.exit(2, f"agemem {args.command}: configuration error: {err}\n")


if __name__ == "__main__":
    raise SystemExit(main())

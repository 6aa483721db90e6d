"""Rollout throughput of the batched driver against the same episodes played one request at a time.

B tasks x K rollouts are played by :class:`~agemem.rollouts.driver.RolloutDriver` in three modes, on
one model, one engine and one set of env resources, in the same process:

* ``batched``: the driver as it is: every tick, the pending requests of all live episodes go
  to the engine in ONE ``generate`` call (the engine cuts it into ``--batch-size`` micro-batches);
* ``one request at a time``: the same driver and ticks, but the engine is wrapped so each
  prompt of a tick is its own ``generate`` call; episode logic, env work and sampling
  settings are identical, only batching differs;
* ``one episode at a time``: ``rollout.max_live_episodes=1``: episodes played strictly one
  after another (every tick holds a single request).

With the tiny random policy a completion practically never emits the end-of-turn token and
never makes a valid tool call, so every LLM call generates exactly ``--max-tokens`` tokens and
every episode takes the same steps in every mode: the work is the same, and the table checks
it (generated tokens per mode; a warning is printed when they differ). Modes alternate, their
order rotating each repeat; the median over ``--repeats`` is reported. One untimed batched run
of all episodes comes first (the first ``generate`` is slow; it also fills the encoder's cache,
which every timed run then shares). The driver's progress bar is off in every timed run.

How to read it: ``ticks`` are the driver's rounds (one ``generate`` call from the driver each),
``engine calls`` the ``generate`` calls that reach the real engine, ``mean batch`` = LLM calls /
engine calls. ``engine s`` is time inside the driver's ``generate`` calls; ``other s`` (wall -
engine) is the episode/env side: chat-template rendering, token counting, tool parsing, LTM and
encoder. ``x ep/s`` and ``x tok/s`` are batched episodes/s (generated tokens/s) divided by the
row's: the speed-up batching buys over that row (equal to the wall-time ratio when the work matches).

On a CPU the tiny policy (hidden size 64, Qwen's 151k vocabulary) spends most of a decoding step
on vocabulary-sized work that grows with the batch: ``torch.multinomial`` over 151k ids alone
(``aten::exponential_``, ~2.3 ms per row per step on a 2-core CPU) is ~60% of a 16-prompt tick,
the ``[B, V]`` LM head, softmax and log-softmax most of the rest. Batching there saves little
beyond per-call overhead (expect ~1.5x); the speed-up that matters is the one on a GPU with a
real model (``--device cuda --model ...``), where a step's cost is reading the weights once for
the whole batch.

    python bench/rollout_driver.py                                   # 4 tasks x 4 rollouts, tiny CPU policy
    python bench/rollout_driver.py --quick                           # smoke test, < 30 s
    python bench/rollout_driver.py --data bundled:hotpotqa --repeats 3
    python bench/rollout_driver.py --device cuda --model Qwen/Qwen2.5-0.5B-Instruct --dtype bfloat16 \\
        --tasks 8 --k 8 --max-tokens 128 --stage-steps 8 5 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
from agemem.rollouts.driver import RolloutDriver, RolloutResult
from agemem.rollouts.engines.base import Completion, Engine, SamplingParams
from agemem.rollouts.policy import TINY_POLICY, load_policy
from agemem.tasks import load_tasks

BATCHED, ONE_REQUEST, ONE_EPISODE = "batched", "1 request/call", "1 live episode"
MODES = {"batched": BATCHED, "request": ONE_REQUEST, "episode": ONE_EPISODE}


class CountingEngine:
    """Counts the ``generate`` calls that reach the real engine (the driver counts its ticks, not these)."""

    def __init__(self, inner: Engine):
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        self.calls += 1
        return self.inner.generate(prompts, sampling, messages=messages)


class OneAtATimeEngine:
    """Forwards each prompt of a batch to the wrapped engine as its own ``generate`` call."""

    def __init__(self, inner: Engine):
        self.inner = inner
        self.name = f"{inner.name}-one-at-a-time"

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        completions: list[Completion] = []
        for i, prompt in enumerate(prompts):
            one = None if messages is None else [messages[i]]
            completions.extend(self.inner.generate([prompt], sampling, messages=one))
        return completions


def overrides_for(args: argparse.Namespace) -> list[str]:
    synthetic = args.data == "synthetic"
    s1, s2, s3 = args.stage_steps
    overrides = [
        f"data.source={args.data}",
        f"data.limit={args.tasks}",
        f"rollout.rollouts_per_task={args.k}",
        f"rollout.stage1_max_steps={s1}",
        f"rollout.stage2_max_steps={s2}",
        f"rollout.stage3_max_steps={s3}",
        f"rollout.max_steps_per_turn={args.steps_per_turn}",
        f"sampling.max_tokens={args.max_tokens}",
        f"policy.model={args.model}",
        f"policy.device={args.device}",
        f"policy.dtype={args.dtype}",
        f"engine.batch_size={args.batch_size}",
        f"distractors.generator={'task' if synthetic else 'corpus'}",
        "distractors.cache_dir=",
    ]
    if synthetic:
        overrides.append(f"data.synthetic.num_tasks={args.tasks}")
    return overrides + list(args.set)


def summarise(mode: str, runs: list[tuple[RolloutResult, int]], max_tokens: int) -> dict[str, Any]:
    """Counts of the first run (the same every repeat when the work matches), median times and their rates.

    ``runs`` holds each timed run with the number of ``generate`` calls that reached the real engine.
    """
    engine_calls = [n for _, n in runs]
    runs = [r for r, _ in runs]
    first = runs[0].stats
    wall = statistics.median(r.stats.wall_s for r in runs)
    engine = statistics.median(r.stats.engine_s for r in runs)
    stops = [sum(s.finish_reason == "stop" for t in r.trajectories for s in t.steps) for r in runs]
    return {
        "mode": mode,
        "episodes": first.episodes,
        "llm_calls": first.steps,
        "ticks": first.ticks,
        "engine_calls": engine_calls[0],
        "mean_batch": first.steps / engine_calls[0],
        "prompt_tokens": first.prompt_tokens,
        "generated_tokens": first.generated_tokens,
        "expected_generated_tokens": first.steps * max_tokens,
        "end_of_turn_stops": stops[0],
        "wall_s": wall,
        "engine_s": engine,
        "other_s": wall - engine,
        "episodes_per_s": first.episodes / wall,
        "generated_tokens_per_s": first.generated_tokens / wall,
        "counts_same_every_repeat": len({(r.stats.steps, r.stats.generated_tokens) for r in runs}) == 1,
        "runs": [
            {**r.stats.to_json(), "engine_calls": calls, "end_of_turn_stops": n}
            for r, calls, n in zip(runs, engine_calls, stops)
        ],
    }


def machine_info(model: Any, threads: int) -> dict[str, Any]:
    import torch
    import transformers

    device = model.device
    info = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "torch_threads": threads,
        "model_params": sum(p.numel() for p in model.parameters()),
        "model_dtype": str(next(model.parameters()).dtype),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="B: tasks")
    parser.add_argument("--k", type=int, default=4, help="K: rollouts per task")
    parser.add_argument("--max-tokens", type=int, default=16, help="sampling.max_tokens (response budget)")
    parser.add_argument("--data", default="synthetic", help="synthetic, bundled:hotpotqa, a HotpotQA path or hub id")
    parser.add_argument(
        "--stage-steps", type=int, nargs=3, default=[2, 1, 1], metavar=("S1", "S2", "S3"), help="stage round limits"
    )
    parser.add_argument("--steps-per-turn", type=int, default=3, help="rollout.max_steps_per_turn")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--model", default=TINY_POLICY, help="policy: the tiny random model, a local path or hub id")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--batch-size", type=int, default=32, help="engine micro-batch (engine.batch_size)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each mode (median reported)")
    parser.add_argument(
        "--modes", nargs="+", default=list(MODES), choices=list(MODES), help="batched, request, episode"
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra config overrides")
    parser.add_argument("--quick", action="store_true", help="tiny smoke config: 2 tasks x 2, 4 tokens, 1 step/stage")
    parser.add_argument("--out", default="bench/results/rollout_driver.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.k, args.max_tokens, args.stage_steps, args.repeats = 2, 2, 4, [1, 1, 1], 1
    if "batched" not in args.modes:
        args.modes = ["batched", *args.modes]
    return args


def main() -> None:
    args = parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = overrides_for(args)
    config = load_config(AgeMemConfig, None, overrides)
    console = Console()
    if not console.is_terminal:  # piped or redirected: do not squeeze the table into 80 columns
        console = Console(width=180)

    setup_start = time.perf_counter()
    model, tokenizer = load_policy(config.policy)
    tasks = load_tasks(config)
    resources = build_resources(config.env, tokenizer)
    pool = None if args.data == "synthetic" else load_tasks(config, apply_limit=False)
    distractors = distractors_for(config.distractors, tasks, resources.encoder, pool=pool)
    engine = CountingEngine(build_engine(config.engine, model, tokenizer))
    one_episode_config = dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, max_live_episodes=1))
    drivers: dict[str, RolloutDriver] = {
        BATCHED: build_driver(config.rollout, config.sampling, engine, tokenizer, resources, progress=False),
        ONE_REQUEST: build_driver(
            config.rollout, config.sampling, OneAtATimeEngine(engine), tokenizer, resources, progress=False
        ),
        ONE_EPISODE: build_driver(
            one_episode_config.rollout, one_episode_config.sampling, engine, tokenizer, resources, progress=False
        ),
    }
    modes = [MODES[m] for m in dict.fromkeys(args.modes)]
    setup_s = time.perf_counter() - setup_start

    warmup_start = time.perf_counter()
    drivers[BATCHED].run(tasks, distractors)
    OneAtATimeEngine(engine).generate([tokenizer.encode("warm-up")], drivers[BATCHED].sampling)
    warmup_s = time.perf_counter() - warmup_start

    runs: dict[str, list[tuple[RolloutResult, int]]] = {mode: [] for mode in modes}
    schedule = [modes[(r + i) % len(modes)] for r in range(args.repeats) for i in range(len(modes))]
    for mode in tqdm(schedule, desc="timed runs"):
        calls_before = engine.calls
        result = drivers[mode].run(tasks, distractors)
        runs[mode].append((result, engine.calls - calls_before))

    rows = {mode: summarise(mode, runs[mode], args.max_tokens) for mode in modes}
    base = rows[BATCHED]
    for row in rows.values():
        row["batched_over_this_episodes_per_s"] = base["episodes_per_s"] / row["episodes_per_s"]
        row["batched_over_this_tokens_per_s"] = base["generated_tokens_per_s"] / row["generated_tokens_per_s"]

    threads = torch.get_num_threads()
    title = (
        f"Rollout driver: {args.tasks} tasks x {args.k} rollouts, {args.data}, max_tokens={args.max_tokens}, "
        f"stage steps {'/'.join(map(str, args.stage_steps))}, {model.device}, {threads} threads, "
        f"median of {args.repeats}"
    )
    table = Table(title=title)
    columns = (
        "mode", "episodes", "LLM calls", "ticks", "engine calls", "mean batch", "prompt tok", "gen tok", "wall s",
        "engine s", "other s", "ep/s", "gen tok/s", "x ep/s", "x tok/s",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "mode" else "right", no_wrap=True)
    for row in rows.values():
        table.add_row(
            row["mode"],
            f"{row['episodes']}",
            f"{row['llm_calls']}",
            f"{row['ticks']}",
            f"{row['engine_calls']}",
            f"{row['mean_batch']:.1f}",
            f"{row['prompt_tokens']:,}",
            f"{row['generated_tokens']:,}",
            f"{row['wall_s']:.2f}",
            f"{row['engine_s']:.2f}",
            f"{row['other_s']:.2f}",
            f"{row['episodes_per_s']:.3f}",
            f"{row['generated_tokens_per_s']:.1f}",
            f"{row['batched_over_this_episodes_per_s']:.2f}x",
            f"{row['batched_over_this_tokens_per_s']:.2f}x",
        )
    console.print(table)

    generated = {row["generated_tokens"] for row in rows.values()}
    calls = {row["llm_calls"] for row in rows.values()}
    all_runs_same = all(row["counts_same_every_repeat"] for row in rows.values())
    tokens_match = len(generated) == 1 and len(calls) == 1 and all_runs_same
    stops = sum(row["end_of_turn_stops"] for row in rows.values())
    if tokens_match:
        console.print(
            f"same work in every mode and repeat: {calls.pop()} LLM calls, {generated.pop():,} generated tokens "
            f"({stops} end-of-turn stops)"
        )
    else:
        console.print(
            "[bold red]WARNING: the modes did not do the same work[/] (LLM calls "
            f"{sorted(calls)}, generated tokens {sorted(generated)}, {stops} end-of-turn stops; "
            f"same counts every repeat: {all_runs_same}); compare tokens/s rather than episodes/s",
            highlight=False,
        )
    console.print(f"setup {setup_s:.1f} s, warm-up (one untimed batched run) {warmup_s:.1f} s", highlight=False)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "machine": machine_info(model, threads),
        "args": vars(args),
        "overrides": overrides,
        "config": dataclasses.asdict(config),
        "work_matches": tokens_match,
        "setup_s": setup_s,
        "warmup_s": warmup_s,
        "results": list(rows.values()),
    }
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

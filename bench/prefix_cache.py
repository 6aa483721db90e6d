"""Rollout speed of the transformers engine with prefix caching on and off, on a real learned policy.

An agent's next prompt extends its last one (prompt, reply, tool response), so without reuse every step
re-reads the whole context. This plays ``--tasks`` synthetic tasks x ``--k`` rollouts, as one GRPO step of
``agemem learn`` does, with the warm-start policy of a seed directory ``agemem learn`` wrote (``--run``),
in one process, modes alternating (order rotating each repeat), and reports the median wall time, the
share of prompt tokens served from the cache and the speed-up. An untimed run comes first: it pays the
first calls' overhead and fills the encoder's cache, so the timed runs measure the engine and the
episodes, not MiniLM (in training the encoder adds about a second a step).

With ``--greedy`` both modes play the same episodes (caching changes no token, only float rounding in the
reused KV), which the table checks; sampled episodes (the default, as in training) differ between modes
because rows are batched by the tokens they still need to compute, so each row draws other random numbers.

    python bench/prefix_cache.py --run runs/learn/seed_0
    python bench/prefix_cache.py --run runs/learn/seed_0 --greedy --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rollout_driver import machine_info  # bench/ is the script's directory

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a seed directory `agemem learn` wrote (runs/learn/seed_0)")
    parser.add_argument("--config", default="configs/learn_cpu.yaml", help="the learn settings the run used")
    parser.add_argument("--tasks", type=int, default=8, help="tasks a rollout batch (train.tasks_per_step)")
    parser.add_argument("--k", type=int, default=8, help="rollouts per task")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--greedy", action="store_true", help="temperature 0: both modes play the same episodes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results/prefix_cache.json")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. engine.batch_size=64")
    return parser.parse_args()


def main() -> None:
    import torch

    from agemem.core.encoders import build_encoder
    from agemem.recipes.learn.recipe import synthetic_tasks
    from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
    from agemem.rollouts.engines.transformers_engine import DEFAULT_PREFIX_CACHE_TOKENS
    from agemem.rollouts.policy import load_policy

    args = parse_args()
    warm = Path(args.run) / "warm_start"
    if not (warm / "config.json").exists():
        raise SystemExit(f"--run {args.run}: no warm_start/ policy; run `agemem learn` first (it writes it)")
    try:
        config = load_config(AgeMemConfig, args.config, args.overrides)
    except ConfigError as err:
        raise SystemExit(str(err)) from err
    config = replace(
        config,
        policy=replace(config.policy, model=str(warm), tokenizer=str(warm)),
        rollout=replace(config.rollout, rollouts_per_task=args.k),
        sampling=replace(config.sampling, temperature=0.0) if args.greedy else config.sampling,
    )
    model, tokenizer = load_policy(config.policy)
    encoder = build_encoder(config.env.encoder)
    tasks = synthetic_tasks(config, args.tasks, generator_seed=10_000 + args.seed)
    distractors = distractors_for(config.distractors, tasks, encoder)
    modes = {"prefix cache off": 0, "prefix cache on": config.engine.prefix_cache_tokens or DEFAULT_PREFIX_CACHE_TOKENS}

    def play(capacity: int) -> tuple[dict[str, Any], list[list[int]]]:
        engine_config = replace(config, engine=replace(config.engine, prefix_cache_tokens=capacity))
        resources = build_resources(engine_config.env, tokenizer, encoder=encoder)
        engine = build_engine(engine_config.engine, model, tokenizer)
        driver = build_driver(
            engine_config.rollout, engine_config.sampling, engine, tokenizer, resources, progress=False
        )
        start = time.perf_counter()
        result = driver.run(list(tasks), distractors, seed=args.seed)
        wall = time.perf_counter() - start
        completions = [list(step.completion_ids) for t in result.trajectories for step in t.steps]
        return {"wall_s": wall, **result.stats.to_json()}, completions

    console = Console(width=120)
    play(modes["prefix cache on"])  # untimed: first calls are slow, and the encoder's cache fills
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    episodes: dict[str, list[list[int]]] = {}
    names = list(modes)
    for repeat in range(args.repeats):
        shift = repeat % len(names)
        for mode in names[shift:] + names[:shift]:
            stats, episodes[mode] = play(modes[mode])
            runs[mode].append(stats)
            console.print(f"repeat {repeat + 1}/{args.repeats}, {mode}: {stats['wall_s']:.1f} s")

    rows = {}
    for mode, results in runs.items():
        rows[mode] = {key: statistics.median(r[key] for r in results) for key in results[0]}
        rows[mode]["cached_share"] = rows[mode]["cached_prompt_tokens"] / max(1, rows[mode]["prompt_tokens"])
    reference = rows["prefix cache off"]["wall_s"]
    same = episodes["prefix cache off"] == episodes["prefix cache on"]
    decoding = "greedy" if args.greedy else "sampled"
    title = f"{args.tasks} tasks x {args.k} rollouts, {decoding} (median of {args.repeats})"
    table = Table(title=title)
    columns = ("mode", "wall s", "engine s", "LLM calls", "prompt tokens", "from cache", "generated", "speed-up")
    for column in columns:
        table.add_column(column, justify="right")
    for mode, row in rows.items():
        table.add_row(
            mode,
            f"{row['wall_s']:.1f}",
            f"{row['engine_s']:.1f}",
            f"{row['steps']:.0f}",
            f"{row['prompt_tokens']:,.0f}",
            f"{row['cached_share']:.0%}",
            f"{row['generated_tokens']:,.0f}",
            f"{reference / row['wall_s']:.2f}x",
        )
    console.print(table)
    if args.greedy:
        console.print("same episodes in both modes" if same else "[red]greedy episodes differ between the modes[/red]")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "args": vars(args),
        "machine": machine_info(model, torch.get_num_threads()),
        "modes": rows,
        "speedup": reference / rows["prefix cache on"]["wall_s"],
        "same_episodes": same,
    }
    out.write_text(json.dumps(report, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

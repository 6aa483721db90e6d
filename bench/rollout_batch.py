"""Rollout seconds of one GRPO step of a recipe at several engine micro-batch sizes (``engine.batch_size``).

`agemem learn` plays ``train.tasks_per_step`` x ``rollout.rollouts_per_task`` episodes a step (48 in
``configs/learn_cpu.yaml``) and the driver sends every live episode's request to the engine in one call a tick; the
transformers engine cuts that call into micro-batches of ``engine.batch_size`` rows (32 by default), decoded one after
the other. Fewer, wider micro-batches mean fewer forward passes, and on a 1.1M-parameter policy a forward pass costs
mostly its fixed overhead; wider ones also mix rows needing few fresh prompt columns (a cached prefix) with rows needing
many, and every row of a micro-batch computes the widest row's columns. Which wins is measured here.

The workload is one GRPO step as the config plays it: the policy (``--model``, e.g. a seed's warm start) plays
``--tasks`` tasks of the config's GRPO pool ``--k`` times, sampling as configured, under one sampling seed. Every batch
size plays the same episodes in the same process; sizes alternate, their order rotating each repeat, and the prefix
cache is emptied before each run. The median over ``--repeats`` is reported. Sampling draws from one random stream per
engine call, so a different cut draws different tokens: the episodes are alike, not identical, and the table shows each
run's generated tokens and tokens per second beside its seconds.

    python bench/rollout_batch.py --model runs/learn/seed_0/warm_start                  # 32 vs 48, 8 tasks x 6
    python bench/rollout_batch.py --model bundled:learn-warm-start --batch-sizes 16 32 48 --repeats 3
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
    parser.add_argument("--model", required=True, help="a policy directory or bundled:learn-warm-start")
    parser.add_argument("--config", default="configs/learn_cpu.yaml", help="task, env, rollout and sampling settings")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 48], help="engine.batch_size values")
    parser.add_argument("--tasks", type=int, default=0, help="tasks per step (0: the config's train.tasks_per_step)")
    parser.add_argument(
        "--k", type=int, default=0, help="rollouts per task (0: the config's rollout.rollouts_per_task)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="sampling seed of every run")
    parser.add_argument("--out", default="bench/results/rollout_batch.json")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    return parser.parse_args()


def play(driver: Any, engine: Any, tasks: list, distractors: dict, k: int, seed: int) -> dict[str, float]:
    """One timed run of every task ``k`` times; the prefix cache starts empty."""
    engine.sync_weights()  # empties the prefix cache: every run starts cold, as a GRPO step after a weight sync does
    start = time.perf_counter()
    result = driver.run(tasks, distractors, rollouts_per_task=k, seed=seed)
    wall = time.perf_counter() - start
    generated = sum(len(step.completion_ids) for t in result.trajectories for step in t.steps)
    return {"wall_s": wall, "generated_tokens": float(generated), "episodes": float(len(result.trajectories))}


def main() -> None:
    import torch

    from agemem.core.resources import resolve
    from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
    from agemem.rollouts.policy import load_policy
    from agemem.tasks import load_tasks

    args = parse_args()
    model_dir = Path(resolve(args.model)).expanduser()
    if not model_dir.is_dir():
        raise SystemExit(
            f"--model {args.model}: no such directory; `agemem learn` writes one at <run>/seed_0/warm_start"
        )
    if any(size < 1 for size in args.batch_sizes):
        raise SystemExit(f"--batch-sizes {args.batch_sizes}: every size must be >= 1")
    try:
        config = load_config(AgeMemConfig, args.config, args.overrides)
    except ConfigError as err:
        raise SystemExit(str(err)) from err
    config = replace(config, policy=replace(config.policy, model=str(model_dir), tokenizer=str(model_dir)))
    n_tasks = args.tasks or config.train.tasks_per_step
    k = args.k or config.rollout.rollouts_per_task
    synthetic = replace(config.data.synthetic, num_tasks=n_tasks)
    tasks = load_tasks(replace(config, data=replace(config.data, limit=0, synthetic=synthetic)))
    console = Console()

    model, tokenizer = load_policy(config.policy)
    resources = build_resources(config.env, tokenizer)
    engine = build_engine(config.engine, model, tokenizer)
    driver = build_driver(config.rollout, config.sampling, engine, tokenizer, resources, progress=False)
    distractors = distractors_for(config.distractors, tasks, resources.encoder)
    play(driver, engine, tasks, distractors, k, args.seed)  # untimed: the first generate is slow, the encoder warms

    runs: dict[int, list[dict[str, float]]] = {size: [] for size in args.batch_sizes}
    sizes = list(runs)
    for repeat in range(args.repeats):
        shift = repeat % len(sizes)
        for size in sizes[shift:] + sizes[:shift]:
            engine.batch_size = size
            runs[size].append(play(driver, engine, tasks, distractors, k, args.seed))
            console.print(f"repeat {repeat + 1}/{args.repeats} batch {size}: {runs[size][-1]['wall_s']:.1f} s")

    rows = {}
    for size, results in runs.items():
        rows[str(size)] = {
            "wall_s": statistics.median(r["wall_s"] for r in results),
            "generated_tokens": statistics.median(r["generated_tokens"] for r in results),
            "tokens_per_s": statistics.median(r["generated_tokens"] / r["wall_s"] for r in results),
            "runs": results,
        }
    base = rows[str(sizes[0])]
    table = Table(title=f"one step's rollouts: {n_tasks} tasks x {k}, {args.config}, median of {args.repeats}")
    for column in ("engine.batch_size", "micro-batches / tick (all live)", "wall s", "tokens", "tok/s", "x wall"):
        table.add_column(column, justify="right")
    for size in sizes:
        row = rows[str(size)]
        table.add_row(
            str(size),
            str(-(-n_tasks * k // size)),
            f"{row['wall_s']:.1f}",
            f"{row['generated_tokens']:.0f}",
            f"{row['tokens_per_s']:.0f}",
            f"{base['wall_s'] / row['wall_s']:.2f}x",
        )
    console.print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "what": "rollout seconds of one GRPO step at each engine.batch_size (bench/rollout_batch.py)",
        "args": vars(args),
        "machine": machine_info(engine.model, torch.get_num_threads()),
        "tasks": n_tasks,
        "rollouts_per_task": k,
        "rows": rows,
        "wall_ratio_to_first": {str(s): base["wall_s"] / rows[str(s)]["wall_s"] for s in sizes},
    }
    out.write_text(json.dumps(report, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

"""How fast does the recipe's scripted expert play its demonstrations, with and without the batched embedding
prefetch? Both arms play the same tasks through the real driver and environment of ``configs/learn_cpu.yaml`` (real
MiniLM encoder, its own fresh cache each, the real Qwen tokenizer): ``prefetch`` embeds every known text of the tasks
in batched calls before the episodes start (``CachedEncoder.prefetch``, what the driver does); ``one_by_one`` lets
the environment embed each text when a tool asks for it. Arms alternate, so both see the same machine load.

Prints a table and writes ``bench/results/expert_play.json``.

    python bench/expert_play.py                 # 100 tasks an arm, 3 repeats (~3 min on 2 cores)
    python bench/expert_play.py --tasks 20 --repeats 1 --out /tmp/expert_play.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import load_config
from agemem.core.encoders import CachedEncoder, build_encoder
from agemem.recipes.learn import LearnRunConfig
from agemem.recipes.learn.recipe import expert_habits, play_expert
from agemem.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


class OneByOne:
    """The cached encoder without ``prefetch``: the driver finds nothing to batch."""

    def __init__(self, inner):
        self.cached = CachedEncoder(inner)
        self.dim, self.name = inner.dim, inner.name

    def encode(self, texts):
        return self.cached.encode(texts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "expert_play.json"))
    args = parser.parse_args()
    overrides = [f"data.synthetic.num_tasks={args.tasks}", "data.synthetic.seed=11", "logging.progress=false"]
    config = load_config(LearnRunConfig, str(ROOT / "configs" / "learn_cpu.yaml"), overrides=overrides)
    habits = expert_habits(config.learn, seed=0)
    tokenizer = load_tokenizer()
    inner = build_encoder(config.env.encoder).inner  # the MiniLM itself; each arm gets a fresh cache around it
    tasks = load_tasks(config)
    seconds: dict[str, list[float]] = {"one_by_one": [], "prefetch": []}
    answers: dict[str, list] = {}
    for _ in range(args.repeats):
        for arm in seconds:
            encoder = OneByOne(inner) if arm == "one_by_one" else CachedEncoder(inner)
            started = time.perf_counter()
            trajectories = play_expert(config, tasks, tokenizer, encoder, habits)
            seconds[arm].append(time.perf_counter() - started)
            answers[arm] = [t.answer for t in trajectories]
    rows = {arm: {"median_s": statistics.median(s), "runs_s": [round(x, 2) for x in s]} for arm, s in seconds.items()}
    speedup = rows["one_by_one"]["median_s"] / rows["prefetch"]["median_s"]
    same = sum(a == b for a, b in zip(answers["one_by_one"], answers["prefetch"])) / len(tasks)
    table = Table(title=f"the recipe's expert playing {len(tasks)} tasks (median of {args.repeats})")
    for column in ("embedding", "seconds", "per task, ms"):
        table.add_column(column, justify="left" if column == "embedding" else "right")
    for arm, row in rows.items():
        table.add_row(arm, f"{row['median_s']:.1f}", f"{1000 * row['median_s'] / len(tasks):.0f}")
    console = Console()
    console.print(table)
    console.print(f"prefetch is {speedup:.2f}x faster; the same answers on {same:.0%} of tasks")
    record = {
        "what": "the recipe's scripted expert (configs/learn_cpu.yaml habits) playing the same tasks with the MiniLM "
        "encoder embedding each text when asked vs the driver's batched prefetch, alternating arms",
        "machine": f"{os.cpu_count()} CPU cores, {platform.system()}",
        "tasks": len(tasks),
        "arms": rows,
        "speedup": round(speedup, 2),
        "same_answers": same,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    console.print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Prompt lengths of the learn recipe's episodes: what the memory ids and the change results' echo cost.

The recipe's careful scripted expert (stores every fact, never a distractor, always retrieves, updates every
stale entry) plays the same revised synthetic tasks through the real driver and environment of
``configs/learn_cpu.yaml`` (the bundled warm start's tokenizer, the real MiniLM encoder), once for each setting of
``env.ltm.id_style`` (hash, short) and ``env.ltm.echo_changes`` (true, false). The SFT trains on whole Stage-1
prompts and GRPO plays them, so their length is the recipe's cost. Prints a table and writes
``bench/results/prompt_lengths.json``; docs/learning.md quotes it.

    python bench/prompt_lengths.py                  # 60 tasks, about 30 seconds on 2 cores
    python bench/prompt_lengths.py --tasks 20 --out /tmp/lengths.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import load_config
from agemem.core.encoders import build_encoder
from agemem.core.resources import resolve
from agemem.recipes.learn import LearnRunConfig
from agemem.recipes.learn.expert import ExpertHabits
from agemem.recipes.learn.recipe import play_expert
from agemem.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]
CAREFUL = ExpertHabits(store_fact=1.0, store_distractor=0.0, retrieve=1.0, update_stale=1.0)
SETTINGS = [(id_style, echo) for echo in ("true", "false") for id_style in ("hash", "short")]


def measure(tasks: int, seed: int, id_style: str, echo: str, tokenizer) -> dict:
    overrides = [
        f"data.synthetic.num_tasks={tasks}",
        f"data.synthetic.seed={seed}",
        "logging.progress=false",
        f"env.ltm.id_style={id_style}",
        f"env.ltm.echo_changes={echo}",
    ]
    config = load_config(LearnRunConfig, str(ROOT / "configs" / "learn_cpu.yaml"), overrides=overrides)
    task_set = load_tasks(config)
    trajectories = play_expert(config, task_set, tokenizer, build_encoder(config.env.encoder), CAREFUL)
    stage1 = [max(len(s.prompt_ids) for s in t.steps if s.stage == 1) for t in trajectories]
    later = [max(len(s.prompt_ids) for s in t.steps if s.stage > 1) for t in trajectories]
    played = [sum(len(s.prompt_ids) + len(s.completion_ids) for s in t.steps) for t in trajectories]
    correct = sum(t.answer == task.answer for t, task in zip(trajectories, task_set, strict=True))
    return {
        "id_style": id_style,
        "echo_changes": echo == "true",
        "stage1_longest_prompt_mean": statistics.mean(stage1),
        "stage1_longest_prompt_max": max(stage1),
        "stage2_3_longest_prompt_mean": statistics.mean(later),
        "tokens_per_episode_mean": statistics.mean(played),
        "exact_match": correct / len(task_set),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7, help="the synthetic generator's seed")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "prompt_lengths.json"))
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 140)
    tokenizer = load_tokenizer(str(resolve("bundled:learn-warm-start")))
    rows = [measure(args.tasks, args.seed, id_style, echo, tokenizer) for id_style, echo in SETTINGS]
    base = rows[0]["tokens_per_episode_mean"]
    table = Table(title=f"the careful expert on {args.tasks} revised tasks (the recipe's tokenizer)")
    for column in ("ids", "echo", "Stage-1 longest prompt", "Stage 2-3 longest", "tokens/episode", "vs hash+echo"):
        table.add_column(column, justify="left" if column in ("ids", "echo") else "right")
    for row in rows:
        table.add_row(
            row["id_style"],
            str(row["echo_changes"]).lower(),
            f"{row['stage1_longest_prompt_mean']:.0f} (max {row['stage1_longest_prompt_max']})",
            f"{row['stage2_3_longest_prompt_mean']:.0f}",
            f"{row['tokens_per_episode_mean']:.0f}",
            f"{row['tokens_per_episode_mean'] / base:.2f}",
        )
    console.print(table)
    record = {
        "what": "prompt lengths of the careful expert's episodes on configs/learn_cpu.yaml's revised tasks, per "
        "env.ltm.id_style and env.ltm.echo_changes (tokens of the bundled warm start's tokenizer)",
        "machine": f"{os.cpu_count()} CPU cores, {platform.system()}",
        "tasks": args.tasks,
        "seed": args.seed,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    console.print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

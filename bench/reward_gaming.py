"""What each scripted agent earns under the effect reading of the reward terms and under the paper's letter.

Agents (``tests/rewards/agents.py``): an ideal one (stores the facts, filters the distractors, retrieves, answers
right), degraded ones, and farmers that do an agent's work plus a habit that collects a term without its effect
(a Filter_context that removes nothing, a memory rewritten with its own text, a memory deleted and added back,
three retrievals instead of one). Each plays the same synthetic tasks through the real driver and environment
(real Qwen tokenizer, word-set encoder, rule judge); only the reward's reading (``reward.terms``) changes.

``gain`` is a farmer's mean total minus that of the same agent without the habit: what farming pays.

    python bench/reward_gaming.py                 # 8 synthetic tasks
    python bench/reward_gaming.py --tasks 3 --out /tmp/gaming.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ holds the scripted agents

from rich.console import Console
from rich.table import Table

from agemem.core.chat import load_tokenizer
from agemem.rollouts.synthetic import generate_synthetic_tasks
from tests.rewards.agents import FARMERS, VARIANTS, play_variant

READINGS = ("effects", "paper")
TERMS = ("context/preventive", "context/preservation", "memory/maintenance", "context/compression")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--out", default="bench/results/reward_gaming.json")
    args = parser.parse_args()

    tokenizer = load_tokenizer()
    tasks = generate_synthetic_tasks(args.tasks, seed=args.seed)
    rows: dict[str, dict[str, dict[str, float]]] = {name: {} for name in VARIANTS}
    for reading in READINGS:
        for name in VARIANTS:
            total, breakdowns = play_variant(name, tasks, tokenizer, reading)
            means = {term: sum(b[term] for b in breakdowns) / len(breakdowns) for term in TERMS}
            rows[name][reading] = {"total": total, **means}
    for farmer, twin in FARMERS.items():
        for reading in READINGS:
            rows[farmer][reading]["gain"] = rows[farmer][reading]["total"] - rows[twin][reading]["total"]

    table = Table(title=f"mean reward over {args.tasks} synthetic tasks (rule judge)")
    table.add_column("agent")
    for reading in READINGS:
        table.add_column(f"total ({reading})", justify="right")
        table.add_column(f"gain ({reading})", justify="right")
    for reading in READINGS:
        table.add_column(f"prev. / pres. / maint. ({reading})", justify="right")
    for name, by_reading in rows.items():
        cells = [name]
        for reading in READINGS:
            row = by_reading[reading]
            cells += [f"{row['total']:+.4f}", f"{row['gain']:+.4f}" if "gain" in row else ""]
        for reading in READINGS:
            row = by_reading[reading]
            cells.append(
                f"{row['context/preventive']:.2f} / {row['context/preservation']:.2f} / {row['memory/maintenance']:.2f}"
            )
        table.add_row(*cells)
    Console(width=170).print(table)

    report = {
        "what": "mean composite reward of scripted agents under reward.terms=effects and =paper; gain = a farmer's "
        "total minus the same agent's without the habit",
        "source": {
            "command": f"python bench/reward_gaming.py --tasks {args.tasks} --seed {args.seed}",
            "commit": subprocess.run(
                ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
            ).stdout.strip(),
            "machine": f"{os.cpu_count()} CPU cores",
        },
        "tasks": args.tasks,
        "twins": FARMERS,
        "agents": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""What each scripted agent earns under the effect reading of the reward terms and under the paper's letter.

Agents (``tests/rewards/agents.py``): an ideal one (stores the facts, filters the distractors, retrieves, answers
right), degraded ones, and farmers that do an agent's work plus a habit that collects a term without its effect
(a Filter_context that removes nothing, a memory rewritten with its own text, a memory deleted and added back,
three retrievals instead of one). Each plays the same synthetic tasks through the real driver and environment
(real Qwen tokenizer, word-set encoder, rule judge); only the reward's reading (``reward.terms``) changes.

``gain`` is a farmer's mean total minus that of the same agent without the habit: what farming pays.

The second table is the property test's (``tests/rewards/test_neutral_habits.py``) on more tasks: every neutral
habit (``tests/rewards/habits.py``: a call whose effect is erased before the answer, or that leaves memory and the
answer-time context unchanged up to formatting and duplicates) inserted into four agents of different quality, and
the habits that are not neutral beside them; its gain is the largest, over the four agents, of the mean total with
the habit minus without.

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
from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.rewards.agents import FARMERS, VARIANTS, play_variant
from tests.rewards.habits import AGENTS, HABITS, NOT_NEUTRAL, play, score

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
    habits = habit_gains(tasks, tokenizer)
    habit_table = Table(title=f"habits: largest mean gain over {len(AGENTS)} agents, {args.tasks} tasks")
    for column in ("habit", "neutral", "gain (effects)", "gain (paper)", "agent (paper)"):
        habit_table.add_column(column, justify="left" if column in ("habit", "agent (paper)") else "right")
    for label, row in habits.items():
        paper_agent = max(row["paper"], key=row["paper"].get)
        habit_table.add_row(
            label,
            "yes" if row["neutral"] else "no",
            f"{max(row['effects'].values()):+.4f}",
            f"{max(row['paper'].values()):+.4f}",
            paper_agent,
        )
    Console(width=170).print(habit_table)

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
        "habits": habits,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


def habit_gains(tasks, tokenizer) -> dict[str, dict]:
    """Per habit: whether it is neutral, and per agent the mean total with it minus without, under each reading."""
    honest = {}
    for agent in AGENTS:
        trajectories = play(tasks, tokenizer, agent)
        honest[agent] = {reading: _mean_total(score(trajectories, tasks, reading)) for reading in READINGS}
    out: dict[str, dict] = {}
    for habit in [*HABITS, *NOT_NEUTRAL]:
        row: dict = {"neutral": habit.neutral, "effects": {}, "paper": {}}
        for agent in AGENTS:
            trajectories = play(tasks, tokenizer, agent, habit)
            for reading in READINGS:
                row[reading][agent] = _mean_total(score(trajectories, tasks, reading)) - honest[agent][reading]
        out[habit.label] = row
    return out


def _mean_total(breakdowns) -> float:
    return sum(b["total"] for b in breakdowns) / len(breakdowns)


if __name__ == "__main__":
    main()

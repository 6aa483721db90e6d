"""What `agemem rollout` reports: the behaviour summary, its table, the rewrite.

The command itself, ``run_rollouts``, is :func:`agemem.tasks.rollout.run_rollouts` (it needs the task registry).
Rewards are not computed here (rollouts/ does not score): the caller scores with a
:class:`agemem.rewards.base.TrajectoryScorer`, and the scored trajectories replace the file in one rename.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from rich.table import Table

from agemem.core.files import atomic_open
from agemem.core.text import normalize_answer
from agemem.rollouts.driver import RolloutStats
from agemem.rollouts.records import Trajectory


def summarize_trajectories(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Per-episode means of what the agent did; behaviour only, rewards come from rewards/."""
    if not trajectories:
        return {"episodes": 0}

    def per_episode(count) -> float:
        return round(mean(count(t) for t in trajectories), 3)

    return {
        "episodes": len(trajectories),
        "answered": per_episode(lambda t: t.answer is not None),
        "exact_match": per_episode(
            lambda t: t.answer is not None and normalize_answer(t.answer) == normalize_answer(t.gold_answer)
        ),
        "steps": per_episode(lambda t: len(t.action_steps)),
        "summary_generations": per_episode(lambda t: len(t.steps) - len(t.action_steps)),
        "stage1_steps": per_episode(lambda t: sum(s.kind == "action" for s in t.stage_steps(1))),
        "stage2_steps": per_episode(lambda t: sum(s.kind == "action" for s in t.stage_steps(2))),
        "stage3_steps": per_episode(lambda t: sum(s.kind == "action" for s in t.stage_steps(3))),
        "memory_adds": per_episode(lambda t: len(t.stats.ops("add"))),
        "memory_updates": per_episode(lambda t: len(t.stats.ops("update"))),
        "memory_deletes": per_episode(lambda t: len(t.stats.ops("delete"))),
        "retrievals": per_episode(lambda t: len(t.stats.retrievals)),
        "summaries": per_episode(lambda t: len(t.stats.summaries)),
        "filters": per_episode(lambda t: len(t.stats.filters)),
        "summary_failures": per_episode(lambda t: t.stats.summary_failures),
        "violations_per_step": round(
            sum(len(s.violations) for t in trajectories for s in t.action_steps)
            / max(1, sum(len(t.action_steps) for t in trajectories)),
            3,
        ),
        "overflow": per_episode(lambda t: t.stats.overflow),
        "limit_hits": per_episode(lambda t: len(t.limit_hits)),
        "max_context_tokens": max(t.stats.max_context_tokens for t in trajectories),
        "tool_calls": {
            name: round(sum(t.stats.tool_counts[name] for t in trajectories) / len(trajectories), 3)
            for name in sorted({name for t in trajectories for name in t.stats.tool_counts})
        },
        "ended_by": {
            reason: sum(t.ended_by == reason for t in trajectories)
            for reason in sorted({t.ended_by for t in trajectories})
        },
    }


THROUGHPUT_LABELS = {
    "steps": "LLM calls (agent steps + policy summaries)",
    "ticks": "engine calls",
    "mean_batch": "LLM calls per engine call",
}
"""the throughput counters whose names would read like the behaviour rows' (``episodes`` is not repeated)."""


def summary_table(
    summary: dict[str, Any],
    stats: RolloutStats,
    rewards: dict[str, float] | None = None,
    reward_terms: Collection[str] = (),
) -> Table:
    """Four sections, each saying what its numbers are: behaviour (per episode), the reward terms (batch means;
    ``reward_terms`` names them), the reward's diagnostics (counts behind the terms, batch means), throughput."""
    table = Table(title="rollouts", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("[bold]behaviour[/] (mean per episode; max context tokens: the largest)", "")
    for key, value in summary.items():
        table.add_row(key.replace("_", " "), str(value))
    rewards = rewards or {}
    terms = {k: v for k, v in rewards.items() if k in reward_terms}
    counts = {k: v for k, v in rewards.items() if k not in reward_terms}
    for title, section in (("reward terms", terms), ("reward diagnostics: what the terms were computed from", counts)):
        if section:
            table.add_section()
            table.add_row(f"[bold]{title}[/] (batch mean)", "")
            for key, value in section.items():
                table.add_row(key, f"{value:.3f}")
    table.add_section()
    table.add_row("[bold]throughput[/] (the whole run)", "")
    for key, value in stats.to_json().items():
        if key != "episodes":
            table.add_row(THROUGHPUT_LABELS.get(key, key.replace("_", " ")), str(value))
    return table


def rewrite_trajectories(path: Path, trajectories: Sequence[Trajectory]) -> None:
    """Replace ``path`` by ``trajectories`` in one rename: a reader sees the old file or the new, never half."""
    with atomic_open(path) as handle:
        handle.writelines(json.dumps(t.to_json(), ensure_ascii=False) + "\n" for t in trajectories)

"""Benchmark-independent evaluation metrics, as small pure functions of finished trajectories.

Names follow the AgeMem paper: TN (prompt tokens per step of the task stage) and TC (tool calls per
episode). Answer metrics live with their benchmark (HotpotQA EM / F1 in :mod:`agemem.rewards.judges`, ALFWorld
success in :mod:`agemem.eval.games`). The step-level forms (:func:`count_tool_calls`, :func:`prompt_tokens`)
serve episodes that are not three-stage trajectories (ALFWorld games).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from agemem.core.tools import TOOL_NAMES

if TYPE_CHECKING:
    from agemem.rollouts.records import Step, Trajectory


def tool_calls(trajectory: Trajectory, offered: Sequence[str] = TOOL_NAMES) -> dict[str, int]:
    """One episode's TC: ``{tool: calls}`` for each of the six tools and each other tool offered, plus ``total``.

    A call counts when the agent called a tool it was offered (``offered``), whether its arguments
    were valid or not; a call to a tool it was not offered is an unknown-tool error and counts 0.
    ``total = Σ_tool calls``.
    """
    return count_tool_calls(trajectory.action_steps, offered)


def count_tool_calls(steps: Iterable[Step], offered: Sequence[str] = TOOL_NAMES) -> dict[str, int]:
    """:func:`tool_calls` over any agent steps (``kind == "action"``): ``{tool: calls}`` and ``total``."""
    counts = dict.fromkeys([*TOOL_NAMES, *(name for name in offered if name not in TOOL_NAMES)], 0)
    for step in steps:
        if step.kind != "action":
            continue
        for call in step.tool_calls:
            if call["name"] in offered and call["name"] in counts:
                counts[call["name"]] += 1
    counts["total"] = sum(counts.values())
    return counts


def stage_prompt_tokens(trajectory: Trajectory, stage: int = 3) -> tuple[int, int]:
    """``(Σ prompt tokens, n)`` over the n agent steps of ``stage`` (prompt tokens: what the engine saw,
    chat template included, counted with the policy's tokenizer)."""
    return prompt_tokens(trajectory.action_steps, stage)


def prompt_tokens(steps: Iterable[Step], stage: int | None = None) -> tuple[int, int]:
    """``(Σ prompt tokens, n)`` over the n agent steps (``kind == "action"``) of ``stage`` (None: every stage)."""
    chosen = [s for s in steps if s.kind == "action" and (stage is None or s.stage == stage)]
    return sum(s.context_tokens for s in chosen), len(chosen)


def pooled_mean(sums: Iterable[float], counts: Iterable[int]) -> float | None:
    """``Σ sums / Σ counts``: TN = all Stage-3 prompt tokens / all Stage-3 steps; None when no step."""
    total, n = sum(sums), sum(counts)
    return total / n if n else None


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are not None; None when there are none."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def percent(values: Iterable[float | None]) -> float | None:
    """``100 · mean``: J, EM, F1 and ALFWorld's SR are reported in percent."""
    value = mean(values)
    return None if value is None else 100.0 * value


def percent_by(pairs: Iterable[tuple[str, float]], groups: Sequence[str]) -> dict[str, float | None]:
    """``{group: 100 · mean of its values}`` for ``(group, value)`` pairs (ALFWorld SR per task type); a group
    without values is None."""
    values: dict[str, list[float]] = {group: [] for group in groups}
    for group, value in pairs:
        values.setdefault(group, []).append(value)
    return {group: percent(values[group]) for group in values}


def mean_tool_calls(per_episode: Sequence[dict[str, int]]) -> dict[str, float]:
    """TC over a run: the mean over episodes of each tool's calls (the six, then any other offered) and of the total."""
    others = sorted({key for e in per_episode for key in e} - {*TOOL_NAMES, "total"})
    keys = [*TOOL_NAMES, *others, "total"]
    n = len(per_episode)
    return {key: (sum(e.get(key, 0) for e in per_episode) / n if n else 0.0) for key in keys}


COST_FIELDS = (
    "agent_calls",
    "agent_prompt_tokens",
    "agent_completion_tokens",
    "memory_calls",
    "memory_prompt_tokens",
    "memory_completion_tokens",
    "memory_s",
)
"""what one task cost in LLM use: the agent's own calls (every step it generated, summaries included) and a
memory system's calls (the baselines' extraction, update and search)."""


def llm_cost(steps: Iterable[Step], memory_system_cost: dict[str, float]) -> dict[str, float]:
    """One task's :data:`COST_FIELDS`: the agent's calls and tokens counted from its steps, the memory system's
    from what the environment booked (:attr:`agemem.core.env.EpisodeStats.memory_system_cost`)."""
    steps = list(steps)
    return {
        "agent_calls": float(len(steps)),
        "agent_prompt_tokens": float(sum(len(s.prompt_ids) for s in steps)),
        "agent_completion_tokens": float(sum(len(s.completion_ids) for s in steps)),
        "memory_calls": memory_system_cost.get("calls", 0.0),
        "memory_prompt_tokens": memory_system_cost.get("prompt_tokens", 0.0),
        "memory_completion_tokens": memory_system_cost.get("completion_tokens", 0.0),
        "memory_s": round(memory_system_cost.get("seconds", 0.0), 4),
    }


def mean_cost(per_task: Sequence[dict[str, float] | None]) -> dict[str, float | None]:
    """Per-task means of :data:`COST_FIELDS`, plus ``llm_calls`` and ``tokens`` (agent and memory system
    together); records written before costs were kept count as missing."""
    known = [c for c in per_task if c]
    means: dict[str, float | None] = {key: mean(c.get(key, 0.0) for c in known) for key in COST_FIELDS}
    if not known:
        return {**means, "llm_calls": None, "tokens": None}
    calls = mean(c.get("agent_calls", 0.0) + c.get("memory_calls", 0.0) for c in known)
    tokens = mean(
        sum(c.get(k, 0.0) for k in ("agent_prompt_tokens", "agent_completion_tokens", "memory_prompt_tokens"))
        + c.get("memory_completion_tokens", 0.0)
        for c in known
    )
    return {**means, "llm_calls": calls, "tokens": tokens}

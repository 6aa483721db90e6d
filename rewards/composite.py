"""Scoring finished trajectories: judge calls batched across trajectories, then the pure terms.

``score_trajectories`` asks the judge once per role for a whole batch (answers; the memory entries, those storage
judges and those Stage 1 stored as the episode ended them, each distinct entry of a task once; Stage-3 retrievals),
then assembles every term and sub-term of each trajectory into a flat breakdown (logged by the trainer) whose
``total`` is the reward. The whole trajectory counts: Stage-1 adds and Stage-2 context actions included (defect 3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agemem.rewards import terms
from agemem.rewards.base import AnswerItem, Judge, MemoryItem, RelevanceItem
from agemem.rewards.config import RewardConfig
from agemem.rewards.registry import extra_terms
from agemem.rollouts.records import Step, Task, Trajectory


@dataclass(frozen=True)
class TermReadings:
    """How the call-based terms read an episode (``reward.terms``; see :mod:`agemem.rewards.terms`)."""

    management_steps: Callable[..., list[int]]
    maintenance_count: Callable[..., int]
    preservation_items: Callable[..., list[str]]
    stored_entries: Callable[..., list[str]]
    maintenance_reward: Callable[[int, float, float], float]
    """R_maintenance from (maintenance counted, Q_stage1 = R_storage, Q_final)."""
    context_state_share: Callable[[float | None], float]
    """the share of R_compression and R_preservation paid, from the answer's judge score (None: no answer)."""


TERM_READINGS: dict[str, TermReadings] = {
    "paper": TermReadings(
        terms.management_steps_paper,
        terms.maintenance_count_paper,
        terms.preservation_items_paper,
        terms.stored_entries_paper,
        terms.maintenance_reward_paper,
        terms.context_state_share_paper,
    ),
    "effects": TermReadings(
        terms.management_steps_effective,
        terms.maintenance_count_effective,
        terms.preservation_items_needed,
        terms.stored_entries_held,
        terms.maintenance_reward_effective,
        terms.context_state_share_by_answer,
    ),
}
ROUND_LIMIT_SCOPES: dict[str, Callable[[Sequence[dict]], bool]] = {
    "all": terms.round_limit_hits_all,
    "stage3": terms.round_limit_hits_stage3,
}
REWARD_TERMS = (
    "total", "task", "context", "context/compression", "context/preventive", "context/preservation",
    "memory", "memory/storage", "memory/maintenance", "memory/relevance",
    "penalty", "penalty/round_limit", "penalty/overflow",
)  # fmt: skip
"""the breakdown's reward terms; its other keys are diagnostics (the counts the terms were computed from)."""


def mean_breakdown(breakdowns: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of every term over a batch, plus ``total_std`` (population std of the totals)."""
    if not breakdowns:
        return {}
    n = len(breakdowns)
    means = {key: sum(b[key] for b in breakdowns) / n for key in breakdowns[0]}
    means["total_std"] = (sum((b["total"] - means["total"]) ** 2 for b in breakdowns) / n) ** 0.5
    return means


def answer_step(trajectory: Trajectory) -> Step | None:
    """The step the context is judged at: the answering step, else the last agent step."""
    actions = trajectory.action_steps
    answered = [s for s in actions if s.stage == 3 and s.answer is not None]
    return answered[-1] if answered else (actions[-1] if actions else None)


def answer_context_text(trajectory: Trajectory, step: Step | None) -> str:
    """What R_preservation searches: :func:`terms.kept_context_text` of the context the env recorded at the agent's
    last step (the answering step: the same one :func:`answer_step` picks). A trajectory recorded before the env
    kept that context falls back to the step's decoded prompt without the question."""
    if trajectory.stats.prompt_context is not None:
        return terms.kept_context_text(trajectory.stats.prompt_context)
    return step.prompt_text.replace(trajectory.question, "") if step else ""


def score_trajectories(
    trajectories: Sequence[Trajectory],
    tasks: Mapping[str, Task],
    judge: Judge,
    config: RewardConfig,
    token_budget: int,
) -> list[dict[str, float]]:
    """One reward breakdown per trajectory (also stored in ``trajectory.reward``)."""
    answered = [t for t in trajectories if t.answer is not None]
    answer_scores = dict(
        zip(
            (id(t) for t in answered),
            judge.answer_scores([AnswerItem(t.question, t.answer or "", t.gold_answer) for t in answered]),
        )
    )
    stored = TERM_READINGS[config.terms].stored_entries
    entries = {id(t): stored(t.stats.memory_ops) for t in trajectories}
    finals = {id(t): terms.stage1_entries_at_end(t.stats.memory_ops) for t in trajectories}
    facts_of = {id(t): tuple(f.text for f in tasks[t.task_id].supporting_facts) for t in trajectories}
    # one judge call per distinct (entry, supporting facts): an entry storage judged and still held at the end, or
    # stored by several rollouts of a task, is scored once
    memory_items = list(
        dict.fromkeys(
            MemoryItem(content, facts_of[id(t)]) for t in trajectories for content in (*entries[id(t)], *finals[id(t)])
        )
    )
    memory_scores = dict(zip(memory_items, judge.memory_scores(memory_items)))
    retrievals = {id(t): [r for r in t.stats.retrievals if r.stage == 3] for t in trajectories}
    relevance_items = [RelevanceItem(t.question, tuple(r.contents)) for t in trajectories for r in retrievals[id(t)]]
    relevance_scores = iter(judge.relevance_scores(relevance_items))

    breakdowns = []
    for trajectory in trajectories:
        entry_scores = [memory_scores[MemoryItem(c, facts_of[id(trajectory)])] for c in entries[id(trajectory)]]
        final_scores = [memory_scores[MemoryItem(c, facts_of[id(trajectory)])] for c in finals[id(trajectory)]]
        retrieval_scores = [next(relevance_scores) for _ in retrievals[id(trajectory)]]
        facts = [f.text for f in tasks[trajectory.task_id].supporting_facts if f.text]
        breakdown = reward_breakdown(
            trajectory,
            answer_scores.get(id(trajectory)),
            entry_scores,
            retrieval_scores,
            config,
            token_budget,
            facts,
            final_scores=final_scores,
        )
        trajectory.reward = breakdown
        breakdowns.append(breakdown)
    return breakdowns


def reward_breakdown(
    trajectory: Trajectory,
    answer_score: float | None,
    entry_scores: Sequence[float],
    retrieval_scores: Sequence[float],
    config: RewardConfig,
    token_budget: int,
    facts: Sequence[str] = (),
    *,
    final_scores: Sequence[float] = (),
) -> dict[str, float]:
    """Every term and sub-term of one trajectory, given the judge's scores for it and its task's supporting-fact
    sentences (``facts``: what preservation looks for under ``reward.terms=effects``).

    ``entry_scores`` are the scores of the entries storage judges (``TermReadings.stored_entries``), ``final_scores``
    those of the entries Stage 1 stored as the episode ended them (:func:`terms.stage1_entries_at_end`), from which
    Q_final is computed for maintenance under ``effects`` (:func:`terms.maintenance_reward_effective`); none (a caller
    that judges no memory, as a game) gives Q_final = 0, so maintenance pays nothing there under ``effects``."""
    stats = trajectory.stats
    reading = TERM_READINGS[config.terms]
    step = answer_step(trajectory)
    tokens_used = step.context_tokens if step else 0
    context_text = answer_context_text(trajectory, step)
    summaries = terms.summary_sources(stats.prompt_context or [], stats.summaries)
    management = reading.management_steps(stats.summaries, stats.filters, stats.resets)
    maintained = reading.maintenance_count(stats.memory_ops)
    items = reading.preservation_items(trajectory.question, facts, trajectory.distractors)
    round_limit_hit = ROUND_LIMIT_SCOPES[config.round_limit_scope](trajectory.limit_hits)

    r_task = terms.task_reward(answer_score)
    state_share = reading.context_state_share(answer_score)
    compression = state_share * terms.compression_reward(tokens_used, token_budget)
    preventive = terms.preventive_reward(management, stats.first_overflow_step)
    preservation = state_share * terms.preservation_reward(items, context_text, summaries)
    r_context = terms.context_reward(compression, preventive, preservation)
    storage = terms.storage_reward(entry_scores, config.storage_threshold)
    quality_final = terms.storage_reward(final_scores, config.storage_threshold)
    maintenance = reading.maintenance_reward(maintained, storage, quality_final)
    relevance = terms.relevance_reward(retrieval_scores)
    r_memory = terms.memory_reward(storage, maintenance, relevance)
    violations = sum(len(s.violations) for s in trajectory.action_steps)
    penalties = terms.penalty(
        round_limit_hit,
        stats.overflow,
        violations,
        round_limit_penalty=config.round_limit_penalty,
        overflow_penalty=config.overflow_penalty,
        format_penalty=config.format_penalty,
    )
    if config.mode == "answer_only":
        total = terms.answer_only_reward(r_task, penalties)
    else:
        weights = (config.w_task, config.w_context, config.w_memory)
        total = terms.composite_reward(r_task, r_context, r_memory, penalties, weights)
    extras, paid = extra_terms(trajectory, facts, config.term_weights)
    return {
        "total": total + paid,
        "task": r_task,
        "context": r_context,
        "context/compression": compression,
        "context/preventive": preventive,
        "context/preservation": preservation,
        "memory": r_memory,
        "memory/storage": storage,
        "memory/maintenance": maintenance,
        "memory/relevance": relevance,
        "penalty": penalties,
        "penalty/round_limit": float(round_limit_hit),
        "penalty/overflow": float(stats.overflow),
        "violations": float(violations),
        "context/tokens_used": float(tokens_used),
        "context/state_share": state_share,
        "memory/stage1_adds": float(len(stats.ops("add", stage=1))),
        "memory/stored_judged": float(len(entry_scores)),
        "memory/retrievals": float(len(retrieval_scores)),
        "context/management_calls": float(len(stats.summaries) + len(stats.filters)),
        "context/management_effective": float(len(management)),
        "memory/maintenance_ops": float(len(stats.ops("update")) + len(stats.ops("delete"))),
        "memory/maintained": float(maintained),
        "memory/quality_final": quality_final,
        "memory/final_judged": float(len(final_scores)),
        **extras,
    }

"""Scoring finished trajectories: judge calls batched across trajectories, then the pure terms.

``score_trajectories`` asks the judge once per role for a whole batch (answers; the memory entries, those storage
judges and those Stage 1 stored as the episode ended them, each distinct entry of a task once; Stage-3 retrievals),
then assembles every term and sub-term of each trajectory into a flat breakdown (logged by the trainer) whose
``total`` is the reward. The whole trajectory counts: Stage-1 adds and Stage-2 context actions included (defect 3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agemem.core.configlib import ConfigError
from agemem.rewards import terms
from agemem.rewards.base import AnswerItem, Judge, MemoryItem, RelevanceItem
from agemem.rewards.config import RewardConfig
from agemem.rewards.registry import extra_terms
from agemem.rollouts.records import Step, Task, Trajectory

if TYPE_CHECKING:
    from agemem.core.env import MemoryOpRecord


@dataclass(frozen=True)
class MaintenanceEvidence:
    """What the maintenance readings read of one trajectory."""

    ops: Sequence[MemoryOpRecord]
    """its memory operations, in order."""
    supersessions: tuple[terms.Supersession, ...]
    """the task's facts that a later message changed (``reward.terms=current``; empty otherwise)."""
    shown_at: Mapping[str, int]
    """per changing sentence, the first env step whose prompt held it (:func:`change_shown_at`)."""


@dataclass(frozen=True)
class TermReadings:
    """How the call-based terms read an episode (``reward.terms``; see :mod:`agemem.rewards.terms`)."""

    management_steps: Callable[..., list[int]]
    preservation_items: Callable[..., list[str]]
    stored_entries: Callable[..., list[str]]
    maintenance: Callable[[MaintenanceEvidence, float, float], tuple[int, float]]
    """(maintenance counted, R_maintenance) from the evidence, Q_stage1 = R_storage and Q_final."""
    context_state_share: Callable[[float | None], float]
    """the share of R_compression and R_preservation paid, from the answer's judge score (None: no answer)."""
    storage_facts: Callable[[Task], tuple[tuple[str, ...], tuple[terms.Supersession, ...]]]
    """(the sentences the judge scores stored entries against, the superseded facts that zero an entry)."""


def maintenance_paper(evidence: MaintenanceEvidence, quality_stage1: float, quality_final: float) -> tuple[int, float]:
    """Every successful Update/Delete counts; R_maintenance = 1 when one did (Eq. 24's letter)."""
    count = terms.maintenance_count_paper(evidence.ops)
    return count, terms.maintenance_reward_paper(count, quality_stage1, quality_final)


def maintenance_effects(
    evidence: MaintenanceEvidence, quality_stage1: float, quality_final: float
) -> tuple[int, float]:
    """Meanings changed in what a stage began with; R_maintenance = the judged quality that added."""
    count = terms.maintenance_count_effective(evidence.ops)
    return count, terms.maintenance_reward_effective(count, quality_stage1, quality_final)


def maintenance_current(
    evidence: MaintenanceEvidence, quality_stage1: float, quality_final: float
) -> tuple[int, float]:
    """Stale facts memory was brought up to date on; R_maintenance = their share of the facts that went stale."""
    fixed, went_stale = terms.stale_facts_fixed(evidence.ops, evidence.supersessions, evidence.shown_at)
    return fixed, terms.maintenance_reward_current(fixed, went_stale)


def question_facts(task: Task) -> tuple[tuple[str, ...], tuple[terms.Supersession, ...]]:
    """The question's supporting-fact sentences (Eq. 23: what the answer needs); nothing superseded."""
    return tuple(f.text for f in task.supporting_facts), ()


CURRENT_FACTS_KEY = "current_facts"
"""``Task.metadata`` key: every fact the task holds true when Stage 1 ends, one sentence each."""
SUPERSEDED_FACTS_KEY = "superseded_facts"
"""``Task.metadata`` key: ``[{"stale": sentence, "by": the sentence that changed it}, ...]``."""


def current_facts(task: Task) -> tuple[tuple[str, ...], tuple[terms.Supersession, ...]]:
    """Every fact the task holds true after its last message, and those a later message changed
    (``metadata["current_facts"]``, ``metadata["superseded_facts"]``; the synthetic family writes both)."""
    if CURRENT_FACTS_KEY not in task.metadata:
        raise ConfigError(
            f"reward.terms=current judges memory against every fact a task holds true, and task {task.id!r} does not "
            f"list them (metadata {CURRENT_FACTS_KEY!r} and {SUPERSEDED_FACTS_KEY!r}; the synthetic tasks do): use "
            "reward.terms=effects for this data"
        )
    supersessions = tuple(
        terms.Supersession(str(s["stale"]), str(s["by"])) for s in task.metadata.get(SUPERSEDED_FACTS_KEY, [])
    )
    return tuple(str(f) for f in task.metadata[CURRENT_FACTS_KEY]), supersessions


TERM_READINGS: dict[str, TermReadings] = {
    "paper": TermReadings(
        terms.management_steps_paper,
        terms.preservation_items_paper,
        terms.stored_entries_paper,
        maintenance_paper,
        terms.context_state_share_paper,
        question_facts,
    ),
    "effects": TermReadings(
        terms.management_steps_effective,
        terms.preservation_items_needed,
        terms.stored_entries_held,
        maintenance_effects,
        terms.context_state_share_by_answer,
        question_facts,
    ),
    "current": TermReadings(
        terms.management_steps_effective,
        terms.preservation_items_needed,
        terms.stored_entries_held,
        maintenance_current,
        terms.context_state_share_by_answer,
        current_facts,
    ),
}


def check_readable(config: RewardConfig, tasks: Sequence[Task]) -> None:
    """Raise now, before any rollout, the error the reading would raise at the first scoring for a task it cannot
    read (``reward.terms=current`` on tasks that do not list their facts)."""
    reading = TERM_READINGS[config.terms]
    for task in tasks:
        reading.storage_facts(task)


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


def change_shown_at(trajectory: Trajectory, sentences: Sequence[str]) -> dict[str, int]:
    """Per sentence, the env step (k for the k-th agent step; memory operations carry the same count) whose prompt
    first carried it (:func:`terms.carries`); a sentence no prompt carried is absent."""
    shown: dict[str, int] = {}
    if not sentences:  # every reading but current: nothing to look for, no prompt to read
        return shown
    for number, step in enumerate(trajectory.action_steps, start=1):
        for sentence in sentences:
            if sentence not in shown and terms.carries(step.prompt_text, sentence):
                shown[sentence] = number
        if len(shown) == len(set(sentences)):
            break
    return shown


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
    reading = TERM_READINGS[config.terms]
    entries = {id(t): reading.stored_entries(t.stats.memory_ops) for t in trajectories}
    finals = {id(t): terms.stage1_entries_at_end(t.stats.memory_ops) for t in trajectories}
    judged = {task_id: reading.storage_facts(tasks[task_id]) for task_id in {t.task_id for t in trajectories}}
    facts_of = {id(t): judged[t.task_id][0] for t in trajectories}
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
        facts_judged, supersessions = judged[trajectory.task_id]
        entry_scores, final_scores = (
            terms.zero_stale_entries(
                contents, [memory_scores[MemoryItem(c, facts_judged)] for c in contents], supersessions
            )
            for contents in (entries[id(trajectory)], finals[id(trajectory)])
        )
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
            supersessions=supersessions,
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
    supersessions: Sequence[terms.Supersession] = (),
) -> dict[str, float]:
    """Every term and sub-term of one trajectory, given the judge's scores for it and its task's supporting-fact
    sentences (``facts``: what preservation looks for under ``reward.terms=effects``).

    ``entry_scores`` are the scores of the entries storage judges (``TermReadings.stored_entries``), ``final_scores``
    those of the entries Stage 1 stored as the episode ended them (:func:`terms.stage1_entries_at_end`), from which
    Q_final is computed for maintenance under ``effects`` (:func:`terms.maintenance_reward_effective`); none (a caller
    that judges no memory, as a game) gives Q_final = 0, so maintenance pays nothing there under ``effects``;
    ``supersessions``: the task's facts a later message changed (``reward.terms=current``'s maintenance)."""
    stats = trajectory.stats
    reading = TERM_READINGS[config.terms]
    step = answer_step(trajectory)
    tokens_used = step.context_tokens if step else 0
    context_text = answer_context_text(trajectory, step)
    summaries = terms.summary_sources(stats.prompt_context or [], stats.summaries)
    management = reading.management_steps(stats.summaries, stats.filters, stats.resets)
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
    evidence = MaintenanceEvidence(
        stats.memory_ops, tuple(supersessions), change_shown_at(trajectory, [s.by for s in supersessions])
    )
    maintained, maintenance = reading.maintenance(evidence, storage, quality_final)
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

"""The AgeMem reward terms (paper Appendix A.2), each a small pure function.

Every function takes plain numbers or records from a finished trajectory and returns a
float; the judge calls happen before (:mod:`agemem.rewards.composite`), so the terms stay pure and
testable by hand.

Three terms read what the agent *did*, and the paper's letter pays for calls, not effects: a Filter_context
that removes nothing is context management, an Update_memory that writes the same text back is maintenance,
and the question's key items in a kept distractor are preservation. Each has two readings here, chosen by
``reward.terms``: ``paper`` (the letter of Eqs. 19, 20, 23, for reproduction) and ``effects`` (default: only what
changed the context or the memory, and only what the question needs, counts):

| term | paper | effects |
|---|---|---|
| preventive | :func:`management_steps_paper` | :func:`management_steps_effective` |
| maintenance | :func:`maintenance_count_paper` | :func:`maintenance_count_effective` |
| preservation | :func:`preservation_items_paper` | :func:`preservation_items_needed` |
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agemem.core.env import FilterRecord, MemoryOpRecord, SummaryRecord


def task_reward(answer_score: float | None) -> float:
    """R_task = S, the judge's score of the final answer in [0, 1]; −1 when no answer was given (Eq. 17)."""
    return -1.0 if answer_score is None else float(answer_score)


def compression_reward(tokens_used: int, token_budget: int) -> float:
    """R_compression = max(0, 1 − T_used / T_max), T_used the context tokens at answer time (Eq. 18)."""
    return max(0.0, 1.0 - tokens_used / token_budget)


def preventive_reward(management_steps: Sequence[int], first_overflow_step: int | None) -> float:
    """R_preventive (Eq. 19): 1 when context management happened (``management_steps``, from
    :func:`management_steps_paper` or :func:`management_steps_effective`) before the context first exceeded the
    budget — at any step when it never did — else 0 (exceeded, or never managed)."""
    if first_overflow_step is None:
        return 1.0 if management_steps else 0.0
    return 1.0 if any(step < first_overflow_step for step in management_steps) else 0.0


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_KEY_ITEM = re.compile(
    rf"\b(?:{_MONTHS})(?:\s+\d{{1,2}}\b)?(?:,?\s+\d{{4}}\b)?"  # dates: "March 3, 1999", "May 1999"
    r"|\b\d+(?:[.,]\d+)*\b"  # numbers and years
    r"|\b[A-Z][\w'’.-]*(?:\s+(?:of|the|de|la|von|van)?\s*[A-Z][\w'’.-]*)*"  # capitalised names and places
)
_QUESTION_WORDS = frozenset(
    [
        "What",
        "Which",
        "Who",
        "Whom",
        "Whose",
        "When",
        "Where",
        "Why",
        "How",
        "Is",
        "Are",
        "Was",
        "Were",
        "Do",
        "Does",
        "Did",
        "In",
        "On",
        "At",
        "The",
        "A",
        "An",
        "Of",
        "For",
        "And",
        "Or",
        "To",
        "By",
        "From",
        "With",
        "As",
        "Than",
        "That",
        "This",
        "These",
        "Those",
        "Name",
    ]
)


def key_items(question: str) -> list[str]:
    """The question's key items: named entities, places, numbers and dates.

    Rule: dates (a month name with optional day and year), numbers, and runs of capitalised
    words (joined across of/the/de/la/von/van) — minus a leading question word or article, and
    minus runs that are only such words. Deduplicated, in order of appearance.
    """
    items: list[str] = []
    for match in _KEY_ITEM.finditer(question):
        words = match.group(0).split()
        while words and words[0] in _QUESTION_WORDS:
            words = words[1:]
        item = " ".join(words).rstrip(".,'’")
        if item and item not in items:
            items.append(item)
    return items


def preservation_reward(items: Sequence[str], context_text: str) -> float:
    """R_preservation (Eq. 20): the fraction of the question's key items still present (case-
    insensitively) in the context at answer time — directly or inside a summary — *outside the
    question message itself*, which is always kept. 1 when the question has no key items."""
    if not items:
        return 1.0
    haystack = context_text.lower()
    return sum(item.lower() in haystack for item in items) / len(items)


def preservation_items_paper(question: str, facts: Sequence[str], distractors: Sequence[str]) -> list[str]:
    """The items R_preservation looks for, as the paper words Eq. 20: the question's key items (:func:`key_items`).

    Distractors are picked for their similarity to the question and often name its items, so keeping a
    distractor can raise this and filtering one can lower it."""
    return key_items(question)


def preservation_items_needed(question: str, facts: Sequence[str], distractors: Sequence[str]) -> list[str]:
    """The items the question needs: ``I = K(F) \\ K(D)``, the key items of the supporting-fact sentences ``F`` that
    no Stage-2 distractor ``D`` mentions (case-insensitive), so a retained distractor adds nothing to
    R_preservation. When every fact item also appears in a distractor, ``I = K(F)``; with no supporting fact,
    the paper's items (:func:`preservation_items_paper`)."""
    fact_items: list[str] = []
    for fact in facts:
        fact_items.extend(item for item in key_items(fact) if item not in fact_items)
    if not fact_items:
        return preservation_items_paper(question, facts, distractors)
    shown = " ".join(distractors).lower()
    distinctive = [item for item in fact_items if item.lower() not in shown]
    return distinctive or fact_items


def management_steps_paper(summaries: Sequence[SummaryRecord], filters: Sequence[FilterRecord]) -> list[int]:
    """The steps of every Summary_context and Filter_context call (Eq. 19's letter: a call is management)."""
    return [r.step for r in summaries] + [r.step for r in filters]


def management_steps_effective(summaries: Sequence[SummaryRecord], filters: Sequence[FilterRecord]) -> list[int]:
    """The steps of the Summary_context and Filter_context calls that changed the context: a summary that replaced
    at least one message, a filter that removed at least one. A no-op call manages nothing and counts nothing."""
    return [r.step for r in summaries if r.replaced_contents] + [r.step for r in filters if r.removed_contents]


def maintenance_count_paper(ops: Sequence[MemoryOpRecord]) -> int:
    """Successful Update_memory and Delete_memory calls (Eq. 23's letter), whatever they changed."""
    return sum(op.ok and op.op in ("update", "delete") for op in ops)


def _normalised(text: str | None) -> str | None:
    return None if text is None else " ".join(text.lower().split())


def maintenance_count_effective(ops: Sequence[MemoryOpRecord]) -> int:
    """The entries whose content maintenance changed: per stage, an entry that existed when the stage began counts
    when its content at the stage's end (deleted = none) differs from its content at the stage's start, compared
    case- and whitespace-insensitively.

    So an update that writes the same text back, a delete followed by an add of the same text, and an entry added
    and deleted within one stage change nothing and count nothing; ``ops`` are the episode's memory operations in
    order (failed ones are skipped)."""
    changed = 0
    for stage in sorted({op.stage for op in ops}):
        added_here: set[str] = set()
        start: dict[str, str | None] = {}
        end: dict[str, str | None] = {}
        readded: list[str | None] = []
        for op in ops:
            if op.stage != stage or not op.ok or op.memory_id is None:
                continue
            if op.op == "add":
                added_here.add(op.memory_id)
                readded.append(_normalised(op.content))
            elif op.memory_id not in added_here:
                before = op.previous_content if op.op == "update" else op.content
                start.setdefault(op.memory_id, _normalised(before))
                end[op.memory_id] = _normalised(op.content) if op.op == "update" else None
        for memory_id, original in start.items():
            final = end[memory_id]
            if final is None and original in readded:  # deleted, and the same text added again
                continue
            changed += final != original
    return changed


def context_reward(compression: float, preventive: float, preservation: float) -> float:
    """R_context = (R_compression + R_preventive + R_preservation) / 3 (Eq. 21)."""
    return (compression + preventive + preservation) / 3.0


def storage_reward(entry_scores: Sequence[float], threshold: float) -> float:
    """R_storage = |high-quality Stage-1 adds| / |Stage-1 adds| (Eq. 22); an add is high-quality
    when the judge's score of its content against the supporting-fact sentences is >= threshold.
    0 when nothing was stored."""
    if not entry_scores:
        return 0.0
    return sum(score >= threshold for score in entry_scores) / len(entry_scores)


def maintenance_reward(maintained: int) -> float:
    """R_maintenance = 1 when at least one maintenance operation counted, else 0 (Eq. 23); what counts is
    :func:`maintenance_count_paper` or :func:`maintenance_count_effective`."""
    return 1.0 if maintained > 0 else 0.0


def relevance_reward(retrieval_scores: Sequence[float]) -> float:
    """R_relevance = mean judge score of the agent's retrievals against the question (Eq. 24); 0 without one."""
    return sum(retrieval_scores) / len(retrieval_scores) if retrieval_scores else 0.0


def memory_reward(storage: float, maintenance: float, relevance: float) -> float:
    """R_memory = (R_storage + R_maintenance + R_relevance) / 3 (Eq. 25)."""
    return (storage + maintenance + relevance) / 3.0


def round_limit_hits_all(limit_hits: Sequence[dict]) -> bool:
    """Any round limit counts: a Stage-1/2 per-turn cap as well as the Stage-3 round limit."""
    return bool(limit_hits)


def round_limit_hits_stage3(limit_hits: Sequence[dict]) -> bool:
    """Only the Stage-3 round limit counts, as the authors' code penalises (a capped Stage-1/2 turn just passes)."""
    return any(hit.get("stage") == 3 for hit in limit_hits)


def penalty(
    round_limit_hit: bool,
    overflowed: bool,
    violations: int,
    *,
    round_limit_penalty: float,
    overflow_penalty: float,
    format_penalty: float,
) -> float:
    """P = p_round·[a round limit was hit] + p_overflow·[the context overflowed] + p_format·n_violations
    (Eq. 26; paper: p_round = −1, p_overflow = −0.5; the per-violation format term is ours, default 0)."""
    return round_limit_penalty * round_limit_hit + overflow_penalty * overflowed + format_penalty * violations


def composite_reward(
    r_task: float, r_context: float, r_memory: float, penalties: float, weights: tuple[float, float, float]
) -> float:
    """R = w_task·R_task + w_context·R_context + w_memory·R_memory + P (Eq. 16; weights 1/3 each)."""
    w_task, w_context, w_memory = weights
    return w_task * r_task + w_context * r_context + w_memory * r_memory + penalties


def answer_only_reward(r_task: float, penalties: float) -> float:
    """R = R_task + P: the paper's answer-only ablation."""
    return r_task + penalties

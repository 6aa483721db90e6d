"""The AgeMem reward terms (paper Appendix A.2), each a small pure function.

Every function takes plain numbers or records from a finished trajectory and returns a
float; the judge calls happen before (:mod:`agemem.rewards.composite`), so the terms stay pure and
testable by hand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def task_reward(answer_score: float | None) -> float:
    """R_task = S, the judge's score of the final answer in [0, 1]; −1 when no answer was given (Eq. 17)."""
    return -1.0 if answer_score is None else float(answer_score)


def compression_reward(tokens_used: int, token_budget: int) -> float:
    """R_compression = max(0, 1 − T_used / T_max), T_used the context tokens at answer time (Eq. 18)."""
    return max(0.0, 1.0 - tokens_used / token_budget)


def preventive_reward(management_steps: Sequence[int], first_overflow_step: int | None) -> float:
    """R_preventive (Eq. 19): 1 when Summary_context or Filter_context ran before the context first
    exceeded the budget — at any step when it never did — else 0 (exceeded, or never managed)."""
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


def maintenance_reward(successful_updates_or_deletes: int) -> float:
    """R_maintenance = 1 when at least one Update_memory or Delete_memory succeeded, else 0 (Eq. 23)."""
    return 1.0 if successful_updates_or_deletes > 0 else 0.0


def relevance_reward(retrieval_scores: Sequence[float]) -> float:
    """R_relevance = mean judge score of the agent's retrievals against the question (Eq. 24); 0 without one."""
    return sum(retrieval_scores) / len(retrieval_scores) if retrieval_scores else 0.0


def memory_reward(storage: float, maintenance: float, relevance: float) -> float:
    """R_memory = (R_storage + R_maintenance + R_relevance) / 3 (Eq. 25)."""
    return (storage + maintenance + relevance) / 3.0


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

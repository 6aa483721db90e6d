"""The scoring protocols: a judge (three roles, each a batch of items in, one score in [0, 1] per item out) and a
trajectory scorer (a batch of finished episodes in, their rewards filled).

Batches let an LLM judge send its requests concurrently; a rule-based judge just loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agemem.rollouts.records import Task, Trajectory


@dataclass(frozen=True)
class AnswerItem:
    question: str
    prediction: str
    """the agent's final answer."""
    gold: str
    """the reference answer."""


@dataclass(frozen=True)
class MemoryItem:
    content: str
    """one LTM entry the agent stored."""
    supporting_facts: tuple[str, ...]
    """the supporting-fact sentences (text, not titles: defect 4) the entry should carry."""


@dataclass(frozen=True)
class RelevanceItem:
    question: str
    retrieved: tuple[str, ...]
    """the contents of the memories one retrieval brought back."""


@runtime_checkable
class Judge(Protocol):
    name: str

    def answer_scores(self, items: Sequence[AnswerItem]) -> list[float]:
        """Correctness of each prediction against its gold answer, in [0, 1]."""
        ...

    def memory_scores(self, items: Sequence[MemoryItem]) -> list[float]:
        """How much supporting-fact content each stored entry carries, in [0, 1]."""
        ...

    def relevance_scores(self, items: Sequence[RelevanceItem]) -> list[float]:
        """How relevant each retrieval's items are to the question, in [0, 1]."""
        ...


class TrajectoryScorer(Protocol):
    """Fills ``trajectory.reward`` for a batch and returns the breakdowns (agemem.rewards.build.RewardScorer)."""

    def __call__(self, trajectories: Sequence[Trajectory], tasks: Sequence[Task]) -> list[dict[str, float]]: ...

    def report(self, breakdowns: Sequence[dict[str, float]]) -> dict[str, Any]:
        """``{"rewards": {term: batch mean}, "judge": {...}}`` for the summary."""
        ...

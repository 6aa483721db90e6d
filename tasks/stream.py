"""An environment as a stream (`agemem eval stream --task <name>`): the items it streams, and what kind of play they
need.

An environment registers a :class:`StreamSpec` beside its training task and its evaluation
(``QATask(..., stream=...)``, ``GameSuite(..., stream=...)``): ``items(config)`` lists the stream's tasks as
:class:`StreamItem` records in stream order, and ``kind`` says how the streaming harness plays one (``qa``: a
question answered with demonstrations; ``game``: a text game played command by command). The records live here,
in the tasks layer, so an environment module builds its own; the harness that plays them is
:mod:`agemem.eval.stream`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class StreamItem:
    id: str
    query: str
    """what a record stores and retrieval compares: the question, or the ALFWorld task text."""
    prompt: str
    """what the agent is shown for the task besides the demonstrations (the query with its context)."""
    answer: str | None = None
    """the gold answer of a QA task."""
    task_key: str | None = None
    """normalised task key: items of the same task share it (a retrieved record is relevant for Precision@k
    when it succeeded and its key matches)."""
    ground_truth: str | None = None
    """a correct execution of the task, where the task has one and it is cheap (QA: the supporting facts and the
    gold answer); see :func:`ground_truth_of`."""
    payload: Any = None
    """what the adapter needs to play it (an ALFWorld game file, ...)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    ground_truth_fn: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    """computes the ground truth when it is costly (ALFWorld: the planner's solution); called once, when needed."""


def ground_truth_of(item: StreamItem) -> str | None:
    """The item's ground-truth execution, computed by ``ground_truth_fn`` on first use (then kept)."""
    if item.ground_truth is None and item.ground_truth_fn is not None:
        item.ground_truth = item.ground_truth_fn()
        item.ground_truth_fn = None
    return item.ground_truth


def qa_execution(thought: str | None, answer: str) -> str:
    """A QA task's execution: ``Reasoning: <thought>`` (when there is one) and ``Answer: <answer>``, one per line."""
    reasoning = " ".join((thought or "").split())
    return f"Reasoning: {reasoning}\nAnswer: {answer}" if reasoning else f"Answer: {answer}"


def game_execution(lines: Sequence[str], won: bool) -> str:
    """A game's execution: its ``> command`` / reply lines and the outcome."""
    return "\n".join([*lines, f"Outcome: {'done' if won else 'not done'}"])


@dataclass(frozen=True)
class StreamSpec:
    """How ``agemem eval stream --task <name>`` streams an environment."""

    kind: Literal["qa", "game"]
    """qa: each item is a question (``answer`` set); game: each item's ``payload`` is a game of the suite."""
    items: Callable[[Any], list[StreamItem]]
    """``(StreamRunConfig) -> items``, in stream order (the environment's own limits applied; ``stream.limit`` and
    ``stream.order`` come after)."""

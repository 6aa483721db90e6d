"""The records a stream passes around and the two interfaces a stream plugs into.

* :class:`StreamTask`: a benchmark adapter (HotpotQA, synthetic, ALFWorld): its tasks as
  :class:`StreamItem`, how a chat model plays one with demonstrations (:meth:`StreamTask.play`), and how
  the result is judged against the ground truth (:meth:`StreamTask.strict`).
* :class:`Solver`: who solves a task: a model through :class:`ModelSolver` (the task's own play loop), or a
  test double that works on the items directly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agemem.tasks.stream import StreamItem

if TYPE_CHECKING:
    from agemem.core.tools import ToolCall
    from agemem.eval.stream.bank import MemoryBank
    from agemem.rollouts.engines.chat import ChatModel


@dataclass(frozen=True)
class Demonstration:
    """A retrieved record as the agent sees it."""

    record_id: str
    query: str
    execution: str
    similarity: float
    feedback: str | None = None
    """how the record's task went (``success`` / ``failure``), when the run shows it (``stream.show_feedback``;
    always for ReMem, whose records are Evo-Memory's input, output and feedback)."""


@dataclass
class Attempt:
    """What the agent did on one task."""

    execution: str
    """its reasoning and answer, or its action trajectory: what a record of this task stores."""
    answer: str | None = None
    """the final answer (QA); None when it gave none."""
    won: bool | None = None
    """the environment's own verdict, where there is one (ALFWorld)."""
    replies: int = 0
    """model calls made."""
    prompt_tokens: int = 0
    """prompt tokens over all its model calls."""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """every reply with its tool calls and their results."""
    error: str | None = None
    """why the attempt broke off (an engine error), if it did."""


class StreamTask(Protocol):
    """A benchmark adapter."""

    name: str

    def items(self) -> list[StreamItem]:
        """Every task, in the given order (the initial bank takes the first ``stream.initial_size``)."""
        ...

    def play(
        self,
        item: StreamItem,
        demos: Sequence[Demonstration],
        model: ChatModel,
        tools: MemoryTools,
        seed: int | None,
    ) -> Attempt:
        """Let ``model`` solve ``item`` with ``demos`` in context; when ``tools`` offer Add_memory / Delete_memory
        (policy addition) it may call them during the task and in a memory turn after it."""
        ...

    def strict(self, item: StreamItem, attempt: Attempt) -> float:
        """1.0 when the attempt is correct against the ground truth, else 0.0."""
        ...

    def failed_execution(self, item: StreamItem, rng: random.Random) -> str:
        """A plausible execution of ``item`` that fails (noisy initial memory, noisy writes)."""
        ...


class MemoryTools(Protocol):
    """The memory tools a task's episode may call on the stream's bank (a :class:`~agemem.core.env.ToolRunner`):
    ``agent.BankTools`` (the policy addition's Add_memory / Delete_memory; no tools for other additions), or
    ``remem.ReMemSession`` (ReMem's Refine operations, which also make the episode ReMem's)."""

    offered: tuple[str, ...]
    """tool names shown to the model (none: the agent answers without tools)."""
    bank: MemoryBank
    """the stream's experience bank."""

    def run(self, call: ToolCall) -> dict[str, Any]:
        """Execute one parsed call; the result has the memory environment's shape (``ok``, ``message``, ...)."""
        ...


class Solver(Protocol):
    name: str

    def solve(
        self, item: StreamItem, demos: Sequence[Demonstration], tools: MemoryTools, seed: int | None
    ) -> Attempt: ...


@dataclass
class ModelSolver:
    """A chat model playing each task through its adapter's play loop."""

    task: StreamTask
    model: ChatModel
    name: str = "model"

    def solve(self, item: StreamItem, demos: Sequence[Demonstration], tools: MemoryTools, seed: int | None) -> Attempt:
        return self.task.play(item, demos, self.model, tools, seed)

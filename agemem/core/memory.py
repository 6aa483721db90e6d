"""The one memory interface: what every long-term memory backend offers the tool executor.

Three stores hold an agent's long-term memories: the in-RAM vector store
(:class:`~agemem.core.ltm.LongTermMemory`), its SQLite-backed subclass
(:class:`~agemem.core.memory_store.SQLiteLongTermMemory`) and the streaming benchmark's experience bank
(``agemem.eval.stream.bank.BankMemory``). They all satisfy :class:`MemoryStore`, so the memory tools of
:mod:`agemem.core.tools` are written once and run unchanged on any of them.

Every verb takes the same scoping argument (``scope``: an independent memory bank) and every change or search
returns one result shape, :class:`MemoryResult`. Bad input (unknown id, empty content, bad top_k) is an
``ok=False`` result whose message tells the agent how to fix it, never an exception: the agent sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

DEFAULT_SCOPE = "default"
# Keys written by the store itself; the agent's metadata may not overwrite them.
SYSTEM_KEYS = ("created_at", "updated_at")
RELATION = "relation"
"""``metadata["kind"]`` of a retrieved graph relation (Mem0g's triples), which a retrieval shows apart."""

Op = Literal["add", "update", "delete", "retrieve"]


@dataclass
class MemoryEntry:
    id: str
    """short stable id, ``mem_`` + 8 hex digits; unchanged by updates and snapshots."""
    content: str
    embedding_D: np.ndarray = field(repr=False)
    """L2-normalised float32 embedding the store retrieves the entry by."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """created_at / updated_at (unix seconds), source, memory_type, tags, stage, plus free keys."""
    scope: str = DEFAULT_SCOPE

    def to_json(self) -> dict[str, Any]:
        """The entry as the agent sees it: no embedding, no timestamps (they cost context tokens)."""
        visible = {k: v for k, v in self.metadata.items() if k not in SYSTEM_KEYS}
        return {"memory_id": self.id, "content": self.content, "metadata": visible}


@dataclass
class MemoryResult:
    """The one result shape of every memory verb."""

    op: Op
    ok: bool
    entries: list[MemoryEntry] = field(default_factory=list)
    """entries added / updated / deleted, or retrieved (best first)."""
    scores: list[float] = field(default_factory=list)
    """cosine similarity of each retrieved entry to the query; empty for other verbs."""
    message: str = ""
    """a one-line summary for the agent, or the error and how to fix it when ``ok`` is false."""

    def to_observation(self, *, echo_changes: bool = True) -> dict[str, Any]:
        """JSON-ready payload shown to the agent as the tool result. A retrieval always shows its entries; an
        add, update or delete repeats the changed entries only with ``echo_changes`` (its message names their ids
        either way, and the agent has just written their content)."""
        payload: dict[str, Any] = {"ok": self.ok, "message": self.message}
        if self.op == "retrieve":
            shown = [({**e.to_json(), "score": round(s, 4)}, e) for e, s in zip(self.entries, self.scores)]
            payload["memories"] = [row for row, e in shown if e.metadata.get("kind") != RELATION]
            relations = [row for row, e in shown if e.metadata.get("kind") == RELATION]
            if relations:  # a graph store's (source, relation, target) triples: a list of their own
                payload["relations"] = relations
        elif self.entries and echo_changes:
            payload["memories"] = [e.to_json() for e in self.entries]
        return payload


@runtime_checkable
class MemoryStore(Protocol):
    """A long-term memory backend: the verbs the memory tools call, the same arguments on every one.

    Changes return the changed entry in ``entries`` (the deleted one for ``delete``) so the caller's bookkeeping
    never has to look it up again; ``get`` / ``ids`` / ``len`` are read-only views for handlers and tests.
    """

    def add(self, content: str, metadata: dict[str, Any] | None = None, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        """Store a new entry (its id is the store's to choose)."""
        ...

    def update(
        self, memory_id: str, content: str, metadata: dict[str, Any] | None = None, *, scope: str = DEFAULT_SCOPE
    ) -> MemoryResult:
        """Replace an entry's content and merge ``metadata`` into its metadata."""
        ...

    def delete(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryResult: ...

    def retrieve(
        self,
        query: str,
        top_k: int = 3,
        metadata_filter: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        """The search verb: the ``top_k`` entries most similar to ``query``, best first, with their scores."""
        ...

    def get(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryEntry | None: ...

    def ids(self, *, scope: str = DEFAULT_SCOPE) -> list[str]:
        """The scope's entry ids, oldest first."""
        ...

    def __len__(self) -> int: ...


COST_KEYS = ("calls", "prompt_tokens", "completion_tokens", "seconds")
"""what a memory system's :meth:`ObservingMemory.spent` counts: LLM calls, their prompt and completion tokens, and
the wall seconds the system spent (its LLM calls, embeddings and stores together)."""


@runtime_checkable
class ObservingMemory(MemoryStore, Protocol):
    """A memory system that writes long-term memory itself from the conversation it observes (Mem0, A-Mem,
    LangMem: the paper's baselines), instead of the agent calling Add/Update/Delete.

    The environment hands it every incoming user message (:meth:`observe`) and searches it with
    :meth:`MemoryStore.retrieve`; what the system spends doing so is read from :meth:`spent` before and after each
    call, so an episode's cost is exact even when episodes share the system.
    """

    def observe(self, text: str, *, scope: str = DEFAULT_SCOPE) -> None:
        """Let the system extract, update or link memories from one incoming message."""
        ...

    def spent(self) -> dict[str, float]:
        """Running totals of :data:`COST_KEYS` since the system was built."""
        ...


def cost_delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """What was spent between two :meth:`ObservingMemory.spent` readings."""
    return {key: after.get(key, 0.0) - before.get(key, 0.0) for key in COST_KEYS}


def unknown_id_message(memory_id: Any, known_ids: list[str]) -> str:
    """What every store says about an id it does not hold: the id, and the most recent ids it does hold."""
    recent = known_ids[-5:]
    hint = f"; recent ids: {', '.join(recent)}" if recent else "; long-term memory is empty"
    return f"no memory with id {memory_id!r}{hint}"


def count_message(count: int, verb: str) -> str:
    """``1 memory retrieved`` / ``3 memories retrieved``: the one-line summary of a search."""
    return f"{count} memor{'y' if count == 1 else 'ies'} {verb}"

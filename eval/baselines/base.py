"""What a memory-system baseline is to the harness, and the adapter that makes it the episode's long-term memory.

A :class:`MemorySystem` (Mem0, Mem0g, A-Mem, LangMem) writes memory itself from the messages it observes and
answers searches; :class:`SystemMemory` wraps one as the environment's store
(:class:`agemem.core.memory.ObservingMemory`): the environment hands it every incoming user message and shows
its search results for the latest message before every agent step (as the ``rag`` variant shows AgeMem's LTM).
The agent gets no memory tools, so nothing but the system writes its memory.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from agemem.core.ltm import SnapshotError
from agemem.core.memory import DEFAULT_SCOPE, RELATION, MemoryEntry, MemoryResult, count_message, unknown_id_message

if TYPE_CHECKING:
    from agemem.eval.baselines.endpoint import UsageMeter


@dataclass
class Recalled:
    """One memory as a system holds or returns it."""

    id: str
    text: str
    score: float = 0.0
    """the system's relevance of this memory to the query (its own scale; 0 outside a search)."""
    kind: str = "memory"
    """``memory``, or ``relation`` for a graph store's (source, relation, target) triple."""


class MemorySystem(Protocol):
    """A long-term memory that decides itself what to remember: the verbs the harness drives.

    ``scope`` separates independent memories (one per HotpotQA episode; one for a whole ALFWorld run).
    """

    name: str

    def observe(self, text: str, scope: str) -> None:
        """Take in one incoming message: the system's own extraction, update and linking (LLM calls)."""
        ...

    def search(self, query: str, top_k: int, scope: str) -> list[Recalled]:
        """The system's own search: up to ``top_k`` memories, best first; a graph store adds its relations
        (``kind="relation"``), as many as its own setting says."""
        ...

    def memories(self, scope: str) -> list[Recalled]:
        """Everything the scope holds, oldest first (memory quality is scored on it)."""
        ...

    def dump(self, scope: str) -> list[dict[str, Any]]:
        """The scope's memories as JSON records complete enough for :meth:`restore` to put them back as they were."""
        ...

    def restore(self, records: list[dict[str, Any]], scope: str) -> None:
        """Put :meth:`dump`'s records back into an empty scope without calling the LLM (resuming a run)."""
        ...

    def clear(self, scope: str) -> None: ...

    def settings(self) -> dict[str, Any]:
        """The system's version and configuration, recorded in ``results.json``."""
        ...

    def close(self) -> None: ...


class SystemMemory:
    """A :class:`MemorySystem` as the environment's long-term memory (an ``ObservingMemory``).

    ``retrieve`` is the system's search; ``add`` / ``update`` / ``delete`` refuse, because in a baseline variant
    only the system writes memory (the agent is offered no memory tools, so they are never called by it).
    ``spent`` adds the system's wall seconds to its endpoint's LLM counts.

    A library that raises (its LLM endpoint failed, a reply it could not handle) does not end the run: the message
    goes unremembered, or the search shows nothing, and the failure is counted (``failures``) and logged.
    """

    def __init__(self, system: MemorySystem, meter: UsageMeter):
        self.system = system
        self.meter = meter
        self.seconds = 0.0
        self.scopes: set[str] = set()
        """the scopes this store has written (a snapshot saves each)."""
        self.failures: dict[str, int] = {"observe": 0, "search": 0}
        """library calls that raised, by verb."""
        self.last_failure: str | None = None

    # ------------------------------------------------------------ ObservingMemory
    def observe(self, text: str, *, scope: str = DEFAULT_SCOPE) -> None:
        self.scopes.add(scope)
        started = time.perf_counter()
        try:
            self.system.observe(text, scope)
        except Exception as err:  # any library failure costs this message, never the run
            self._failed("observe", err)
        finally:
            self.seconds += time.perf_counter() - started

    def spent(self) -> dict[str, float]:
        return {**self.meter.totals(), "seconds": self.seconds}

    def retrieve(
        self,
        query: str,
        top_k: int = 3,
        metadata_filter: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        if not isinstance(query, str) or not query.strip():
            return MemoryResult("retrieve", False, message="query must be non-empty text")
        started = time.perf_counter()
        try:
            found = self.system.search(query, top_k, scope)
        except Exception as err:  # any library failure costs this search, never the run
            self._failed("search", err)
            found = []
        finally:
            self.seconds += time.perf_counter() - started
        # two lists, each with its own k: relations never crowd out memories, nor memories relations
        memories = [r for r in found if r.kind != RELATION][:top_k]
        relations = [r for r in found if r.kind == RELATION]
        shown = memories + relations
        message = count_message(len(memories), "found") + (f"; {len(relations)} relation(s)" if relations else "")
        return MemoryResult("retrieve", True, [self._entry(r, scope) for r in shown], [r.score for r in shown], message)

    def _failed(self, verb: str, err: Exception) -> None:
        self.failures[verb] += 1
        self.last_failure = f"{verb}: {type(err).__name__}: {err}"[:500]
        logging.getLogger(__name__).warning("%s %s failed: %s", self.system.name, verb, self.last_failure)

    # ------------------------------------------------------------ MemoryStore: the agent may not write
    def add(self, content: str, metadata: dict[str, Any] | None = None, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        return self._refused("add")

    def update(
        self, memory_id: str, content: str, metadata: dict[str, Any] | None = None, *, scope: str = DEFAULT_SCOPE
    ) -> MemoryResult:
        return self._refused("update")

    def delete(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        return self._refused("delete")

    def _refused(self, op: Any) -> MemoryResult:
        return MemoryResult(op, False, message=f"memory is written by {self.system.name} in this variant, not by tools")

    # ------------------------------------------------------------ read-only views
    def entries(self, *, scope: str = DEFAULT_SCOPE) -> list[MemoryEntry]:
        return [self._entry(r, scope) for r in self.system.memories(scope)]

    def get(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryEntry | None:
        return next((e for e in self.entries(scope=scope) if e.id == memory_id), None)

    def ids(self, *, scope: str = DEFAULT_SCOPE) -> list[str]:
        return [e.id for e in self.entries(scope=scope)]

    def unknown(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> str:
        return unknown_id_message(memory_id, self.ids(scope=scope))

    def __len__(self) -> int:
        """Memories held over every scope this store has written."""
        return sum(len(self.system.memories(scope)) for scope in self.scopes)

    def clear(self, *, scope: str = DEFAULT_SCOPE) -> None:
        self.system.clear(scope)
        self.scopes.discard(scope)

    # ------------------------------------------------------------ snapshots (ALFWorld resumes from one)
    def save(self, path: str | Path) -> Path:
        """Every scope's memories as the system dumps them (a resumed run restores them without the LLM)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        scopes = {scope: self.system.dump(scope) for scope in sorted(self.scopes)}
        np.savez(tmp, memory_system=np.array(self.system.name), scopes=np.array(json.dumps(scopes)))
        tmp.replace(path)
        return path

    def restore(self, path: str | Path) -> None:
        try:
            with np.load(path) as saved:
                name, scopes = str(saved["memory_system"]), json.loads(str(saved["scopes"]))
        except (OSError, KeyError, ValueError) as err:
            raise SnapshotError(f"{path} is not a memory-system snapshot ({err})") from err
        if name != self.system.name:
            raise SnapshotError(f"{path} holds {name}'s memory, not {self.system.name}'s")
        for scope, records in scopes.items():
            self.system.clear(scope)
            self.system.restore(records, scope)
            self.scopes.add(scope)

    def close(self) -> None:
        self.system.close()

    @staticmethod
    def _entry(recalled: Recalled, scope: str) -> MemoryEntry:
        return MemoryEntry(recalled.id, recalled.text, np.zeros(0, np.float32), {"kind": recalled.kind}, scope)

"""The experience memory of a stream: records of (query, execution, metadata) and their usage history.

A :class:`Record` is one past experience: the task's query (what retrieval keys on), the agent's execution
(what a later task sees as a demonstration) and metadata (its task, whether the execution was correct, the
evaluator's score when it was written, where it came from). The bank also keeps every record's usage: the
stream steps that retrieved it, its similarity to each retrieving query and the downstream utility of each
retrieving task (the evaluator's score of that task). Deletion and retention rules read only this history.

Retrieval is cosine similarity of L2-normalised query embeddings from the project's
:class:`~agemem.core.encoders.Encoder`, on the long-term memory's index (:meth:`agemem.core.ltm.ScopeIndex.search`,
the project's one vector search); equal similarities go to the newer record.

:class:`BankMemory` presents the bank as a :class:`~agemem.core.memory.MemoryStore`, the interface the memory tools
are written against, so a trained policy's Add_memory / Delete_memory run on it through the training executor.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from agemem.core.encoders import Encoder
from agemem.core.ltm import ScopeIndex
from agemem.core.memory import DEFAULT_SCOPE, MemoryEntry, MemoryResult, count_message, unknown_id_message

INITIAL_STEP = -1
"""``created_at`` of the records in the bank before the stream starts."""
RecordSource = Literal["initial", "initial_noise", "stream", "policy", "remem", "noise"]


@dataclass
class Record:
    id: str
    """``mem_`` + 8 hex digits, derived from the step, the write's position in it and the task."""
    query: str
    """the task's query: what retrieval compares the new task with."""
    execution: str
    """what a later task is shown: the agent's reasoning and answer, or its action trajectory."""
    task_id: str
    created_at: int
    """the stream step after which it was written; -1 for the initial bank."""
    source: RecordSource
    """initial / initial_noise (the bank before the stream, a failed copy there), stream (the addition rule),
    policy (the agent's Add_memory), remem (ReMem's Refine Add_memory), noise (a failed same-task copy of a noisy
    write)."""
    success: float | None = None
    """ground-truth correctness of the execution (1/0); None when unknown."""
    score: float | None = None
    """the run's evaluator score of the execution when it was written (strict or coarse)."""
    task_key: str | None = None
    """normalised task key: records of the same task share it (Precision@k)."""
    ground_truth: str | None = None
    """a correct execution of the record's task, when the task has one (error-free replay)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    retrieved_at: list[int] = field(default_factory=list)
    """stream steps that retrieved it (one entry per step)."""
    similarities: list[float] = field(default_factory=list)
    """cosine similarity of the retrieving step's query to this record's query, per retrieval."""
    utilities: list[float] = field(default_factory=list)
    """the evaluator's score of each retrieving task (the downstream utility), per retrieval."""

    @property
    def last_access(self) -> int:
        """The last step that retrieved it, else the step it was written."""
        return self.retrieved_at[-1] if self.retrieved_at else self.created_at

    def mean_utility(self, prior: float) -> float:
        """``ū_r = mean(utilities)``; ``prior`` for a record no task retrieved yet."""
        return sum(self.utilities) / len(self.utilities) if self.utilities else prior

    def to_json(self) -> dict[str, Any]:
        """The written record (its content; the usage history is in the step log)."""
        return {
            "id": self.id,
            "query": self.query,
            "execution": self.execution,
            "task_id": self.task_id,
            "created_at": self.created_at,
            "source": self.source,
            "success": self.success,
            "score": self.score,
            "task_key": self.task_key,
            "ground_truth": self.ground_truth,
            "metadata": self.metadata,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


@dataclass(frozen=True)
class Retrieved:
    """One record a step retrieved, with its cosine similarity to the step's query."""

    record: Record
    similarity: float


def record_id(step: int, position: int, task_id: str, source: str) -> str:
    """``mem_`` + the first 8 hex digits of sha1(step, position, task, source): reproducible across resumes."""
    digest = hashlib.sha1(f"{step}\x00{position}\x00{task_id}\x00{source}".encode()).hexdigest()
    return f"mem_{digest[:8]}"


class MemoryBank:
    """Records in insertion order, their query embeddings on a :class:`~agemem.core.ltm.ScopeIndex` (the long-term
    memory's index: one vector search, one metadata index); retrieval by similarity or recency."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        self._records: dict[str, Record] = {}
        self._index = ScopeIndex(encoder.dim)
        self._issued: set[str] = set()  # every id ever added, deleted ones included: never handed out again

    # ------------------------------------------------------------------ contents
    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(list(self._records.values()))

    def get(self, record_id: str) -> Record | None:
        return self._records.get(record_id)

    def ids(self) -> list[str]:
        return list(self._records)

    def add(self, record: Record, vector_D: np.ndarray | None = None) -> Record:
        """Insert ``record`` (its query embedded unless ``vector_D`` is given); an id already present is an error."""
        if record.id in self._records:
            raise ValueError(f"record id {record.id} is already in the bank")
        vector = self.embed([record.query])[0] if vector_D is None else np.asarray(vector_D, dtype=np.float32)
        self._index.insert(MemoryEntry(record.id, record.query, vector, dict(record.metadata)))
        self._records[record.id] = record
        self._issued.add(record.id)
        return record

    def add_many(self, records: Sequence[Record]) -> None:
        """Insert several records with one encoder call."""
        vectors_ND = self.embed([r.query for r in records]) if records else []
        for record, vector_D in zip(records, vectors_ND):
            self.add(record, vector_D)

    def unique_id(self, step: int, position: int, task_id: str, source: str) -> str:
        """:func:`record_id`, moved on to the next position while it collides with a record the bank holds or held
        (an id is never reused: a step log names every record by it)."""
        candidate = record_id(step, position, task_id, source)
        while candidate in self._issued:
            position += 1_000_003
            candidate = record_id(step, position, task_id, source)
        return candidate

    def revise(self, record_id: str, execution: str, metadata: dict[str, Any]) -> Record:
        """Rewrite a record's execution and metadata (an agent's Update); its query, and so its vector, stay."""
        record = self._records[record_id]
        record.execution, record.metadata = execution, metadata
        self._index.replace(MemoryEntry(record.id, record.query, self.vector(record.id), dict(metadata)))
        return record

    def delete(self, record_id: str) -> Record:
        record = self._records.pop(record_id)
        self._index.remove(record_id)
        return record

    # ------------------------------------------------------------------ vectors
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.encoder.encode(list(texts)), dtype=np.float32)

    def vector(self, record_id: str) -> np.ndarray:
        return self._index.vector(record_id)

    def matrix(self) -> np.ndarray:
        """``[N, D]`` query embeddings in insertion order."""
        rows = [self._index.row_of[i] for i in self._records]
        return self._index.vectors_CD[rows] if rows else np.zeros((0, self.encoder.dim), dtype=np.float32)

    # ------------------------------------------------------------------ retrieval
    def similar(self, query_D: np.ndarray, k: int, metadata_filter: dict[str, Any] | None = None) -> list[Retrieved]:
        """The ``k`` records whose query is most cosine-similar to ``query_D`` (of those whose metadata match
        ``metadata_filter``, as long-term memory filters), best first; equal similarities go to the newer record
        (the fresher experience)."""
        if k < 1 or not self._records:
            return []
        rows_M = self._index.candidate_rows(metadata_filter) if metadata_filter else None
        rows_k, scores_k = self._index.search(query_D, k, rows_M, ties="newer")
        return [
            Retrieved(self._records[self._index.row_ids[row]], float(score)) for row, score in zip(rows_k, scores_k)
        ]

    def recent(self, query_D: np.ndarray, k: int) -> list[Retrieved]:
        """The ``k`` most recently written records, newest first, with their similarity to ``query_D``."""
        if k < 1 or not self._records:
            return []
        records = list(self._records.values())
        order = sorted(range(len(records)), key=lambda i: (records[i].created_at, i), reverse=True)[:k]
        rows_k = np.array([self._index.row_of[records[i].id] for i in order])
        scores_k = self._index.vectors_CD[rows_k] @ query_D  # only the k records shown, not the whole bank
        return [Retrieved(records[i], float(score)) for i, score in zip(order, scores_k)]

    def note_retrieval(self, retrieved: Sequence[Retrieved], step: int, utility: float) -> None:
        """Record that ``step`` retrieved these records and that its task scored ``utility``."""
        for item in retrieved:
            record = self._records.get(item.record.id)
            if record is None:  # deleted by the agent during the step
                continue
            record.retrieved_at.append(step)
            record.similarities.append(item.similarity)
            record.utilities.append(utility)


@dataclass
class BankMemory:
    """A :class:`MemoryBank` as a :class:`~agemem.core.memory.MemoryStore`, so the same memory-tool executor that
    runs in training runs on a stream's experience memory.

    An entry is a record: its id, its execution as content, its query's embedding (retrieval keys on the task,
    not on what was written about it) and its metadata. A bank is one stream's single memory, so ``scope`` is
    accepted and ignored. ``write(content, metadata)`` stores the record of an Add (the runner's, which labels it
    with the current task and adds the copies of a noisy write); without one, the content is its own query.
    ``written`` / ``removed`` are the records that went in and out through this adapter, for the step log.
    """

    bank: MemoryBank
    write: Callable[[str, dict[str, Any]], Record] | None = None
    written: list[Record] = field(default_factory=list)
    removed: list[Record] = field(default_factory=list)

    def add(self, content: str, metadata: dict[str, Any] | None = None, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        record = (self.write or self._own_record)(content, dict(metadata or {}))
        self.written.append(record)
        return MemoryResult("add", True, [self._entry(record)], message=f"stored 1 memory entry: {record.id}")

    def update(
        self, memory_id: str, content: str, metadata: dict[str, Any] | None = None, *, scope: str = DEFAULT_SCOPE
    ) -> MemoryResult:
        record = self.bank.get(memory_id)
        if record is None:
            return MemoryResult("update", False, message=unknown_id_message(memory_id, self.bank.ids()))
        self.bank.revise(memory_id, content, {**record.metadata, **(metadata or {})})
        return MemoryResult("update", True, [self._entry(record)], message=f"updated {memory_id}")

    def delete(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        record = self.bank.get(memory_id)
        if record is None:
            return MemoryResult("delete", False, message=unknown_id_message(memory_id, self.bank.ids()))
        entry = self._entry(record)  # before the delete drops the record's vector
        self.removed.append(self.bank.delete(memory_id))
        return MemoryResult("delete", True, [entry], message=f"deleted {memory_id}")

    def retrieve(
        self,
        query: str,
        top_k: int = 3,
        metadata_filter: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        """The records whose query is most similar to ``query``; an agent's search, so no usage is noted."""
        if not len(self.bank):
            return MemoryResult("retrieve", True, message="long-term memory is empty")
        found = self.bank.similar(self.bank.embed([query])[0], top_k, metadata_filter)
        entries = [self._entry(r.record) for r in found]
        return MemoryResult(
            "retrieve", True, entries, [r.similarity for r in found], message=count_message(len(entries), "retrieved")
        )

    def get(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryEntry | None:
        record = self.bank.get(memory_id)
        return None if record is None else self._entry(record)

    def ids(self, *, scope: str = DEFAULT_SCOPE) -> list[str]:
        return self.bank.ids()

    def __len__(self) -> int:
        return len(self.bank)

    def _entry(self, record: Record) -> MemoryEntry:
        return MemoryEntry(record.id, record.execution, self.bank.vector(record.id), dict(record.metadata))

    def _own_record(self, content: str, metadata: dict[str, Any]) -> Record:
        record_id = self.bank.unique_id(len(self.written), 0, "", "policy")
        return self.bank.add(Record(record_id, content, content, "", INITIAL_STEP, "policy", metadata=metadata))

"""Long-term memory: a vector store the agent edits with Add / Update / Delete / Retrieve.

:class:`LongTermMemory` is the reference :class:`~agemem.core.memory.MemoryStore`: every verb takes the same
scoping argument (``scope``: an independent memory bank, e.g. one per task, per rollout or per user) and returns
one result shape, :class:`~agemem.core.memory.MemoryResult` (re-exported here with :class:`MemoryEntry`).
Bad input from the agent (unknown id, empty content, bad top_k) is an ``ok=False`` result
with a message the agent can act on, never an exception.

Retrieval is cosine similarity on L2-normalised embeddings: one matrix-vector product over
the scope's ``[N, D]`` matrix and an ``argpartition`` top-k (see ``bench/retrieval.py``), in
:meth:`ScopeIndex.search`, the one vector search of the project (the streaming benchmark's experience bank keeps
its records on a :class:`ScopeIndex` too).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agemem.core.config import ID_STYLES
from agemem.core.encoders import Encoder
from agemem.core.files import atomic_open
from agemem.core.memory import (
    DEFAULT_SCOPE,
    SYSTEM_KEYS,
    MemoryEntry,
    MemoryResult,
    Op,
    count_message,
    unknown_id_message,
)

__all__ = [
    "DEFAULT_SCOPE",
    "SNAPSHOT_VERSION",
    "SYSTEM_KEYS",
    "UNINDEXED_KEYS",
    "LongTermMemory",
    "MemoryEntry",
    "MemoryResult",
    "Op",
    "ScopeIndex",
    "SnapshotError",
    "Ties",
    "top_k_indices",
]

SNAPSHOT_VERSION = 1
# Timestamps are unique per entry: indexing them for equality filters would only cost memory.
UNINDEXED_KEYS = frozenset(SYSTEM_KEYS)


class SnapshotError(ValueError):
    """A memory snapshot is missing, corrupt, or made with a different encoder."""


Ties = Literal["any", "newer", "older"]
"""how :meth:`ScopeIndex.search` orders equal scores."""


class ScopeIndex:
    """One memory bank: a growable ``[capacity, D]`` matrix plus an inverted metadata index."""

    def __init__(self, dim: int):
        self.vectors_CD = np.zeros((16, dim), dtype=np.float32)
        self.inserted_C = np.zeros(16, dtype=np.int64)  # row -> its entry's insertion number (ties by age)
        self.row_ids: list[str] = []  # row -> entry id; rows [0, len) are live
        self.row_of: dict[str, int] = {}
        self.entries: dict[str, MemoryEntry] = {}  # insertion order = creation order
        self.postings: dict[tuple[str, str], set[str]] = {}
        self._insertions = 0

    def __len__(self) -> int:
        return len(self.row_ids)

    def insert(self, entry: MemoryEntry) -> None:
        n = len(self.row_ids)
        if n == len(self.vectors_CD):  # amortised O(1) growth
            grown = np.zeros((2 * n, self.vectors_CD.shape[1]), dtype=np.float32)
            grown[:n] = self.vectors_CD
            self.vectors_CD = grown
            self.inserted_C = np.concatenate([self.inserted_C, np.zeros(n, dtype=np.int64)])
        self.vectors_CD[n] = entry.embedding_D
        self.inserted_C[n] = self._insertions
        self._insertions += 1
        self.row_ids.append(entry.id)
        self.row_of[entry.id] = n
        self.entries[entry.id] = entry
        self._index(entry)

    def replace(self, entry: MemoryEntry) -> None:
        self._unindex(self.entries[entry.id])
        self.vectors_CD[self.row_of[entry.id]] = entry.embedding_D
        self.entries[entry.id] = entry
        self._index(entry)

    def remove(self, entry_id: str) -> MemoryEntry:
        # Swap the last row into the hole so live rows stay contiguous for the matmul.
        row = self.row_of.pop(entry_id)
        last = len(self.row_ids) - 1
        if row != last:
            moved = self.row_ids[last]
            self.vectors_CD[row] = self.vectors_CD[last]
            self.inserted_C[row] = self.inserted_C[last]
            self.row_ids[row] = moved
            self.row_of[moved] = row
        self.row_ids.pop()
        entry = self.entries.pop(entry_id)
        self._unindex(entry)
        return entry

    def vector(self, entry_id: str) -> np.ndarray:
        """The ``[D]`` embedding stored for ``entry_id``."""
        return self.vectors_CD[self.row_of[entry_id]].copy()  # a row moves when another is removed

    def search(
        self, query_D: np.ndarray, k: int, rows_M: np.ndarray | None = None, *, ties: Ties = "any"
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rows_k, scores_k)``: the ``k`` live rows (of ``rows_M`` when given) whose vectors have the largest dot
        product with ``query_D`` (cosine similarity: every vector is L2-normalised), best first.

        ``ties`` orders equal scores: ``any`` is the fast path (an O(N) partition; which of the entries tied at the
        k-th place stay is unspecified); ``newer`` / ``older`` put the later / earlier inserted entry first, exactly
        (a full sort: the streaming benchmark's bank, whose runs must replay)."""
        rows = np.arange(len(self.row_ids)) if rows_M is None else rows_M
        scores_M = self.vectors_CD[: len(self.row_ids)] @ query_D if rows_M is None else self.vectors_CD[rows] @ query_D
        if ties == "any":
            best_k = top_k_indices(scores_M, k)
        else:
            age_M = self.inserted_C[rows] if ties == "older" else -self.inserted_C[rows]
            best_k = np.lexsort((age_M, -scores_M))[: max(k, 0)]
        return rows[best_k], scores_M[best_k]

    def candidate_rows(self, metadata_filter: dict[str, Any]) -> np.ndarray:
        """Rows whose metadata match every key of the filter (a list value means any of)."""
        selected: set[str] | None = None
        for key, wanted in metadata_filter.items():
            options = wanted if isinstance(wanted, list) else [wanted]
            matching: set[str] = set()
            for option in options:
                matching |= self.postings.get((key, _posting_value(option)), set())
            selected = matching if selected is None else selected & matching
        return np.fromiter((self.row_of[i] for i in selected or ()), dtype=np.int64)

    def _index(self, entry: MemoryEntry) -> None:
        for key_value in _posting_keys(entry.metadata):
            self.postings.setdefault(key_value, set()).add(entry.id)

    def _unindex(self, entry: MemoryEntry) -> None:
        for key_value in _posting_keys(entry.metadata):
            ids = self.postings.get(key_value)
            if ids is not None:
                ids.discard(entry.id)
                if not ids:
                    del self.postings[key_value]


def _posting_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a filter on 1.0 matches a stored 1 (bools stay distinct: True is not 1)
    return json.dumps(value, sort_keys=True)


def _posting_keys(metadata: dict[str, Any]) -> Iterable[tuple[str, str]]:
    """Scalars are indexed as themselves; list values (tags) are indexed per element."""
    for key, value in metadata.items():
        if key in UNINDEXED_KEYS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (str, int, float, bool)) or item is None:
                yield key, _posting_value(item)


def top_k_indices(scores_N: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores, best first: O(N) partition, then sort only k."""
    k = min(k, len(scores_N))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    part_k = np.argpartition(-scores_N, k - 1)[:k] if k < len(scores_N) else np.arange(len(scores_N))
    return part_k[np.argsort(-scores_N[part_k], kind="stable")]


class LongTermMemory:
    """The vector store. Not thread-safe; one instance per process, many scopes inside."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        max_top_k: int = 20,
        max_entry_chars: int = 4000,
        id_style: str = "hash",
        clock: Callable[[], float] = time.time,
    ):
        if id_style not in ID_STYLES:
            raise ValueError(f"id_style={id_style!r} must be one of {', '.join(ID_STYLES)}")
        self.encoder = encoder
        self.id_style = id_style
        self.max_top_k = max_top_k
        self.max_entry_chars = max_entry_chars
        self.clock = clock
        self._scopes: dict[str, ScopeIndex] = {}
        # Per-scope counters feed id hashing: a scope's ids depend only on that scope's own history.
        self._sequences: dict[str, int] = {}

    # ------------------------------------------------------------------ verbs
    def add(
        self,
        content: str,
        metadata: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        return self.add_many([content], [metadata or {}], scope=scope)

    def add_many(
        self,
        contents: list[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        """Add several entries with one batched encoder call (bulk-loading a bank)."""
        metadatas = metadatas if metadatas is not None else [{} for _ in contents]
        if len(metadatas) != len(contents):
            return MemoryResult(
                "add", False, message=f"got {len(contents)} contents but {len(metadatas)} metadata dicts"
            )
        for content, metadata in zip(contents, metadatas):
            problem = self._check_content(content) or _check_metadata(metadata)
            if problem:
                return MemoryResult("add", False, message=problem)
        vectors_ND = self.encoder.encode(list(contents))
        index = self._scope(scope)
        now = self.clock()
        added = []
        for content, metadata, vector_D in zip(contents, metadatas, vectors_ND):
            entry = MemoryEntry(
                id=self._new_id(scope, content),
                content=content,
                embedding_D=vector_D,
                metadata={**copy.deepcopy(metadata), "created_at": now, "updated_at": now},
                scope=scope,
            )
            index.insert(entry)
            added.append(entry)
        ids = ", ".join(e.id for e in added)
        return MemoryResult(
            "add", True, added, message=f"stored {len(added)} memory entr{'y' if len(added) == 1 else 'ies'}: {ids}"
        )

    def update(
        self,
        memory_id: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        """Replace an entry's content (re-embedded) and merge ``metadata`` into its metadata."""
        problem = self._check_content(content) or _check_metadata(metadata or {})
        if problem:
            return MemoryResult("update", False, message=problem)
        old = self._find(memory_id, scope)
        if old is None:
            return MemoryResult("update", False, message=self._unknown_id(memory_id, scope))
        merged = {
            **old.metadata,
            **copy.deepcopy(metadata or {}),
            "created_at": old.metadata["created_at"],
            "updated_at": self.clock(),
        }
        new = MemoryEntry(old.id, content, self.encoder.encode([content])[0], merged, scope)
        self._scopes[scope].replace(new)
        return MemoryResult("update", True, [new], message=f"updated {memory_id}")

    def delete(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        if self._find(memory_id, scope) is None:
            return MemoryResult("delete", False, message=self._unknown_id(memory_id, scope))
        removed = self._scopes[scope].remove(memory_id)
        return MemoryResult("delete", True, [removed], message=f"deleted {memory_id}")

    def retrieve(
        self,
        query: str,
        top_k: int = 3,
        metadata_filter: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        """The ``top_k`` entries most cosine-similar to ``query``, best first.

        ``metadata_filter`` keeps entries whose metadata equal every given key's value (for a
        list-valued field such as tags: contain it; a list in the filter: any of its values).
        """
        if not isinstance(query, str) or not query.strip():
            return MemoryResult("retrieve", False, message="query must be a non-empty string")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.max_top_k:
            return MemoryResult(
                "retrieve", False, message=f"top_k must be an integer in [1, {self.max_top_k}], got {top_k!r}"
            )
        if metadata_filter is not None and not isinstance(metadata_filter, dict):
            return MemoryResult("retrieve", False, message="metadata_filter must be an object of key: value pairs")
        index = self._scopes.get(scope)
        if index is None or len(index) == 0:
            return MemoryResult("retrieve", True, message="long-term memory is empty")
        query_D = self.encoder.encode([query])[0]
        rows_M = index.candidate_rows(metadata_filter) if metadata_filter else None
        rows_k, scores_k = index.search(query_D, top_k, rows_M)
        entries = [index.entries[index.row_ids[r]] for r in rows_k]
        scores = [float(score) for score in scores_k]
        note = count_message(len(entries), "retrieved")
        if metadata_filter and not entries:
            note = f"no memory matches metadata_filter {json.dumps(metadata_filter)}"
        return MemoryResult("retrieve", True, entries, scores, message=note)

    # --------------------------------------------------------------- queries
    def get(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryEntry | None:
        return self._find(memory_id, scope)

    def ids(self, *, scope: str = DEFAULT_SCOPE) -> list[str]:
        index = self._scopes.get(scope)
        return list(index.entries) if index else []

    def entries(self, *, scope: str = DEFAULT_SCOPE) -> list[MemoryEntry]:
        index = self._scopes.get(scope)
        return list(index.entries.values()) if index else []

    def scopes(self) -> list[str]:
        return [name for name, index in self._scopes.items() if len(index)]

    def clear(self, *, scope: str = DEFAULT_SCOPE) -> None:
        """Forget the scope entirely: its entries and its id sequence (a cleared scope starts afresh)."""
        self._scopes.pop(scope, None)
        self._sequences.pop(scope, None)

    def copy_scope(self, source: str, target: str) -> None:
        """Make scope ``target`` a copy of scope ``source``: the same entries (ids, contents, metadata, vectors) and
        id sequence, so the copy's new ids continue where the source's stopped. What ``target`` held is dropped;
        later edits of either scope leave the other as it is (a question asked against a conversation's memory)."""
        self.clear(scope=target)
        index = self._scope(target)
        for entry in self.entries(scope=source):
            index.insert(
                MemoryEntry(entry.id, entry.content, entry.embedding_D.copy(), copy.deepcopy(entry.metadata), target)
            )
        if source in self._sequences:
            self._sequences[target] = self._sequences[source]

    def __len__(self) -> int:
        return sum(len(index) for index in self._scopes.values())

    # ------------------------------------------------------------ snapshots
    def save(self, path: str | Path) -> Path:
        """Write every scope to one ``.npz`` file, atomically (a crash never leaves half a file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        all_entries = [e for index in self._scopes.values() for e in index.entries.values()]
        manifest = {
            "version": SNAPSHOT_VERSION,
            "encoder": self.encoder.name,
            "dim": self.encoder.dim,
            "sequences": self._sequences,
            "entries": [
                {"id": e.id, "scope": e.scope, "content": e.content, "metadata": e.metadata} for e in all_entries
            ],
        }
        vectors_ND = (
            np.stack([e.embedding_D for e in all_entries])
            if all_entries
            else np.zeros((0, self.encoder.dim), np.float32)
        )
        with atomic_open(path, "wb") as handle:
            np.savez(handle, vectors=vectors_ND, manifest=np.array(json.dumps(manifest)))
        return path

    def restore(self, path: str | Path) -> None:
        """Replace the store's contents with a snapshot written by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise SnapshotError(
                f"memory snapshot {str(path)!r} does not exist; save one with LongTermMemory.save first"
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                manifest = json.loads(str(data["manifest"]))
                vectors_ND = np.asarray(data["vectors"], dtype=np.float32)
        except (OSError, ValueError, KeyError) as err:
            raise SnapshotError(f"memory snapshot {str(path)!r} is not a valid snapshot: {err}") from err
        if not isinstance(manifest, dict) or manifest.get("version") != SNAPSHOT_VERSION:
            version = manifest.get("version") if isinstance(manifest, dict) else None
            raise SnapshotError(f"snapshot version {version} is not supported (expected {SNAPSHOT_VERSION})")
        if manifest.get("dim") != self.encoder.dim or manifest.get("encoder") != self.encoder.name:
            raise SnapshotError(
                f"snapshot {str(path)!r} was made with encoder {manifest.get('encoder')!r} "
                f"(dim {manifest.get('dim')}), but this store uses {self.encoder.name!r} (dim {self.encoder.dim}); "
                "restore with the same encoder"
            )
        records = manifest.get("entries", [])
        if len(records) != len(vectors_ND):
            raise SnapshotError(f"snapshot {str(path)!r} is corrupt: {len(records)} entries, {len(vectors_ND)} vectors")
        # Build aside and swap in at the end: a bad record must not leave the store half-restored.
        scopes: dict[str, ScopeIndex] = {}
        try:
            for record, vector_D in zip(records, vectors_ND):
                entry = MemoryEntry(
                    record["id"], record["content"], vector_D.copy(), record["metadata"], record["scope"]
                )
                scopes.setdefault(entry.scope, ScopeIndex(self.encoder.dim)).insert(entry)
            sequences = {str(k): int(v) for k, v in manifest["sequences"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise SnapshotError(f"snapshot {str(path)!r} is corrupt: bad record ({err!r})") from err
        self._scopes, self._sequences = scopes, sequences

    @classmethod
    def load(cls, path: str | Path, encoder: Encoder, **kwargs: Any) -> LongTermMemory:
        store = cls(encoder, **kwargs)
        store.restore(path)
        return store

    # -------------------------------------------------------------- helpers
    def _scope(self, scope: str) -> ScopeIndex:
        if scope not in self._scopes:
            self._scopes[scope] = ScopeIndex(self.encoder.dim)
        return self._scopes[scope]

    def _find(self, memory_id: Any, scope: str) -> MemoryEntry | None:
        index = self._scopes.get(scope)
        if index is None or not isinstance(memory_id, str):
            return None
        return index.entries.get(memory_id)

    def _unknown_id(self, memory_id: Any, scope: str) -> str:
        return f"{unknown_id_message(memory_id, self.ids(scope=scope))}. Use Retrieve_memory to find the id first"

    def _new_id(self, scope: str, content: str) -> str:
        """``mem_`` + 8 hex digits of a hash of (scope, sequence, content), or with ``id_style='short'`` ``m`` +
        the scope's sequence number: a small policy copies ``m3`` where it miscopies ``mem_84d55b7b`` (LLM memory
        systems commonly show a model small integers in place of UUIDs for the same reason)."""
        taken = self._scope(scope).entries
        while True:
            self._sequences[scope] = self._sequences.get(scope, 0) + 1
            sequence = self._sequences[scope]
            if self.id_style == "short":
                entry_id = f"m{sequence}"  # the counter never goes back, so a deleted entry's id is never reused
            else:
                digest = hashlib.sha1(f"{scope}\x00{sequence}\x00{content}".encode()).hexdigest()
                entry_id = f"mem_{digest[:8]}"
            if entry_id not in taken:  # ids are only ever looked up within their scope
                return entry_id

    def _check_content(self, content: Any) -> str | None:
        if not isinstance(content, str) or not content.strip():
            return "content must be a non-empty string"
        if len(content) > self.max_entry_chars:
            return (
                f"content has {len(content)} characters, over the limit of {self.max_entry_chars}; store a shorter fact"
            )
        return None


def _check_metadata(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return "metadata must be an object of key: value pairs"
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError):  # allow_nan=False also rejects NaN and infinity
        return "metadata values must be plain JSON (strings, finite numbers, booleans, lists, objects)"
    clash = [k for k in SYSTEM_KEYS if k in metadata]
    if clash:
        return f"metadata keys {clash} are set by the memory store; leave them out"
    return None

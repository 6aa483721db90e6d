"""A long-term memory that lives in a SQLite file: every change is committed before the verb returns.

:class:`SQLiteLongTermMemory` is a :class:`~agemem.core.ltm.LongTermMemory`, hence a
:class:`~agemem.core.memory.MemoryStore` the memory tools run on unchanged (same verbs, same results, same
in-memory index for retrieval), that writes each successful Add / Update / Delete / clear through to
``path`` in one transaction. Opening the file again, in this process or after a restart, rebuilds the
index from it, so a deployed agent's memories survive restarts and crashes (SQLite's journal keeps
the file consistent even when the process dies mid-write).

The file records the encoder that embedded its entries; opening it with another encoder is an error,
because similarities between embeddings of two models mean nothing. One process owns a file at a
time (an exclusive lock): a second agent on the same file gets a clear error instead of a stale view.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from agemem.core.encoders import Encoder
from agemem.core.ltm import LongTermMemory, ScopeIndex, SnapshotError
from agemem.core.memory import DEFAULT_SCOPE, MemoryEntry, MemoryResult

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    row INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order, kept by updates
    scope TEXT NOT NULL,
    id TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,                 -- JSON
    embedding BLOB NOT NULL,                -- float32, little-endian, encoder dim values
    UNIQUE (scope, id)
);
CREATE TABLE IF NOT EXISTS sequences (scope TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class MemoryFileError(RuntimeError):
    """The memory file cannot be used: locked by another process, another encoder's, or not an AgeMem file."""


class SQLiteLongTermMemory(LongTermMemory):
    """:class:`LongTermMemory` persisted to a SQLite file (created when missing). Close it, or use ``with``."""

    def __init__(self, encoder: Encoder, path: str | Path, **kwargs: Any):
        super().__init__(encoder, **kwargs)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)  # explicit BEGIN/COMMIT below
            # the first write takes the file for this connection's lifetime: a second agent fails fast
            self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
            self._db.execute("PRAGMA busy_timeout=0")
            self._db.executescript(_SCHEMA)
            self._claim()
        except sqlite3.DatabaseError as err:
            self._close_quietly()
            if "locked" in str(err):
                raise MemoryFileError(
                    f"memory file {str(self.path)!r} is in use by another agent; close it first, or give this one "
                    "its own --memory file"
                ) from err
            raise MemoryFileError(
                f"{str(self.path)!r} is not an AgeMem memory file ({err}); pick another path"
            ) from err
        self._load()

    # ---------------------------------------------------------------- the verbs, written through
    def add_many(
        self,
        contents: list[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        result = super().add_many(contents, metadatas, scope=scope)
        if result.ok:
            with self._transaction():
                for entry in result.entries:
                    self._insert(entry)
                self._save_sequence(scope)
        return result

    def update(
        self,
        memory_id: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> MemoryResult:
        result = super().update(memory_id, content, metadata, scope=scope)
        if result.ok:
            (entry,) = result.entries
            with self._transaction():
                self._db.execute(
                    "UPDATE entries SET content = ?, metadata = ?, embedding = ? WHERE scope = ? AND id = ?",
                    (entry.content, json.dumps(entry.metadata), _blob(entry.embedding_D), scope, entry.id),
                )
        return result

    def delete(self, memory_id: str, *, scope: str = DEFAULT_SCOPE) -> MemoryResult:
        result = super().delete(memory_id, scope=scope)
        if result.ok:
            with self._transaction():
                self._db.execute("DELETE FROM entries WHERE scope = ? AND id = ?", (scope, memory_id))
        return result

    def clear(self, *, scope: str = DEFAULT_SCOPE) -> None:
        super().clear(scope=scope)
        with self._transaction():
            self._db.execute("DELETE FROM entries WHERE scope = ?", (scope,))
            self._db.execute("DELETE FROM sequences WHERE scope = ?", (scope,))

    def copy_scope(self, source: str, target: str) -> None:
        super().copy_scope(source, target)  # clears target through self.clear, which writes through
        with self._transaction():
            for entry in self.entries(scope=target):
                self._insert(entry)
            if target in self._sequences:
                self._save_sequence(target)

    def restore(self, path: str | Path) -> None:
        """Replace the store (and the file's contents) with an ``.npz`` snapshot written by :meth:`save`."""
        super().restore(path)
        with self._transaction():
            self._db.execute("DELETE FROM entries")
            self._db.execute("DELETE FROM sequences")
            for scope in self._scopes:
                for entry in self.entries(scope=scope):
                    self._insert(entry)
            for scope in self._sequences:
                self._save_sequence(scope)

    # ---------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Release the file (committed changes are already on disk)."""
        self._close_quietly()

    def __enter__(self) -> SQLiteLongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- helpers
    def _transaction(self) -> _Transaction:
        if getattr(self, "_db", None) is None:
            raise MemoryFileError(f"memory file {str(self.path)!r} is closed; open a new SQLiteLongTermMemory")
        return _Transaction(self._db)

    def _claim(self) -> None:
        """Stamp a new file with the schema and encoder; check an existing file's."""
        with _Transaction(self._db):
            rows = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            expected = {"schema": str(SCHEMA_VERSION), "encoder": self.encoder.name, "dim": str(self.encoder.dim)}
            if not rows:
                self._db.executemany("INSERT INTO meta VALUES (?, ?)", expected.items())
                return
        if rows.get("schema") != expected["schema"]:
            raise MemoryFileError(
                f"memory file {str(self.path)!r} has schema {rows.get('schema')!r}, this version reads "
                f"{SCHEMA_VERSION}; export it with the version that wrote it (LongTermMemory.save) and restore here"
            )
        if (rows.get("encoder"), rows.get("dim")) != (expected["encoder"], expected["dim"]):
            raise MemoryFileError(
                f"memory file {str(self.path)!r} was written with encoder {rows.get('encoder')!r} "
                f"(dim {rows.get('dim')}), but this agent embeds with {self.encoder.name!r} (dim {self.encoder.dim}); "
                "use the same env.encoder.model, or start a new memory file"
            )

    def _load(self) -> None:
        scopes: dict[str, ScopeIndex] = {}
        dim = self.encoder.dim
        query = "SELECT scope, id, content, metadata, embedding FROM entries ORDER BY row"
        try:
            for scope, entry_id, content, metadata, blob in self._db.execute(query):
                vector_D = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                if vector_D.shape != (dim,):
                    raise SnapshotError(f"entry {entry_id} has a {vector_D.size}-value embedding, expected {dim}")
                entry = MemoryEntry(entry_id, content, vector_D, json.loads(metadata), scope)
                scopes.setdefault(scope, ScopeIndex(dim)).insert(entry)
            sequences = {scope: int(value) for scope, value in self._db.execute("SELECT scope, value FROM sequences")}
        except (ValueError, SnapshotError) as err:
            self._close_quietly()
            raise MemoryFileError(f"memory file {str(self.path)!r} is corrupt: {err}") from err
        self._scopes, self._sequences = scopes, sequences

    def _insert(self, entry: MemoryEntry) -> None:
        self._db.execute(
            "INSERT INTO entries (scope, id, content, metadata, embedding) VALUES (?, ?, ?, ?, ?)",
            (entry.scope, entry.id, entry.content, json.dumps(entry.metadata), _blob(entry.embedding_D)),
        )

    def _save_sequence(self, scope: str) -> None:
        self._db.execute(
            "INSERT INTO sequences VALUES (?, ?) ON CONFLICT(scope) DO UPDATE SET value = excluded.value",
            (scope, self._sequences.get(scope, 0)),
        )

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        self._db = None
        if db is not None:
            db.close()


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error): a change reaches the file whole or not at all."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def _blob(vector_D: np.ndarray) -> bytes:
    return np.asarray(vector_D, dtype="<f4").tobytes()


def open_memory(path: str | Path | None, encoder: Encoder, **kwargs: Any) -> LongTermMemory:
    """The LTM an agent uses: persisted to the SQLite file ``path``, or in memory only when ``path`` is None."""
    return LongTermMemory(encoder, **kwargs) if path is None else SQLiteLongTermMemory(encoder, path, **kwargs)

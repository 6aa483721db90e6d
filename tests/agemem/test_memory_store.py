"""The SQLite long-term memory: every verb's effect survives closing and reopening the file, retrieval
after a reopen equals the in-memory store's, and misuse (another encoder, a second agent, a foreign
file) is a clear error."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from agemem.core.ltm import LongTermMemory
from agemem.core.memory_store import MemoryFileError, SQLiteLongTermMemory, open_memory
from tests.conftest import WordSetEncoder

FACTS = [
    "alice lives in oslo",
    "bob plays the cello",
    "carol works as a beekeeper",
    "dave has a pet ferret",
]


def _play(store: LongTermMemory) -> dict[str, str]:
    """The same edits on any store: adds in two scopes, an update, a delete; returns the ids."""
    added = store.add_many(FACTS, [{"tags": ["people"]}] * len(FACTS))
    ids = {entry.content: entry.id for entry in added.entries}
    assert store.update(ids["bob plays the cello"], "bob plays the oboe", {"fixed": True}).ok
    assert store.delete(ids["dave has a pet ferret"]).ok
    assert store.add("eve likes tea", scope="eve").ok
    return ids


def test_every_change_survives_reopening_and_retrieval_matches_the_in_memory_store(tmp_path):
    encoder = WordSetEncoder()
    path = tmp_path / "memory.sqlite"
    reference = LongTermMemory(encoder, clock=lambda: 5.0)
    ids = _play(reference)
    with SQLiteLongTermMemory(encoder, path, clock=lambda: 5.0) as store:
        assert _play(store) == ids  # ids depend only on the scope's history, not on the storage
    reopened = SQLiteLongTermMemory(encoder, path)
    assert [e.content for e in reopened.entries()] == [
        "alice lives in oslo",
        "bob plays the oboe",
        "carol works as a beekeeper",
    ]
    assert [e.content for e in reopened.entries(scope="eve")] == ["eve likes tea"]
    oboe = reopened.get(ids["bob plays the cello"])
    assert oboe is not None and oboe.metadata == {
        "tags": ["people"],
        "fixed": True,
        "created_at": 5.0,
        "updated_at": 5.0,
    }
    for query in ("who plays the oboe", "where does alice live", "beekeeper"):
        fresh, stored = reference.retrieve(query, top_k=2), reopened.retrieve(query, top_k=2)
        assert [e.id for e in stored.entries] == [e.id for e in fresh.entries]
        assert np.allclose(stored.scores, fresh.scores)
    assert [e.id for e in reopened.retrieve("anyone", 3, {"tags": "people"}).entries]  # metadata index rebuilt
    # a new entry after the reopen continues the id sequence instead of reusing an id
    assert reopened.add("frank rows").entries[0].id == reference.add("frank rows").entries[0].id
    reopened.clear(scope="eve")
    reopened.close()
    again = SQLiteLongTermMemory(encoder, path)
    assert again.scopes() == ["default"] and len(again) == 4
    again.close()


def test_failed_verbs_write_nothing(tmp_path):
    encoder = WordSetEncoder()
    path = tmp_path / "memory.sqlite"
    with SQLiteLongTermMemory(encoder, path) as store:
        assert not store.add("").ok
        assert not store.update("mem_00000000", "x").ok
        assert not store.delete("mem_00000000").ok
    rows = sqlite3.connect(path).execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    assert rows == 0


def test_a_second_agent_on_the_same_file_is_refused_until_the_first_closes(tmp_path):
    encoder = WordSetEncoder()
    path = tmp_path / "memory.sqlite"
    first = SQLiteLongTermMemory(encoder, path)
    first.add("alice lives in oslo")
    with pytest.raises(MemoryFileError, match="in use by another agent"):
        SQLiteLongTermMemory(encoder, path)
    first.close()
    with SQLiteLongTermMemory(encoder, path) as second:
        assert [e.content for e in second.entries()] == ["alice lives in oslo"]
    with pytest.raises(MemoryFileError, match="closed"):
        first.add("too late")


def test_another_encoder_or_a_foreign_file_is_a_clear_error(tmp_path):
    path = tmp_path / "memory.sqlite"
    SQLiteLongTermMemory(WordSetEncoder(dim=64), path).close()
    with pytest.raises(MemoryFileError, match=r"encoder 'test-word-set' \(dim 64\).*same env\.encoder\.model"):
        SQLiteLongTermMemory(WordSetEncoder(dim=32), path)
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a database, just notes\n" * 50)
    with pytest.raises(MemoryFileError, match="not an AgeMem memory file"):
        SQLiteLongTermMemory(WordSetEncoder(), garbage)


def test_open_memory_is_in_ram_without_a_path_and_restore_rewrites_the_file(tmp_path):
    encoder = WordSetEncoder()
    assert type(open_memory(None, encoder)) is LongTermMemory
    snapshot = LongTermMemory(encoder)
    snapshot.add_many(["snapshot one", "snapshot two"])
    snapshot.save(tmp_path / "bank.npz")
    with open_memory(tmp_path / "m.sqlite", encoder) as store:
        store.add("to be replaced")
        store.restore(tmp_path / "bank.npz")
    with SQLiteLongTermMemory(encoder, tmp_path / "m.sqlite") as store:
        assert [e.content for e in store.entries()] == ["snapshot one", "snapshot two"]


def test_a_copied_scope_is_written_through_to_the_file(tmp_path):
    encoder = WordSetEncoder()
    path = tmp_path / "memory.sqlite"
    with SQLiteLongTermMemory(encoder, path, id_style="short") as store:
        store.add_many(FACTS, scope="talk")
        store.add("old", scope="question")
        store.copy_scope("talk", "question")
        assert store.delete("m1", scope="question").ok
    with SQLiteLongTermMemory(encoder, path, id_style="short") as reopened:
        assert [e.content for e in reopened.entries(scope="question")] == FACTS[1:]
        assert [e.content for e in reopened.entries(scope="talk")] == FACTS
        assert reopened.add("next", scope="question").entries[0].id == "m5"  # the sequence was saved too

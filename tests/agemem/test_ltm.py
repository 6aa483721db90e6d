import json
import random
import re

import numpy as np
import pytest

from agemem.core.ltm import LongTermMemory, MemoryResult, SnapshotError, top_k_indices
from tests.conftest import WordSetEncoder


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(word_encoder, clock):
    return LongTermMemory(word_encoder, max_top_k=5, max_entry_chars=200, clock=clock)


def test_add_returns_entry_with_short_id_and_metadata(store):
    result = store.add("Paris is the capital of France", {"tags": ["geo"], "memory_type": "fact"})
    assert isinstance(result, MemoryResult) and result.ok and result.op == "add"
    (entry,) = result.entries
    assert re.fullmatch(r"mem_[0-9a-f]{8}", entry.id)
    assert entry.metadata == {"tags": ["geo"], "memory_type": "fact", "created_at": 1001.0, "updated_at": 1001.0}
    assert entry.embedding_D.dtype == np.float32 and np.isclose(np.linalg.norm(entry.embedding_D), 1.0)
    assert store.get(entry.id).content == "Paris is the capital of France"


def test_ids_are_reproducible_for_the_same_operation_sequence(word_encoder):
    ids = []
    for _ in range(2):
        memory = LongTermMemory(WordSetEncoder())
        ids.append([memory.add(text).entries[0].id for text in ("a fact", "a fact", "another")])
    assert ids[0] == ids[1]
    assert len(set(ids[0])) == 3  # same content twice still gets two ids


def test_update_keeps_id_and_created_at_and_re_embeds(store):
    entry_id = store.add("the cat sat on the mat", {"tags": ["pets"]}).entries[0].id
    store.add("stock markets fell sharply today")
    result = store.update(entry_id, "quantum computers factor integers", {"source": "fix"})
    assert result.ok and result.entries[0].id == entry_id
    meta = store.get(entry_id).metadata
    assert meta["created_at"] == 1001.0 and meta["updated_at"] == 1003.0
    assert meta["tags"] == ["pets"] and meta["source"] == "fix"  # merged, not replaced
    best = store.retrieve("quantum integers", top_k=1)
    assert best.entries[0].id == entry_id  # the new content is what is searched


def test_delete_removes_from_search_and_listing(store):
    keep = store.add("alpha beta").entries[0].id
    gone = store.add("alpha gamma").entries[0].id
    result = store.delete(gone)
    assert result.ok and result.entries[0].content == "alpha gamma"
    assert [e.id for e in store.entries()] == [keep]
    assert [e.id for e in store.retrieve("alpha gamma", top_k=5).entries] == [keep]


@pytest.mark.parametrize("verb", ["update", "delete"])
def test_unknown_id_is_an_error_result_that_says_how_to_fix(store, verb):
    store.add("something")
    args = ("mem_deadbeef", "new text") if verb == "update" else ("mem_deadbeef",)
    result = getattr(store, verb)(*args)
    assert not result.ok and result.op == verb and result.entries == []
    assert "mem_deadbeef" in result.message and "Retrieve_memory" in result.message


def test_scope_is_the_same_argument_on_every_verb(store):
    mine = store.add("shared words here", scope="task-1/rollout-0").entries[0].id
    store.add("shared words here", scope="task-1/rollout-1")
    assert len(store.retrieve("shared words", scope="task-1/rollout-0").entries) == 1
    assert not store.update(mine, "x", scope="task-1/rollout-1").ok  # ids do not leak across scopes
    assert not store.delete(mine, scope="other").ok
    assert store.delete(mine, scope="task-1/rollout-0").ok
    assert store.scopes() == ["task-1/rollout-1"]


def test_retrieve_ranks_exactly_by_cosine(store):
    # WordSetEncoder cosines: query {red, apple, pie} vs
    #   "red apple pie recipe" -> 3/sqrt(3*4) = 0.866; "red apple" -> 2/sqrt(3*2) = 0.816;
    #   "green apple" -> 1/sqrt(3*2) = 0.408; "blue car" -> 0
    for text in ("blue car", "green apple", "red apple pie recipe", "red apple"):
        store.add(text)
    result = store.retrieve("red apple pie", top_k=3)
    assert [e.content for e in result.entries] == ["red apple pie recipe", "red apple", "green apple"]
    assert result.scores == pytest.approx([3 / 12**0.5, 2 / 6**0.5, 1 / 6**0.5], abs=1e-6)


def test_retrieve_top_k_larger_than_store_and_empty_store(store):
    empty = store.retrieve("anything")
    assert empty.ok and empty.entries == [] and "empty" in empty.message
    store.add("only entry")
    assert len(store.retrieve("entry", top_k=5).entries) == 1


@pytest.mark.parametrize("top_k", [0, 6, "3", True, 2.5])
def test_retrieve_rejects_bad_top_k(store, top_k):
    store.add("x")
    result = store.retrieve("x", top_k=top_k)
    assert not result.ok and "top_k" in result.message


def test_metadata_filter_scalar_tags_any_of_and_conjunction(store):
    store.add("apple one", {"memory_type": "fact", "tags": ["fruit", "red"], "stage": 1})
    store.add("apple two", {"memory_type": "episode", "tags": ["fruit"], "stage": 1})
    store.add("apple three", {"memory_type": "fact", "tags": ["green"], "stage": 2})

    def contents(metadata_filter):
        return sorted(e.content for e in store.retrieve("apple", top_k=5, metadata_filter=metadata_filter).entries)

    assert contents({"memory_type": "fact"}) == ["apple one", "apple three"]
    assert contents({"tags": "fruit"}) == ["apple one", "apple two"]  # list field: membership
    assert contents({"tags": ["red", "green"]}) == ["apple one", "apple three"]  # list filter: any of
    assert contents({"memory_type": "fact", "stage": 1}) == ["apple one"]  # keys: all of
    none = store.retrieve("apple", metadata_filter={"tags": "blue"})
    assert none.ok and none.entries == [] and "metadata_filter" in none.message


@pytest.mark.parametrize(
    ("content", "metadata", "fragment"),
    [
        ("", None, "non-empty"),
        ("   ", None, "non-empty"),
        ("x" * 201, None, "limit of 200"),
        ("ok", {"created_at": 1}, "set by the memory store"),
        ("ok", {"score": float("nan")}, "finite"),
        ("ok", "not a dict", "object"),
    ],
)
def test_add_rejects_bad_input_without_changing_the_store(store, content, metadata, fragment):
    result = store.add(content, metadata)
    assert not result.ok and fragment in result.message
    assert len(store) == 0


def test_add_many_encodes_in_one_batch(store, word_encoder):
    calls_before = word_encoder.calls
    result = store.add_many(["one", "two", "three"], [{"i": 1}, {"i": 2}, {"i": 3}])
    assert result.ok and [e.metadata["i"] for e in result.entries] == [1, 2, 3]
    assert word_encoder.calls == calls_before + 1


def test_random_edit_sequences_match_brute_force_search(word_encoder):
    """Swap-removal and in-place updates must keep matrix rows and entries in sync."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    store = LongTermMemory(word_encoder, max_top_k=50)
    for _ in range(400):
        live = store.entries()
        action = rng.random()
        if action < 0.5 or not live:
            store.add(" ".join(rng.sample(words, 4)))
        elif action < 0.75:
            assert store.delete(rng.choice(live).id).ok
        else:
            assert store.update(rng.choice(live).id, " ".join(rng.sample(words, 4))).ok
        query = " ".join(rng.sample(words, 3))
        live = store.entries()
        if not live:
            continue
        query_D = word_encoder.encode([query])[0]
        expected = sorted((-float(e.embedding_D @ query_D), i) for i, e in enumerate(live))
        got = store.retrieve(query, top_k=5)
        assert got.scores == pytest.approx([-s for s, _ in expected[:5]], abs=1e-6)
        # Ids too, wherever the score is not tied with the next one (ties may come in any order).
        best = [(-s, live[i].id) for s, i in expected[:6]]
        for rank, entry in enumerate(got.entries):
            untied = all(abs(best[rank][0] - other) > 1e-6 for other, _ in best if _ != best[rank][1])
            if untied:
                assert entry.id == best[rank][1]


def test_top_k_indices_matches_full_sort():
    scores = np.random.default_rng(1).normal(size=1000).astype(np.float32)
    assert top_k_indices(scores, 7).tolist() == np.argsort(-scores)[:7].tolist()
    assert top_k_indices(scores[:3], 10).tolist() == np.argsort(-scores[:3]).tolist()
    assert top_k_indices(scores[:0], 3).tolist() == []


def test_observation_is_json_without_embeddings_or_timestamps(store):
    store.add("the sky is blue", {"tags": ["color"]})
    payload = store.retrieve("sky").to_observation()
    text = json.dumps(payload)
    assert payload["memories"][0]["metadata"] == {"tags": ["color"]}
    assert "created_at" not in text and "embedding" not in text
    assert payload["memories"][0]["score"] == 0.5  # {sky} vs {the, sky, is, blue}: 1 / sqrt(1 * 4)


def test_snapshot_round_trip_preserves_everything(tmp_path, word_encoder):
    store = LongTermMemory(word_encoder)
    kept = store.add("alpha beta", {"tags": ["x"]}, scope="a").entries[0].id
    store.add("gamma delta", scope="b")
    doomed = store.add("epsilon", scope="a").entries[0].id
    store.delete(doomed, scope="a")
    path = store.save(tmp_path / "bank" / "memory.npz")
    assert [p.name for p in path.parent.iterdir()] == ["memory.npz"]  # no temp file left behind

    restored = LongTermMemory.load(path, word_encoder)
    assert sorted(restored.scopes()) == ["a", "b"]
    assert restored.get(kept, scope="a").metadata == store.get(kept, scope="a").metadata
    np.testing.assert_array_equal(restored.get(kept, scope="a").embedding_D, store.get(kept, scope="a").embedding_D)
    assert restored.retrieve("alpha", scope="a").to_observation() == store.retrieve("alpha", scope="a").to_observation()
    # The id sequence continues: a new entry gets the id the original store would give, never an old one.
    new_id = restored.add("epsilon", scope="a").entries[0].id
    assert new_id == store.add("epsilon", scope="a").entries[0].id and new_id not in (kept, doomed)


def test_snapshot_refuses_another_encoder_and_bad_files(tmp_path, word_encoder):
    path = LongTermMemory(word_encoder).save(tmp_path / "m.npz")
    other = WordSetEncoder(dim=16)
    with pytest.raises(SnapshotError, match="same encoder"):
        LongTermMemory.load(path, other)
    with pytest.raises(SnapshotError, match="does not exist"):
        LongTermMemory.load(tmp_path / "missing.npz", word_encoder)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(SnapshotError, match="not a valid snapshot"):
        LongTermMemory.load(tmp_path / "junk.npz", word_encoder)


def test_restore_of_a_corrupt_snapshot_leaves_the_store_untouched(tmp_path, word_encoder):
    good = LongTermMemory(word_encoder)
    good.add_many(["one", "two", "three"])
    path = good.save(tmp_path / "m.npz")
    with np.load(path) as data:
        manifest, vectors = json.loads(str(data["manifest"])), data["vectors"]
    del manifest["entries"][2]["scope"]
    np.savez(tmp_path / "bad_record.npz", vectors=vectors, manifest=np.array(json.dumps(manifest)))
    np.savez(tmp_path / "short.npz", vectors=vectors[:1], manifest=np.array(json.dumps(manifest)))

    target = LongTermMemory(word_encoder)
    target.add("keep me")
    for name, fragment in (("bad_record.npz", "bad record"), ("short.npz", "3 entries, 1 vectors")):
        with pytest.raises(SnapshotError, match=fragment):
            target.restore(tmp_path / name)
        assert [e.content for e in target.entries()] == ["keep me"]  # not half-restored


def test_ids_depend_only_on_their_own_scope(word_encoder):
    alone = LongTermMemory(word_encoder).add("x", scope="a").entries[0].id
    busy = LongTermMemory(word_encoder)
    busy.add("y", scope="b")  # another rollout's activity must not change scope a's ids
    assert busy.add("x", scope="a").entries[0].id == alone


def test_metadata_is_copied_and_numeric_filters_match_across_int_and_float(store):
    tags = ["a"]
    store.add("apple", {"tags": tags, "stage": 1})
    tags.append("b")  # the caller's list must not change the stored entry behind the index's back
    assert store.entries()[0].metadata["tags"] == ["a"]
    assert len(store.retrieve("apple", metadata_filter={"stage": 1.0}).entries) == 1
    assert store.retrieve("apple", metadata_filter={"stage": True}).entries == []  # True is not 1


def test_short_ids_count_per_scope_and_are_never_reused(tmp_path, word_encoder):
    """id_style='short': m1, m2, ... per scope; a deleted id stays retired, and a snapshot continues the count."""
    store = LongTermMemory(word_encoder, id_style="short")
    assert [store.add(text).entries[0].id for text in ("a", "b", "c")] == ["m1", "m2", "m3"]
    assert store.add("other scope", scope="s2").entries[0].id == "m1"  # each scope counts on its own
    assert store.delete("m3").ok and store.update("m1", "a again").entries[0].id == "m1"
    assert store.add("d").entries[0].id == "m4"  # not m3: an id the agent saw deleted never names another entry
    again = store.delete("m3")
    assert not again.ok and "m3" in again.message and "Retrieve_memory" in again.message
    restored = LongTermMemory(word_encoder, id_style="short")
    restored.restore(store.save(tmp_path / "m.npz"))
    assert restored.add("e").entries[0].id == "m5"


def test_unknown_id_style_is_refused_by_the_store_and_the_config():
    from agemem.core.config import LTMConfig
    from agemem.core.configlib import ConfigError

    with pytest.raises(ValueError, match="id_style='uuid' must be one of hash, short"):
        LongTermMemory(WordSetEncoder(), id_style="uuid")
    with pytest.raises(ConfigError, match="id_style='uuid' must be one of hash, short"):
        LTMConfig(id_style="uuid").validate()


# --------------------------------------------------------------------------------------------- copy_scope


def test_a_copied_scope_holds_the_same_entries_and_edits_stay_apart():
    store = LongTermMemory(WordSetEncoder(), id_style="short", clock=lambda: 1.0)
    store.add_many(["alice lives in oslo", "bob plays the cello", "carol keeps bees"], scope="talk")
    store.delete("m2", scope="talk")
    store.add("stale note", scope="copy")  # whatever the target held goes
    store.copy_scope("talk", "copy")
    assert [(e.id, e.content, e.metadata) for e in store.entries(scope="copy")] == [
        (e.id, e.content, e.metadata) for e in store.entries(scope="talk")
    ]
    hits = store.retrieve("who lives in oslo", 1, scope="copy")
    assert hits.entries[0].id == "m1" and hits.scores == store.retrieve("who lives in oslo", 1, scope="talk").scores
    # the copy's next id continues the source's sequence (m4, never a reused m2); edits never cross over
    assert store.add("dave has a ferret", scope="copy").entries[0].id == "m4"
    assert store.delete("m1", scope="copy").ok and store.update("m3", "carol keeps wasps", scope="copy").ok
    assert [e.content for e in store.entries(scope="talk")] == ["alice lives in oslo", "carol keeps bees"]
    assert [e.content for e in store.entries(scope="copy")] == ["carol keeps wasps", "dave has a ferret"]
    store.copy_scope("nothing here", "copy")
    assert store.entries(scope="copy") == []

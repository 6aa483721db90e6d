"""ScopeIndex.search, the one vector search (long-term memory and the stream's experience bank): against a brute-force
reference over generated histories of inserts and removes, with tied scores on purpose (vectors drawn from a few
directions), for each tie rule, with and without a metadata filter."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agemem.core.ltm import ScopeIndex
from agemem.core.memory import MemoryEntry
from agemem.eval.stream.bank import MemoryBank, Record
from tests.conftest import WordSetEncoder

DIRECTIONS = np.eye(3, dtype=np.float32)
"""three unit vectors: entries share them, so many scores tie exactly."""

operations = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.integers(0, 2), st.sampled_from(["a", "b"])),
        st.tuples(st.just("remove"), st.integers(0, 30), st.just("")),
    ),
    min_size=1,
    max_size=40,
)


def _replay(history) -> tuple[ScopeIndex, list[tuple[str, int, str]]]:
    """The index after ``history``, and the live entries ``(id, direction, tag)`` in insertion order."""
    index, live, made = ScopeIndex(3), [], 0
    for op, value, tag in history:
        if op == "insert":
            entry_id = f"e{made}"
            made += 1
            index.insert(MemoryEntry(entry_id, entry_id, DIRECTIONS[value], {"tag": tag}))
            live.append((entry_id, value, tag))
        elif live:
            entry_id = live.pop(value % len(live))[0]
            index.remove(entry_id)
    return index, live


@settings(max_examples=200, deadline=None)
@given(operations, st.integers(0, 2), st.integers(1, 6), st.sampled_from(["newer", "older"]), st.booleans())
def test_exact_tie_rules_match_a_brute_force_sort(history, direction, k, ties, filtered):
    index, live = _replay(history)
    query_D = DIRECTIONS[direction]
    rows_M = index.candidate_rows({"tag": "a"}) if filtered else None
    rows_k, scores_k = index.search(query_D, k, rows_M, ties=ties)
    candidates = [(age, entry_id, d) for age, (entry_id, d, tag) in enumerate(live) if not filtered or tag == "a"]
    # best score first; among equal scores the later insertion (newer) or the earlier (older)
    expected = sorted(candidates, key=lambda c: (-float(c[2] == direction), -c[0] if ties == "newer" else c[0]))[:k]
    assert [index.row_ids[row] for row in rows_k] == [entry_id for _, entry_id, _ in expected]
    assert list(scores_k) == [float(d == direction) for _, _, d in expected]


@settings(max_examples=200, deadline=None)
@given(operations, st.integers(0, 2), st.integers(1, 6))
def test_the_fast_rule_returns_the_best_scores_whatever_the_ties(history, direction, k):
    index, live = _replay(history)
    rows_k, scores_k = index.search(DIRECTIONS[direction], k)
    best = sorted((float(d == direction) for _, d, _ in live), reverse=True)[:k]
    assert list(scores_k) == best and len(set(rows_k.tolist())) == len(rows_k)
    for row, score in zip(rows_k, scores_k):  # each score is its row's own
        assert float(index.vector(index.row_ids[row]) @ DIRECTIONS[direction]) == score


def test_the_bank_searches_on_the_index_newer_first_and_filters_like_long_term_memory():
    bank = MemoryBank(WordSetEncoder())
    for n, (query, kind) in enumerate([("red apple", "fruit"), ("red apple", "fruit"), ("red car", "car")]):
        bank.add(Record(f"r{n}", query, f"exec {n}", f"t{n}", n, "stream", metadata={"kind": kind}))
    query_D = bank.embed(["red apple"])[0]
    assert [r.record.id for r in bank.similar(query_D, 3)] == ["r1", "r0", "r2"]  # the tie goes to the newer
    assert [r.record.id for r in bank.similar(query_D, 3, {"kind": "car"})] == ["r2"]
    bank.revise("r2", "exec 2, revised", {"kind": "fruit"})  # an Update re-indexes the metadata
    assert [r.record.id for r in bank.similar(query_D, 3, {"kind": "car"})] == []
    assert [r.record.id for r in bank.similar(query_D, 3, {"kind": ["fruit"]})] == ["r1", "r0", "r2"]
    bank.delete("r1")
    assert [r.record.id for r in bank.similar(query_D, 2)] == ["r0", "r2"]
    # recency orders by write step; each record keeps its own similarity to the query
    similarity = {r.record.id: r.similarity for r in bank.similar(query_D, 2)}
    assert [(r.record.id, r.similarity) for r in bank.recent(query_D, 2)] == [
        ("r2", similarity["r2"]),
        ("r0", similarity["r0"]),
    ]
    np.testing.assert_array_equal(bank.matrix(), bank.embed(["red apple", "red car"]))  # insertion order

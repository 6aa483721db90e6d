"""Task orders (given, shuffled, distribution shift by a diagonal Gaussian mixture) and the bank's retrieval."""

from __future__ import annotations

import numpy as np
import pytest

from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.order import GivenOrder, ShiftOrder, ShuffledOrder, apply_order, cluster_order, fit_diagonal_gmm
from agemem.eval.stream.runner import stream_items
from agemem.eval.stream.tasks import build_task
from tests.conftest import WordSetEncoder
from tests.eval.stream.helpers import stream_config


def test_gmm_recovers_three_separated_clusters_and_is_seeded():
    rng = np.random.default_rng(7)
    centres = np.array([[0.0] * 4, [5.0] * 4, [-5.0, 5.0, -5.0, 5.0]])
    points = np.concatenate([rng.normal(c, 0.3, size=(15, 4)) for c in centres])
    labels = fit_diagonal_gmm(points, 3, seed=0).labels
    groups = [set(labels[i * 15 : (i + 1) * 15]) for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 3
    assert fit_diagonal_gmm(points, 3, seed=0).labels == labels
    assert fit_diagonal_gmm(points[:2], 3).labels in ([0, 1], [1, 0])  # more components than points: cut


def test_cluster_order_keeps_clusters_contiguous_in_order_of_first_appearance():
    assert cluster_order([2, 0, 2, 1, 0]) == [0, 2, 1, 4, 3]


def test_orders_on_the_build_task():
    queries = ["red apple pie", "blue sky", "red apple tart", "blue sky night", "green tea", "green tea cup"]
    embed = WordSetEncoder().encode
    assert GivenOrder().order(queries, embed) == list(range(6))
    shuffled = ShuffledOrder(seed=1).order(queries, embed)
    assert sorted(shuffled) == list(range(6)) and shuffled == ShuffledOrder(seed=1).order(queries, embed)
    shifted = ShiftOrder(clusters=3, seed=0).order(queries, embed)
    assert sorted(shifted) == list(range(6))
    config = stream_config(
        "stream.task=synthetic", "stream.synthetic_tasks=30", "stream.order=shift", "stream.limit=24"
    )
    _, items = stream_items(config, build_task(config), WordSetEncoder())
    assert len(items) == 24 and {i.id for i in items} == {f"synthetic-stream-0-{i}" for i in range(24)}
    with pytest.raises(ValueError, match="permutation"):
        apply_order([1, 2], [0, 0])


def test_similar_retrieval_ranks_by_cosine_and_prefers_the_newer_record_on_ties():
    bank = MemoryBank(WordSetEncoder())
    for i, query in enumerate(["red apple", "red apple", "blue sky", "red pear"]):
        bank.add(Record(f"r{i}", query, "Answer: x", f"t{i}", i, "stream"))
    query_D = bank.embed(["red apple"])[0]
    found = bank.similar(query_D, 3)
    assert [r.record.id for r in found] == ["r1", "r0", "r3"]  # the two exact matches, newer first
    assert [round(r.similarity, 3) for r in found] == [1.0, 1.0, 0.5]
    assert [r.record.id for r in bank.recent(query_D, 2)] == ["r3", "r2"]
    bank.note_retrieval(found[:1], step=7, utility=0.25)
    assert (bank.get("r1").retrieved_at, bank.get("r1").utilities, bank.get("r1").last_access) == ([7], [0.25], 7)
    bank.delete("r1")
    assert [r.record.id for r in bank.similar(query_D, 1)] == ["r0"] and len(bank) == 3
    with pytest.raises(ValueError, match="already in the bank"):
        bank.add(Record("r0", "x", "y", "t", 0, "stream"))

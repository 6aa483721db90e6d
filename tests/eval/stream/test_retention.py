"""Bounded retention: each policy's victim on a hand-made bank, the feature formulas, the capacity invariant on a
stream for every policy, and the cross-entropy-method search of the linear weights."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from agemem.core.configlib import ConfigError
from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.config import RETENTION_FEATURES
from agemem.eval.stream.evaluate import tune_retention
from agemem.eval.stream.retention import (
    FEATURES,
    HAND_WEIGHTS,
    EbbinghausRetention,
    FIFORetention,
    LFURetention,
    LinearRetention,
    LRURetention,
    RandomRetention,
    UtilityRetention,
    cem_search,
    ebbinghaus_retention,
    evict,
    feature_contexts,
    feature_vector,
    load_weights,
)
from agemem.eval.stream.runner import run_stream
from agemem.eval.stream.tasks import build_task
from tests.conftest import WordSetEncoder
from tests.eval.stream.helpers import stream_config
from tests.eval.stream.simulated_agent import SimilarityCopyingSimulatedAgent


def _bank(*records: Record) -> MemoryBank:
    bank = MemoryBank(WordSetEncoder())
    for record in records:
        bank.add(record)
    return bank


def _record(record_id, query, created_at, retrieved_at=(), utilities=(), score=1.0) -> Record:
    return Record(
        record_id,
        query,
        "Answer: x",
        record_id,
        created_at,
        "stream",
        success=score,
        score=score,
        retrieved_at=list(retrieved_at),
        similarities=[0.5] * len(retrieved_at),
        utilities=list(utilities),
    )


def _victim(bank, policy, step=10):
    (eviction,) = evict(bank, len(bank) - 1, policy, step)
    return eviction.record_id


def _hand_bank():
    return _bank(
        _record("old_busy", "red apple", 0, retrieved_at=[1, 2, 3, 4], utilities=[1, 1, 1, 1]),
        _record("mid_stale", "blue sky", 2, retrieved_at=[3], utilities=[0]),
        _record("new_unused", "green tea", 8),
    )


def test_each_policy_evicts_its_own_victim():
    assert _victim(_hand_bank(), FIFORetention()) == "old_busy"  # written first
    assert _victim(_hand_bank(), LRURetention()) == "mid_stale"  # last used at step 3
    assert _victim(_hand_bank(), LFURetention()) == "new_unused"  # never retrieved
    assert _victim(_hand_bank(), UtilityRetention(prior=0.5)) == "mid_stale"  # mean utility 0 < prior < 1
    # Ebbinghaus at step 10: old_busy exp(-6/25), mid_stale exp(-7/10), new_unused exp(-2/5)
    assert _victim(_hand_bank(), EbbinghausRetention(strength=5.0)) == "mid_stale"
    assert ebbinghaus_retention(_hand_bank().get("mid_stale"), 10, 5.0) == pytest.approx(math.exp(-0.7))
    first = _victim(_hand_bank(), RandomRetention(seed=3))
    assert first == _victim(_hand_bank(), RandomRetention(seed=3))  # seeded: the same draw again


def test_feature_formulas():
    bank = _bank(
        _record("a", "red apple pie", 0, retrieved_at=[2, 6], utilities=[1.0, 0.0], score=1.0),
        _record("b", "red apple tart", 4),
        _record("c", "blue sky", 5, score=0.0),
    )
    contexts = feature_contexts(bank, step=10, tau=20.0, prior=0.5)
    a = feature_vector(bank.get("a"), contexts["a"])
    assert list(a) == list(RETENTION_FEATURES) == list(FEATURES)
    assert a["success"] == 1.0
    assert a["age"] == pytest.approx(1 - math.exp(-10 / 20))
    assert a["recency"] == pytest.approx(math.exp(-4 / 20))  # last retrieved at step 6
    assert a["frequency"] == pytest.approx(2 / 10)
    assert a["redundancy"] == pytest.approx(2 / 3)  # "red apple" shared with "red apple tart"
    assert a["specificity"] == pytest.approx(1 - (2 / 3 + 0) / 2)
    assert a["utility"] == 0.5 and a["utility_count"] == pytest.approx(2 / 3)
    assert a["similarity"] == 0.5
    c = feature_vector(bank.get("c"), contexts["c"])
    assert (c["success"], c["utility"], c["utility_count"], c["similarity"], c["redundancy"]) == (0, 0.5, 0, 0, 0)
    assert c["recency"] == pytest.approx(math.exp(-5 / 20))  # never retrieved: since it was written


def test_linear_score_weights_choose_the_victim():
    bank = lambda: _bank(  # noqa: E731
        _record("good", "red apple pie", 0, score=1.0),
        _record("dup", "red apple pie tart", 1, score=1.0),
        _record("failed", "blue sky", 2, score=0.0),
    )
    only_success = {name: 0.0 for name in RETENTION_FEATURES} | {"success": 1.0}
    assert _victim(bank(), LinearRetention(only_success, 20.0, 0.5)) == "failed"
    only_redundancy = {name: 0.0 for name in RETENTION_FEATURES} | {"redundancy": -1.0}
    assert _victim(bank(), LinearRetention(only_redundancy, 20.0, 0.5)) == "good"  # tie with dup: the older
    assert _victim(bank(), LinearRetention(HAND_WEIGHTS, 20.0, 0.5)) == "failed"


@pytest.mark.parametrize("policy", ["utility", "fifo", "lru", "lfu", "random", "ebbinghaus", "linear"])
def test_capacity_is_never_exceeded(tmp_path, policy):
    config = stream_config(
        "stream.task=synthetic",
        "stream.synthetic_tasks=40",
        "stream.synthetic_families=5",
        "stream.addition=add_all",
        "stream.noisy_writes=1",
        f"stream.retention={policy}",
        "stream.capacity=6",
    )
    task = build_task(config)
    outcome = run_stream(config, task, SimilarityCopyingSimulatedAgent(), WordSetEncoder(), tmp_path, model="sim")
    sizes = [s["bank_size"] for s in outcome.steps]
    assert max(sizes) == 6 and sizes[-1] == 6  # full, never over
    assert len(outcome.final_ids) == 6
    evictions = [d for s in outcome.steps for d in s["deletions"]]
    assert len(evictions) == 2 * 40 - 6 and all(d["reason"].startswith(f"capacity: {policy}") for d in evictions)


def test_cem_search_climbs_a_known_objective():
    target = {name: (1.0 if i % 2 else -1.0) for i, name in enumerate(RETENTION_FEATURES)}

    def objective(weights, name):
        return -sum((weights[k] - target[k]) ** 2 for k in target)

    seen = []
    result = cem_search(
        lambda w, n: seen.append(n) or objective(w, n), iterations=6, population=20, elite=0.2, std=1.0, seed=0
    )
    assert seen[:2] == ["i0_c0", "i0_c1"] and len(seen) == 120
    assert result.history[0]["candidates"][0]["weights"] == HAND_WEIGHTS  # the hand weights are tried first
    assert result.objective > objective(HAND_WEIGHTS, "") / 4
    assert result.objective == max(c["objective"] for h in result.history for c in h["candidates"])
    with pytest.raises(ValueError, match="iterations"):
        cem_search(objective, iterations=0)


def test_tune_retention_writes_weights_a_run_can_load(tmp_path):
    overrides = [
        "stream.task=synthetic",
        "stream.synthetic_tasks=24",
        "stream.synthetic_families=4",
        "stream.capacity=4",
        "stream.noisy_writes=3",
        "stream.cem_iterations=2",
        "stream.cem_population=3",
    ]
    config = stream_config(*overrides)
    report = tune_retention(config, tmp_path, solver=SimilarityCopyingSimulatedAgent(), encoder=WordSetEncoder())
    saved = json.loads((tmp_path / "retention_weights.json").read_text())
    assert saved["weights"] == report["weights"] and set(saved["weights"]) == set(RETENTION_FEATURES)
    assert len(saved["history"]) == 2 and len(list((tmp_path / "cem").iterdir())) == 6
    assert saved["objective"] == max(c["objective"] for h in saved["history"] for c in h["candidates"])
    assert load_weights(str(tmp_path / "retention_weights.json")) == saved["weights"]
    tuned = stream_config(
        *overrides, "stream.retention=linear", f"stream.retention_weights_file={tmp_path}/retention_weights.json"
    )
    outcome = run_stream(
        tuned,
        build_task(tuned),
        SimilarityCopyingSimulatedAgent(),
        WordSetEncoder(),
        tmp_path / "run",
        model="sim",
    )
    assert max(s["bank_size"] for s in outcome.steps) == 4


def test_bad_weights_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="unknown feature 'sucess'; did you mean 'success'"):
        stream_config("stream.retention=linear", "stream.retention_weights={sucess: 1.0}")
    with pytest.raises(ConfigError, match="set retention=linear"):
        stream_config("stream.retention=fifo", "stream.retention_weights={success: 1.0}")
    path = tmp_path / "w.json"
    path.write_text('{"weights": {"age": "old"}}')
    with pytest.raises(ConfigError, match="feature: number"):
        load_weights(str(path))
    assert np.isfinite(list(HAND_WEIGHTS.values())).all()

"""The 95% interval `agemem compare` shows beside each headline number: the percentile bootstrap of the
benchmark's own aggregate over a run's items."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pytest

from agemem.eval.compare import FinishedRun, comparison_markdown, comparison_rows, headline_interval
from agemem.eval.config import EvalConfig
from agemem.eval.stats import bootstrap_interval, wilson_interval


def mean(values):
    return sum(values) / len(values)


def test_two_items_give_the_whole_range_and_a_lone_item_none():
    # resamples of [0, 1]: mean 0 (p 1/4), 0.5 (p 1/2), 1 (p 1/4); the 2.5% and 97.5% quantiles are 0 and 1
    assert bootstrap_interval([0.0, 1.0], mean, samples=2000) == (0.0, 1.0)
    assert bootstrap_interval([1.0], mean) is None  # nothing to resample
    assert bootstrap_interval([0.0, 1.0], lambda sample: None) is None  # no resample gives a number
    assert bootstrap_interval([3.0] * 50, mean) == (3.0, 3.0)


@pytest.mark.parametrize("case", range(12))
def test_on_success_rates_it_holds_the_estimate_agrees_with_wilson_and_repeats_under_its_seed(case):
    rng = random.Random(case)
    n, p = rng.choice([200, 400, 800]), rng.uniform(0.2, 0.8)  # away from 0 and 1, where both are near normal
    outcomes = [1.0 if rng.random() < p else 0.0 for _ in range(n)]
    low, high = bootstrap_interval(outcomes, mean, samples=2000, seed=case)
    estimate = mean(outcomes)
    assert low <= estimate <= high
    wilson = wilson_interval(int(sum(outcomes)), n)
    assert abs(low - wilson[0]) < 0.02 and abs(high - wilson[1]) < 0.02  # the same interval to within 2 points
    assert bootstrap_interval(outcomes, mean, samples=2000, seed=case) == (low, high)


@dataclass
class SuccessRate:
    """A benchmark whose aggregate is the share of items won, in %."""

    def aggregate(self, examples):
        return {"SR": 100.0 * sum(e["won"] for e in examples) / len(examples)}


def test_a_runs_interval_is_its_own_aggregate_bootstrapped_over_its_logged_items(tmp_path):
    won = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1] * 3
    (tmp_path / "examples.jsonl").write_text(
        "".join(json.dumps({"id": f"g{i}", "won": w}) + "\n" for i, w in enumerate(won))
    )
    settings = EvalConfig(bootstrap_samples=500, bootstrap_seed=3)
    interval = headline_interval(SuccessRate(), "SR", tmp_path, settings)
    expected = bootstrap_interval(
        [{"id": f"g{i}", "won": w} for i, w in enumerate(won)],
        lambda s: SuccessRate().aggregate(s)["SR"],
        samples=500,
        seed=3,
    )
    assert interval == [round(expected[0], 2), round(expected[1], 2)] and interval[0] < 70.0 < interval[1]
    assert headline_interval(SuccessRate(), "SR", tmp_path, EvalConfig(bootstrap_samples=0)) is None

    results = {"benchmark": "alfworld", "model": "m", "variant": "agemem", "SR": 70.0, "played": 30, "resumed": 0}
    rows = comparison_rows([FinishedRun(results, "alfworld/m__agemem", None, interval)], {"alfworld": "SR"})
    comparison = {
        "title": "t",
        "columns": [{"name": "alfworld", "metric": "SR", "judge": None, "items": 30}],
        "rows": rows,
        "bootstrap": {"samples": 500, "seed": 3},
    }
    text = comparison_markdown(comparison)
    assert f"| 70.00 [{interval[0]:.2f}, {interval[1]:.2f}] |" in text
    assert "95% interval (percentile bootstrap over the run's items, 500 resamples, seed 3)" in text

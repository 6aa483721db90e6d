"""bench/rollout_batch.py: every batch size plays the same step's episodes, alternating, and the report says so."""

from __future__ import annotations

import json
import sys

import pytest

from tests.bench_scripts import BENCH, load_bench_script


@pytest.fixture()
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the script imports machine_info from its sibling rollout_driver.py
    return load_bench_script("rollout_batch")


def test_each_batch_size_plays_the_step_and_is_reported(bench, tmp_path, monkeypatch):
    out = tmp_path / "rollout_batch.json"
    argv = ["rollout_batch.py", "--model", "bundled:learn-warm-start", "--batch-sizes", "1", "2"]
    argv += ["--tasks", "1", "--k", "2", "--repeats", "2", "--out", str(out), "sampling.max_tokens=8"]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    report = json.loads(out.read_text())
    assert (report["tasks"], report["rollouts_per_task"]) == (1, 2)
    assert set(report["rows"]) == {"1", "2"}
    for row in report["rows"].values():
        assert len(row["runs"]) == 2  # one run a repeat
        assert all(run["episodes"] == 2 for run in row["runs"])  # 1 task x 2 rollouts, every run
        assert all(run["generated_tokens"] > 0 for run in row["runs"])
        first, second = (run["wall_s"] for run in row["runs"])
        assert row["wall_s"] == pytest.approx((first + second) / 2)  # the median of two runs is their mean
    assert report["wall_ratio_to_first"]["1"] == 1.0


def test_a_batch_size_below_one_is_refused(bench, monkeypatch):
    argv = ["rollout_batch.py", "--model", "bundled:learn-warm-start", "--batch-sizes", "32", "0"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="every size must be >= 1"):
        bench.main()

"""Error propagation (Xiong et al.): an agent that follows its experience replays the errors stored in memory.

The simulated agent copies the most similar record's execution with a probability that grows with the input
similarity and makes a mistake of its own in 5% of tasks. On the synthetic stream (6 questions, each asked 40
times in a few wordings) adding every execution lets those mistakes pile up and be copied again: add-all
degrades over the stream, while strict addition (correct executions only) keeps near the agent's own error
rate. Both runs draw the same random numbers per task, so the sign test pairs them."""

from __future__ import annotations

import json

import pytest

from agemem.eval.stats import sign_test
from agemem.eval.stream.analysis import segment_accuracy
from agemem.eval.stream.sweep import parse_sweep, run_sweep
from tests.conftest import WordSetEncoder
from tests.eval.stream.helpers import stream_config
from tests.eval.stream.simulated_agent import SimilarityCopyingSimulatedAgent, copy_probability

STREAM = ["stream.task=synthetic", "stream.synthetic_tasks=240", "stream.synthetic_families=6"]
AGENT = SimilarityCopyingSimulatedAgent(error_rate=0.05, copy_floor=0.5, copy_ceiling=0.8)


def test_copy_probability_grows_with_similarity():
    values = [copy_probability(s, 0.5, 0.8) for s in (0.3, 0.5, 0.65, 0.8, 0.95)]
    assert values == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.0])


def test_strict_addition_ends_above_add_all_which_degrades_over_the_stream(tmp_path):
    spec = parse_sweep({"base": {"stream.plot": True}, "grid": {"stream.addition": ["add_all", "strict"]}})
    runs = run_sweep(stream_config(*STREAM), spec, tmp_path, solver=AGENT, encoder=WordSetEncoder())
    add_all, strict = runs
    assert (add_all["strategy"], strict["strategy"]) == ("add_all", "strict")
    # strict ends clearly above add-all, and the paired sign test says it is no accident
    assert strict["accuracy"] - add_all["accuracy"] >= 0.15
    paired = sign_test(strict["outcomes"], add_all["outcomes"])
    assert paired.losses == 0 and paired.wins >= 30 and paired.p_value < 1e-6
    assert strict["vs_reference"]["wins"] == paired.wins  # the comparison table holds the same test
    # add-all degrades: each quarter of the stream is worse than the one before, the last far below the first
    quarters = segment_accuracy(add_all["outcomes"], 4)
    assert quarters == sorted(quarters, reverse=True) and quarters[0] - quarters[-1] >= 0.3
    curve = add_all["curves"]["success"]
    assert curve[-1] < curve[59] - 0.1  # the cumulative success falls after the first quarter
    # strict stays near the agent's own error rate in every quarter
    assert min(segment_accuracy(strict["outcomes"], 4)) >= 0.85
    # the mechanism: add-all's bank fills with wrong executions, which later tasks copy
    assert add_all["records"]["retained"]["correct"] < 0.8 and strict["records"]["retained"]["correct"] == 1.0
    assert add_all["output_similarity"] > 0.9  # experience following: outputs mirror the retrieved records
    table = (tmp_path / "comparison.md").read_text()
    assert "| add_all |" in table and "| strict |" in table
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert [r["strategy"] for r in saved] == ["add_all", "strict"] and saved[0]["vs_reference"] is None
    assert (tmp_path / "comparison.png").stat().st_size > 10_000

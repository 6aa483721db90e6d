"""bench/learning.py --ablation: arms share a seed's warm start, and are compared per held-out task."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def bench():
    return load_bench_script("learning")


def _episode(task: str, em: float, **values: float) -> dict:
    row = {"task_id": task, "em": em, "reward": em, "storage": 1.0, "stored_fact": 1.0, "stored_distractor": 0.0}
    row |= {"retrieved": 1.0, "context_tokens": 100.0, "generated_tokens": 50.0, "steps": 5.0, "violations": 0.0}
    return {**row, "answer": "x", **values}


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_other_arms_link_the_first_arms_pre_grpo_stages(bench, tmp_path):
    first, other = tmp_path / "composite" / "seed_3", tmp_path / "answer_only" / "seed_3"
    with pytest.raises(FileNotFoundError, match="run the first arm of this seed first"):
        bench.link_shared_stages(first, other)
    for name in bench.SHARED_STAGES:
        if name.endswith(".jsonl"):
            _write(first / name, [{"x": 1}])
        else:
            (first / name).mkdir(parents=True)
            (first / name / "weights").write_text(name)
    bench.link_shared_stages(first, other)
    bench.link_shared_stages(first, other)  # idempotent: a resumed ablation links nothing twice
    assert (other / "warm_start" / "weights").read_text() == "warm_start"
    assert (other / "warm_start").resolve() == (first / "warm_start").resolve()
    assert not (other / "grpo").exists()  # each arm trains its own GRPO policy


def test_arms_are_compared_per_task_across_seeds_and_pooled(bench, tmp_path):
    # seed 0: answer_only answers tasks a, b right where composite got a only -> differences (0, +1), mean +0.5
    # seed 1: answer_only loses task c -> differences (-1, 0), mean -0.5
    runs = {
        ("composite", 0): [_episode("a", 1), _episode("b", 0, stored_distractor=1.0)],
        ("answer_only", 0): [_episode("a", 1, updated_stale=1.0), _episode("b", 1, violations=2.0, updated_stale=0.0)],
        ("composite", 1): [_episode("c", 1), _episode("d", 1)],
        ("answer_only", 1): [_episode("c", 0, updated_stale=0.0), _episode("d", 1, updated_stale=0.0)],
    }
    for (arm, seed), rows in runs.items():
        _write(tmp_path / arm / f"seed_{seed}" / "eval_grpo.jsonl", rows)
        if arm == "composite":
            _write(tmp_path / arm / f"seed_{seed}" / "eval_warm_start.jsonl", [_episode(r["task_id"], 0) for r in rows])
    metrics = [{"step": step, "episode/exact_match": step / 10} for step in range(1, 13)]  # 0.1, 0.2, ..., 1.2
    (tmp_path / "answer_only" / "seed_1" / "grpo").mkdir(parents=True)
    (tmp_path / "answer_only" / "seed_1" / "grpo" / "metrics.jsonl").write_text(
        "".join(json.dumps(m) + "\n" for m in metrics)
    )
    comparison = bench.compare_arms(tmp_path, ["composite", "answer_only"], [0, 1])
    # steps 1-10: (0.1 + ... + 1.0) / 10 = 0.55; steps 3-12: (0.3 + ... + 1.2) / 10 = 0.75
    assert comparison["training_em"]["answer_only"]["1"] == pytest.approx({"first": 0.55, "last": 0.75})
    assert comparison["training_em"]["composite"]["0"] is None  # no GRPO metrics in this run
    diff = comparison["em_difference"]["answer_only - composite"]
    assert diff["per_seed"]["0"]["mean"] == 0.5 and diff["per_seed"]["1"]["mean"] == -0.5
    assert diff["across_seeds"]["mean"] == 0.0 and diff["pooled"]["mean"] == 0.0 and diff["pairs"] == 4
    # across seeds: t(0.975, 1) * std(+0.5, -0.5) / sqrt(2) = 12.706 * 0.7071 / 1.4142 = 6.353
    assert diff["across_seeds"]["high"] == pytest.approx(6.353, abs=1e-3)
    assert comparison["learned"]["composite"]["0"]["stored_distractor"] == 0.5
    assert comparison["learned_mean"]["answer_only"]["violations"] == 0.5  # (2 + 0) / 2 tasks, (1.0 + 0) / 2 seeds
    assert comparison["warm_start"]["1"]["em"] == 0.0
    # useful Update: seed 0 fixed a stale entry on 1 of 2 tasks, seed 1 on none -> (0.5 + 0) / 2 seeds
    assert comparison["learned_mean"]["answer_only"]["updated_stale"] == 0.25
    assert math.isnan(comparison["learned_mean"]["composite"]["updated_stale"])  # files without the metric
    assert math.isclose(comparison["learned_mean"]["answer_only"]["em"], (1.0 + 0.5) / 2)
    # files without a tool's metric (composite's lack updated_stale) give no difference, not NaN
    useful = comparison["useful_use_difference_pooled"]["answer_only - composite"]
    assert useful["Update/Delete"] is None and useful["Retrieve"] is None
    table = bench.arms_table(comparison)
    composite_cells, answer_only_cells = table.columns[2]._cells, table.columns[3]._cells
    assert "+0.500 [" in answer_only_cells[len(bench.LEARNED)]  # seed 0's difference, in the answer_only column
    assert not any("[" in cell for cell in composite_cells)
    bench.plot_arms(comparison, tmp_path / "arms.png")
    assert (tmp_path / "arms.png").stat().st_size > 0


def test_each_tools_useful_use_is_compared_per_task_and_pooled(bench, tmp_path):
    tools = {"retrieved_before_answer": 1.0, "managed_context": 0.0}
    # current fixes the stale entry on tasks a and c where composite fixed it on c only: (+1, 0, 0, 0) over 2 seeds
    runs = {
        ("composite", 0): [_episode("a", 0, updated_stale=0.0, **tools), _episode("b", 0, updated_stale=0.0, **tools)],
        ("current", 0): [_episode("a", 1, updated_stale=1.0, **tools), _episode("b", 0, updated_stale=0.0, **tools)],
        ("composite", 1): [_episode("c", 1, updated_stale=1.0, **tools), _episode("d", 0, updated_stale=0.0, **tools)],
        ("current", 1): [_episode("c", 1, updated_stale=1.0, **tools), _episode("d", 0, updated_stale=0.0, **tools)],
    }
    for (arm, seed), rows in runs.items():
        _write(tmp_path / arm / f"seed_{seed}" / "eval_grpo.jsonl", rows)
        _write(tmp_path / arm / f"seed_{seed}" / "eval_warm_start.jsonl", [_episode(r["task_id"], 0) for r in rows])
    useful = bench.compare_arms(tmp_path, ["composite", "current"], [0, 1])["useful_use_difference_pooled"]
    update = useful["current - composite"]["Update/Delete"]
    # mean (1 + 0 + 0 + 0) / 4 = 0.25; sd 0.5, t(0.975, 3) = 3.182: 0.25 +- 3.182 * 0.5 / 2 = [-0.546, +1.046]
    assert update["mean"] == 0.25 and update["high"] == pytest.approx(1.046, abs=1e-3)
    assert useful["current - composite"]["Retrieve"]["mean"] == 0.0


def test_arms_must_score_the_same_held_out_tasks(bench, tmp_path):
    _write(tmp_path / "composite" / "seed_0" / "eval_grpo.jsonl", [_episode("a", 1)])
    _write(tmp_path / "composite" / "seed_0" / "eval_warm_start.jsonl", [_episode("a", 0)])
    _write(tmp_path / "answer_only" / "seed_0" / "eval_grpo.jsonl", [_episode("z", 1)])
    with pytest.raises(ValueError, match="different held-out tasks"):
        bench.compare_arms(tmp_path, ["composite", "answer_only"], [0])


def test_reuse_links_an_earlier_runs_finished_seeds(bench, tmp_path):
    earlier, runs = tmp_path / "earlier", tmp_path / "runs" / "composite"
    for seed in (0, 4):
        _write(earlier / f"seed_{seed}" / "eval_grpo.jsonl", [_episode("a", seed / 4)])
    (earlier / "seed_9.txt").write_text("not a seed directory")
    # seeds 0 and 4 exist there, 2 does not: it stays to be trained under --runs
    assert bench.link_finished_seeds(earlier, runs, [0, 2, 4]) == [0, 4]
    assert bench.link_finished_seeds(earlier, runs, [0, 2, 4]) == [0, 4]  # a resumed ablation links nothing twice
    assert (runs / "seed_4" / "eval_grpo.jsonl").read_text() == (earlier / "seed_4" / "eval_grpo.jsonl").read_text()
    assert not (runs / "seed_2").exists()
    with pytest.raises(FileNotFoundError, match="no seed_N directory of seeds"):
        bench.link_finished_seeds(earlier, runs, [1, 2])
    (tmp_path / "other" / "seed_0").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="drop the --reuse"):  # never silently swap a seed's run
        bench.link_finished_seeds(tmp_path / "other", runs, [0])
    (runs / "seed_2").mkdir()
    _write(earlier / "seed_2" / "eval_grpo.jsonl", [_episode("a", 0)])
    with pytest.raises(FileExistsError, match="is not a link to"):  # its own run of seed 2 is kept
        bench.link_finished_seeds(earlier, runs, [2])


def test_reuse_values_are_not_taken_for_config_overrides(bench):
    argv = ["--seeds", "0", "4", "max_steps=60", "--reuse", "composite=runs/a=b", "--reuse=paper=runs/p", "x.y=1"]
    options, overrides = bench.split_overrides([*argv, "--runs", "runs/k=v"], bench.build_parser())
    assert overrides == ["max_steps=60", "x.y=1"]
    # any one-value option keeps its value, not only --reuse; --seeds takes many, so what follows it is an override
    assert options == [
        "--seeds",
        "0",
        "4",
        "--reuse",
        "composite=runs/a=b",
        "--reuse=paper=runs/p",
        "--runs",
        "runs/k=v",
    ]

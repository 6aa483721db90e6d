"""bench/learning_seeds.py: a seed packed to a small JSON file and compiled back gives the report the run gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.recipes.learn.evaluate import ci_dict
from tests.bench_scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seeds_bench():
    return load_bench_script("learning_seeds")


@pytest.fixture(scope="module")
def config():
    return load_config(AgeMemConfig, str(ROOT / "configs" / "learn_cpu.yaml"), [])


def test_em_differences_are_rebuilt_exactly_from_their_interval(seeds_bench):
    rng = random.Random(0)
    cases = [(100, 0, 0), (100, 100, 0), (100, 0, 100), (2, 1, 0), (3, 1, 1)]
    for _ in range(300):  # generated: any counts of +1 / -1 / 0 over 2..200 episodes
        n = rng.randint(2, 200)
        up = rng.randint(0, n)
        cases.append((n, up, rng.randint(0, n - up)))
    for n, up, down in cases:
        differences = [1.0] * up + [-1.0] * down + [0.0] * (n - up - down)
        rebuilt = seeds_bench.differences_from_interval(ci_dict(differences), n)
        assert sorted(rebuilt) == sorted(differences), (n, up, down)


def test_an_interval_that_no_whole_counts_give_is_refused(seeds_bench):
    # mean 0.10 over 100 episodes needs a - b = 10; a half-width of 0.1 then needs a + b = 99·s² + 1 with
    # s = 0.1·10 / t(0.975, 99) = 0.50395..., so a + b = 26.14...: not whole
    with pytest.raises(ValueError, match="not an interval of -1/0/"):
        seeds_bench.differences_from_interval({"mean": 0.10, "low": 0.0, "high": 0.2}, 100)


def _trajectory(
    step: int,
    stored_turns: set[int],
    *,
    failed_turns: frozenset[int] = frozenset(),
    updated_turns: frozenset[int] = frozenset(),
    unknown_id_turns: frozenset[int] = frozenset(),
) -> dict:
    steps = []
    for turn in range(4):  # four Stage-1 messages, one reply each
        calls, results = [], []
        if turn in stored_turns:
            calls.append({"name": "Add_memory", "arguments": {"content": "x"}, "error": None})
            results.append({"ok": True})
        if turn in failed_turns:  # a malformed store stores nothing
            calls.append({"name": "Add_memory", "arguments": None, "error": "bad JSON"})
            results.append({"ok": False})
        if turn in updated_turns:
            calls.append({"name": "Update_memory", "arguments": {"memory_id": "m1", "content": "y"}, "error": None})
            results.append({"ok": True})
        if turn in unknown_id_turns:  # well formed, but names no entry: nothing changed
            calls.append({"name": "Delete_memory", "arguments": {"memory_id": "m9"}, "error": None})
            results.append({"ok": False, "message": "no memory with id 'm9'"})
        steps.append({"stage": 1, "turn": turn, "tool_calls": calls, "tool_results": results})
    steps.append({"stage": 3, "turn": 0, "tool_calls": [{"name": "Add_memory", "arguments": {}, "error": None}]})
    return {"steps": steps, "meta": {"train_step": step}}


def test_stage1_stores_counts_successful_adds_per_message_first_and_last_steps(seeds_bench, tmp_path):
    rows = [
        _trajectory(1, {0, 1, 2, 3}),
        _trajectory(1, {0}, failed_turns=frozenset({3}), unknown_id_turns=frozenset({3})),
        _trajectory(2, {1}, updated_turns=frozenset({3})),  # neither window at window=1
        _trajectory(3, {3}),
        _trajectory(3, {0, 1, 2}, updated_turns=frozenset({3})),
    ]
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stores = seeds_bench.stage1_stores(path, window=1)
    # step 1: message 0 stored by both, 1 and 2 by one of two, 3 by one (the other's add failed); Stage 3 ignored;
    # the delete naming no entry changed nothing
    assert stores["first_steps"] == {
        "steps": [1],
        "trajectories": 2,
        "stored_by_message": [1.0, 0.5, 0.5, 0.5],
        "updated_by_message": [0.0, 0.0, 0.0, 0.0],
    }
    # step 3: one stores only the last message, the other the first three and then updates in reply to the last
    assert stores["last_steps"] == {
        "steps": [3],
        "trajectories": 2,
        "stored_by_message": [0.5, 0.5, 0.5, 0.5],
        "updated_by_message": [0.0, 0.0, 0.0, 0.5],
    }


def _call(name: str, arguments: dict, *, ok: bool = True, written: tuple[str, str] | None = None) -> tuple[dict, dict]:
    result = {"name": name, "ok": ok}
    if written:  # Add and Update answer with the entry as stored
        result["memories"] = [{"memory_id": written[0], "content": written[1]}]
    return {"name": name, "arguments": arguments, "error": None}, result


def _episode(step: int, *calls: tuple[dict, dict]) -> dict:
    return {
        "steps": [{"stage": 1, "turn": 0, "tool_calls": [c for c, _ in calls], "tool_results": [r for _, r in calls]}],
        "meta": {"train_step": step},
    }


def test_update_targets_tells_the_stale_entry_from_another_persons(seeds_bench, tmp_path):
    lima = "A friend told me about Verygy Rylus. Verygy Rylus lives in Lima."
    oboe = "Budara Sype plays the oboe."
    moved = "Verygy Rylus's news: Verygy Rylus has moved to Tallinn."
    add_lima = _call("Add_memory", {"content": lima}, written=("m1", lima))
    add_oboe = _call("Add_memory", {"content": oboe}, written=("m2", oboe))
    rows = [
        # step 1: the stale entry brought up to date, then another person's entry overwritten with the same change
        _episode(
            1,
            add_lima,
            add_oboe,
            _call("Update_memory", {"memory_id": "m1", "content": moved}, written=("m1", moved)),
            _call("Update_memory", {"memory_id": "m2", "content": moved}, written=("m2", moved)),
        ),
        # step 2: an id no result of this episode wrote; a failed update (not counted); a retrieval's memories
        # are not writes, so m3 stays unseen
        _episode(
            2,
            _call("Retrieve_memory", {"query": "Lima"}, written=("m3", lima)),
            _call("Update_memory", {"memory_id": "m3", "content": moved}, written=("m3", moved)),
            _call("Update_memory", {"memory_id": "m7", "content": moved}, ok=False),
        ),
        # step 3: the entry the update overwrote is the one an earlier update wrote (now about Verygy Rylus)
        _episode(
            3,
            add_oboe,
            _call("Update_memory", {"memory_id": "m2", "content": moved}, written=("m2", moved)),
            _call("Update_memory", {"memory_id": "m2", "content": moved + " Again."}, written=("m2", moved)),
        ),
    ]
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    targets = seeds_bench.update_targets(path, window=2)
    assert targets["first_steps"] == {
        "steps": [1, 2],
        "trajectories": 2,
        "updates": 3,
        "same_person": 1,
        "other_person": 1,
        "unseen_entry": 1,
    }
    # steps 2 and 3: the unseen m3; at step 3 Budara Sype's entry lost to Verygy Rylus's change, then rewritten
    assert targets["last_steps"]["updates"] == 3
    assert (targets["last_steps"]["other_person"], targets["last_steps"]["same_person"]) == (1, 1)


def _seed_dir(root: Path, seed: int, ems: tuple[list[float], list[float]]) -> Path:
    run = root / f"seed_{seed}"
    (run / "grpo").mkdir(parents=True)
    before, after = ems
    differences = [a - b for a, b in zip(after, before, strict=True)]
    result = {
        "seed": seed,
        "before": {"em": sum(before) / len(before), "updated_stale": 0.0, "retrieved_before_answer": 0.5},
        "after": {"em": sum(after) / len(after), "updated_stale": 0.0, "retrieved_before_answer": 0.9},
        "em_difference": ci_dict(differences),
        "em_differences": differences,
        "timings": {"grpo_s": 60.0, "total_s": 120.0 * (seed + 1)},
        "peak_resident_gib": {"warm_start": 2.0, "grpo": 3.0 + seed / 10},
    }
    (run / "result.json").write_text(json.dumps(result))
    metrics = [{"step": s, "reward/total": s / 10, "episode/memory_updates": 0.0, "other": 1} for s in (1, 2)]
    (run / "grpo" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return run


def test_packed_seeds_compile_to_the_report_of_their_pooled_and_per_seed_differences(seeds_bench, config, tmp_path):
    rng = random.Random(1)
    ems = {
        s: ([float(rng.random() < 0.2) for _ in range(100)], [float(rng.random() < 0.6) for _ in range(100)])
        for s in (0, 1, 2)
    }
    files = []
    for seed, pair in ems.items():
        packed = seeds_bench.pack_seed(config, _seed_dir(tmp_path / "runs", seed, pair), what="t", machine="m")
        assert packed["grpo_steps"] == [
            {"step": 1, "reward/total": 0.1, "episode/memory_updates": 0.0},
            {"step": 2, "reward/total": 0.2, "episode/memory_updates": 0.0},
        ]
        assert packed["stage1_stores"] is None  # no logged trajectories in this run
        if seed == 0:  # a file packed before em_differences were kept: compile rebuilds them from the interval
            del packed["em_differences"]
        files.append(tmp_path / f"seed{seed}.json")
        files[-1].write_text(json.dumps(packed))
    report = seeds_bench.compile_seeds(config, files, tmp_path / "report.json", tmp_path / "report.png")
    differences = {s: [a - b for b, a in zip(*pair, strict=True)] for s, pair in ems.items()}
    means = [sum(d) / 100 for d in differences.values()]
    assert report["em_improvement_across_seeds"] == pytest.approx(ci_dict(means))
    assert report["em_improvement_pooled"] == pytest.approx(ci_dict([x for d in differences.values() for x in d]))
    assert report["useful_use_rises_on_seeds"] == {"Retrieve": 3, "Update/Delete": 0, "Summary/Filter": 0}
    assert report["minutes"] == {"0": 2.0, "1": 4.0, "2": 6.0}
    assert report["peak_resident_gib"] == pytest.approx({"0": 3.0, "1": 3.1, "2": 3.2})
    assert json.loads((tmp_path / "report.json").read_text())["seeds"] == [0, 1, 2]
    assert (tmp_path / "report.png").stat().st_size > 0


def test_a_packed_seed_whose_interval_was_edited_is_refused(seeds_bench, config, tmp_path):
    pair = ([0.0] * 50 + [1.0] * 50, [1.0] * 100)
    packed = seeds_bench.pack_seed(config, _seed_dir(tmp_path, 0, pair), what="t", machine="m")
    packed["em_difference"]["mean"] += 0.01  # the kept differences no longer give the kept interval
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps(packed))
    with pytest.raises(ValueError, match="rebuilt differences give"):
        seeds_bench.compile_seeds(config, [path], tmp_path / "r.json", None)


def test_an_unfinished_seed_is_refused_with_what_to_do(seeds_bench, config, tmp_path):
    with pytest.raises(SystemExit, match="has not finished"):
        seeds_bench.pack_seed(config, tmp_path, what="", machine="")


def test_pack_splits_held_out_em_by_question_kind_on_mixed_tasks(seeds_bench, tmp_path):
    from agemem.recipes.learn.recipe import synthetic_tasks

    overrides = ["data.synthetic.revised_question_share=0.5", "learn.eval_tasks=12"]
    mixed = load_config(AgeMemConfig, str(ROOT / "configs" / "learn_cpu.yaml"), overrides)
    tasks = synthetic_tasks(mixed, 12, mixed.learn.eval_seed)
    revised = [t.id for t in tasks if t.metadata["type"] == "revised-fact"]
    assert 0 < len(revised) < 12
    run = _seed_dir(tmp_path, 0, ([0.0] * 12, [1.0] * 12))
    # before: only the revised questions right; after: only the unchanged ones
    for name, right in (("eval_warm_start.jsonl", True), ("eval_grpo.jsonl", False)):
        rows = [{"task_id": t.id, "em": float((t.id in revised) == right)} for t in tasks]
        (run / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    packed = seeds_bench.pack_seed(mixed, run, what="t", machine="m")
    n = len(revised)
    assert packed["em_by_question_kind"] == {
        "revised-fact": {"tasks": n, "before": 1.0, "after": 0.0},
        "unchanged-fact": {"tasks": 12 - n, "before": 0.0, "after": 1.0},
    }
    # every question of learn_cpu.yaml asks the change: one kind, nothing to split
    plain = load_config(AgeMemConfig, str(ROOT / "configs" / "learn_cpu.yaml"), ["learn.eval_tasks=12"])
    assert seeds_bench.pack_seed(plain, run, what="t", machine="m")["em_by_question_kind"] is None
    # a config whose held-out set is not the run's is refused, not silently mismatched
    other = load_config(AgeMemConfig, str(ROOT / "configs" / "learn_cpu.yaml"), [*overrides, "learn.eval_seed=5"])
    with pytest.raises(SystemExit, match="pack with the run's own --config"):
        seeds_bench.pack_seed(other, run, what="t", machine="m")

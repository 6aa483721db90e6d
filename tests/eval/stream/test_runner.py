"""The stream loop: the step log, resume, the variants (noisy initial memory, noisy writes, error-free replay),
Precision@k and the deleted-vs-retained analysis."""

from __future__ import annotations

import json

import pytest

from agemem.core.configlib import ConfigError
from agemem.eval.stream.analysis import cumulative_mean, deletion_analysis, summarize
from agemem.eval.stream.base import Attempt
from agemem.eval.stream.evaluate import evaluate_stream, strategy_label
from agemem.eval.stream.runner import STEPS_FILE, precision_at_k, read_steps, run_stream
from agemem.eval.stream.tasks import answer_of, build_task
from tests.conftest import WordSetEncoder
from tests.eval.stream.helpers import HandTask, ScriptedSolver, item, stream_config
from tests.eval.stream.simulated_agent import SimilarityCopyingSimulatedAgent

SYNTHETIC = ["stream.task=synthetic", "stream.synthetic_tasks=30", "stream.synthetic_families=5"]


def _run(config, out, solver=None):
    solver = solver or SimilarityCopyingSimulatedAgent(error_rate=0.2)
    return run_stream(config, build_task(config), solver, WordSetEncoder(), out, model="sim")


def _without_timing(path):
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in path.read_text().splitlines()]


def test_every_step_is_logged(tmp_path):
    config = stream_config(*SYNTHETIC, "stream.limit=6", "stream.deletion=periodic", "stream.window=2")
    outcome = _run(config, tmp_path)
    lines = _without_timing(tmp_path / STEPS_FILE)
    assert [line["step"] for line in lines] == [-1, 0, 1, 2, 3, 4, 5] and lines[0]["additions"] == []
    step = lines[3]
    assert {
        "retrieved",
        "input_similarity",
        "output_similarity",
        "execution",
        "success",
        "utility",
        "precision",
    } <= set(step)
    assert {"additions", "deletions", "bank_size", "transcript"} <= set(step)
    assert step["retrieved"] and {"id", "similarity", "output_similarity"} <= set(step["retrieved"][0])
    assert step["input_similarity"] == max(r["similarity"] for r in step["retrieved"])
    size = 0
    for step in outcome.steps:  # the bank size follows from the logged additions and deletions
        size += len(step["additions"]) - len(step["deletions"])
        assert step["bank_size"] == size
    assert sum(len(s["deletions"]) for s in outcome.steps) > 0


def test_resume_continues_where_the_log_stops_and_reproduces_the_uninterrupted_run(tmp_path):
    settings = [*SYNTHETIC, "stream.deletion=combined", "stream.window=4", "stream.history_min_retrievals=2"]
    settings += ["stream.retention=lru", "stream.capacity=8", "stream.noisy_writes=1"]
    whole = _run(stream_config(*settings), tmp_path / "whole")
    _run(stream_config(*settings, "stream.limit=12"), tmp_path / "resumed")
    with (tmp_path / "resumed" / STEPS_FILE).open("a") as handle:
        handle.write('{"step": 12, "task_id": "synthetic-str')  # killed mid-line
    resumed = _run(stream_config(*settings), tmp_path / "resumed")
    assert (resumed.played, resumed.resumed) == (18, 12)
    assert _without_timing(tmp_path / "whole" / STEPS_FILE) == _without_timing(tmp_path / "resumed" / STEPS_FILE)
    assert resumed.final_ids == whole.final_ids
    again = _run(stream_config(*settings), tmp_path / "resumed")
    assert again.played == 0 and again.final_ids == whole.final_ids
    with pytest.raises(ConfigError, match="holds another evaluation"):
        _run(stream_config(*settings, "stream.addition=strict"), tmp_path / "resumed")


def test_noisy_initial_memory(tmp_path):
    config = stream_config(*SYNTHETIC, "stream.initial_size=10", "stream.initial_noise=0.3", "stream.limit=5")
    outcome = _run(config, tmp_path)
    initial = outcome.initial
    assert len(initial) == 10 and sum(r["source"] == "initial_noise" for r in initial) == 3
    for record in initial:
        correct = record["source"] == "initial"
        assert record["success"] == (1.0 if correct else 0.0)
        assert (record["execution"] == record["ground_truth"]) == correct
    assert outcome.steps[0]["task_id"] == "synthetic-stream-0-10"  # the stream starts after the initial bank
    assert outcome.steps[0]["bank_size"] == 11


def test_noisy_writes_add_three_failed_same_task_copies_and_lower_precision(tmp_path):
    clean = _run(stream_config(*SYNTHETIC), tmp_path / "clean")
    noisy = _run(stream_config(*SYNTHETIC, "stream.noisy_writes=3"), tmp_path / "noisy")
    for step in noisy.steps:
        real, *copies = step["additions"]
        assert real["source"] == "stream" and [c["source"] for c in copies] == ["noise"] * 3
        assert all(c["task_id"] == real["task_id"] and c["query"] == real["query"] for c in copies)
        assert all(c["success"] == 0.0 and answer_of(c["execution"]) != step["gold"] for c in copies)
    assert noisy.steps[-1]["bank_size"] == 4 * clean.steps[-1]["bank_size"]
    assert summarize(noisy.steps, [])["precision"] < summarize(clean.steps, [])["precision"]


def test_precision_at_k_counts_successful_same_task_records():
    from agemem.eval.stream.bank import Record, Retrieved

    def found(success, key):
        return Retrieved(Record("r", "q", "e", "t", 0, "stream", success=success, task_key=key), 0.9)

    retrieved = [found(1.0, "a"), found(0.0, "a"), found(1.0, "b"), found(1.0, "a")]
    assert precision_at_k(retrieved, "a", 5) == 2 / 5
    assert precision_at_k(retrieved, None, 5) is None


def test_error_free_replay_shows_the_reference_records_with_ground_truth(tmp_path):
    reference_config = stream_config(*SYNTHETIC, "stream.limit=12", "stream.deletion=history")
    reference = _run(reference_config, tmp_path / "reference", SimilarityCopyingSimulatedAgent(error_rate=0.5))
    solver = ScriptedSolver()
    replay_config = stream_config(*SYNTHETIC, "stream.limit=12", f"stream.replay_of={tmp_path / 'reference'}")
    replay = _run(replay_config, tmp_path / "replay", solver)
    assert strategy_label(replay_config) == "replay(reference)"
    for ref, rep, (_, demos) in zip(reference.steps, replay.steps, solver.seen):
        assert [r["id"] for r in rep["retrieved"]] == [r["id"] for r in ref["retrieved"]]
        assert rep["bank_size"] == ref["bank_size"] and rep["additions"] == [] and rep["deletions"] == []
        # every demonstration shows its task's ground truth: the right answer, even where the stored one was wrong
        assert all(answer_of(d.execution) for d in demos)
    stored = {r["id"]: r for s in reference.steps for r in s["additions"]}
    shown = [d for _, demos in solver.seen for d in demos]
    assert any(stored[d.record_id]["execution"] != d.execution for d in shown)  # a wrong record, shown corrected
    assert all(d.execution == stored[d.record_id]["ground_truth"] for d in shown)
    wrong_stream = stream_config(*SYNTHETIC, "stream.limit=12", "stream.order=shuffled")
    wrong_stream.stream.replay_of = str(tmp_path / "reference")
    with pytest.raises(ConfigError, match="same task, data, order"):
        _run(wrong_stream, tmp_path / "mismatch", solver)


def test_deletion_analysis_splits_deleted_and_retained_records():
    initial = [{"id": "a", "success": 1.0}, {"id": "b", "success": 0.0}]
    steps = [
        {
            "additions": [{"id": "c", "success": 1.0}],
            "retrieved": [{"id": "b", "similarity": 0.9, "output_similarity": 0.8}],
            "success": 0.0,
            "deletions": [],
        },
        {
            "additions": [],
            "retrieved": [{"id": "a", "similarity": 0.5, "output_similarity": 0.4}],
            "success": 1.0,
            "deletions": [{"id": "b", "reason": "history: ..."}],
        },
    ]
    report = deletion_analysis(steps, initial)
    assert report["deleted"] == {
        "records": 1,
        "correct": 0.0,
        "retrievals": 1,
        "input_similarity": 0.9,
        "output_similarity": 0.8,
        "task_success": 0.0,
    }
    assert report["retained"]["records"] == 2 and report["retained"]["correct"] == 1.0
    assert report["retained"]["task_success"] == 1.0
    assert cumulative_mean([None, 1.0, 0.0, None]) == [None, 1.0, 0.5, 0.5]


def test_results_and_outputs_of_one_run(tmp_path):
    config = stream_config(*SYNTHETIC, "stream.plot=true", "stream.deletion=periodic", "stream.window=5")
    results = evaluate_stream(config, tmp_path, solver=SimilarityCopyingSimulatedAgent(), encoder=WordSetEncoder())
    assert results["tasks"] == 30 and 0 <= results["accuracy"] <= 1 and results["strategy"] == "add_all+periodic"
    low, high = results["accuracy_ci"]
    assert low <= results["accuracy"] <= high
    assert len(results["curves"]["success"]) == 30 and results["curves"]["bank_size"][-1] == results["final_bank_size"]
    assert results["deletions"].get("periodic", 0) == sum(len(s["deletions"]) for s in read_steps(tmp_path))
    assert set(results["records"]) == {"deleted", "retained"}
    assert json.loads((tmp_path / "results.json").read_text())["config"]["stream"]["window"] == 5
    assert "| add_all+periodic | simulated-copier | 30 |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "stream.png").stat().st_size > 10_000


def test_hand_made_stream_with_no_retrieval_is_the_no_memory_baseline(tmp_path):
    config = stream_config("stream.retrieval=none", "stream.addition=fixed")
    task = HandTask([item("s0", "red apple"), item("s1", "red apple")])
    solver = ScriptedSolver()
    outcome = run_stream(config, task, solver, WordSetEncoder(), tmp_path, model="scripted")
    assert [demos for _, demos in solver.seen] == [[], []] and outcome.steps[1]["precision"] is None
    assert strategy_label(config) == "no_memory"


class AddDeleteAdd:
    """Policy addition played by a script: on every task, Add_memory a draft, Delete_memory it, Add_memory the final
    record; on task q1 it then deletes every record the bank held when the task started. It keeps
    the live bank it was handed and the ids its adds returned."""

    name = "add-delete-add"

    def __init__(self):
        self.bank = None
        self.returned: list[str] = []

    def solve(self, it, demos, tools, seed):
        self.bank = tools.bank
        before = tools.memory.ids()
        draft = tools.memory.add(f"draft of {it.query}", {})
        assert tools.memory.delete(draft.entries[0].id).ok
        final = tools.memory.add(f"final of {it.query}", {})
        if it.id == "q1":
            for old in before:
                assert tools.memory.delete(old).ok
        self.returned += [draft.entries[0].id, final.entries[0].id]
        return Attempt("Answer: yes-answer", "yes-answer", replies=1)


ADD_DELETE_ADD_TASK = HandTask([item(f"q{i}", f"question number {i}") for i in range(3)])


def _records(bank):
    """A bank's records in order, with their usage history."""
    return [(r.to_json(), r.retrieved_at, r.similarities, r.utilities) for r in bank]


def test_an_add_delete_add_step_gets_fresh_ids_and_resumes_to_the_live_bank(tmp_path):
    def run(out, solver, *overrides):
        config = stream_config("stream.addition=policy", *overrides)
        return run_stream(config, ADD_DELETE_ADD_TASK, solver, WordSetEncoder(), out, model="scripted")

    # the live bank after step 0, by hand: draft q0 went in and out, so it holds only "final of question number 0"
    first = AddDeleteAdd()
    after_first = run(tmp_path / "one", first, "stream.limit=1")
    draft0, final0 = first.returned
    assert draft0 != final0  # (a) the second add of the step is a new record, not the deleted one's id again
    step0 = after_first.steps[0]
    assert [r["id"] for r in step0["additions"]] == [draft0, final0]
    assert step0["deletions"] == [{"id": draft0, "reason": "policy: Delete_memory"}] and step0["bank_size"] == 1
    assert after_first.final_ids == [final0]  # (b)
    assert [r.execution for r in first.bank] == ["final of question number 0"]

    # the whole stream, by hand: step 1 keeps only "final of question number 1" (it deletes final q0), step 2 adds
    # "final of question number 2" beside it
    whole_solver = AddDeleteAdd()
    whole = run(tmp_path / "whole", whole_solver)
    assert len(set(whole_solver.returned)) == 6  # (a) no id is ever handed out twice in a run
    additions = [r["id"] for s in whole.steps for r in s["additions"]]
    assert additions == whole_solver.returned and len(set(additions)) == len(additions)
    assert [r.execution for r in whole_solver.bank] == ["final of question number 1", "final of question number 2"]
    assert whole.final_ids == [whole_solver.returned[3], whole_solver.returned[5]]

    # (c) resumed from the log cut after step 0 (and after step 1): the same log, the same bank and records
    lines = (tmp_path / "whole" / STEPS_FILE).read_text().splitlines(keepends=True)
    for cut in (1, 2):
        out = tmp_path / f"cut{cut}"
        out.mkdir()
        (out / STEPS_FILE).write_text("".join(lines[: cut + 1]))  # the initial-bank line, then steps 0 .. cut-1
        resumed_solver = AddDeleteAdd()
        resumed = run(out, resumed_solver)
        assert (resumed.resumed, resumed.played) == (cut, 3 - cut)
        assert resumed.final_ids == whole.final_ids
        assert _records(resumed_solver.bank) == _records(whole_solver.bank)
        assert _without_timing(out / STEPS_FILE) == _without_timing(tmp_path / "whole" / STEPS_FILE)
    # the limit=1 run continued to the whole stream is the same run too
    continued = AddDeleteAdd()
    assert run(tmp_path / "one", continued).final_ids == whole.final_ids
    assert _records(continued.bank) == _records(whole_solver.bank)

    # a log written while a repeated add reused the deleted record's id (additions [draft0, draft0], deletions
    # [draft0]) still resumes to the bank the live run kept: the deletion goes between the two adds
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / STEPS_FILE).write_text("".join(lines[:2]).replace(final0, draft0))
    legacy_solver = AddDeleteAdd()
    resumed = run(legacy, legacy_solver)
    assert resumed.final_ids == whole.final_ids
    assert _records(legacy_solver.bank) == _records(whole_solver.bank)
    assert read_steps(legacy)[1]["deletions"][-1]["id"] == draft0  # step 1 deleted final q0 by its old name

    # the same id added twice with no deletion between is a damaged log, not an old one
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    broken = json.loads(lines[1].replace(final0, draft0))
    broken["deletions"] = []
    (damaged / STEPS_FILE).write_text(lines[0] + json.dumps(broken) + "\n")
    with pytest.raises(ValueError, match=r"adds .* twice and never deletes it; .*start afresh"):
        run(damaged, AddDeleteAdd())

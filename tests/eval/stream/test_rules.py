"""Addition and deletion rules on hand-made streams: which record is written or deleted when, and why.

The encoder is the word-set double (cosine = shared words / sqrt(|A| |B|)), so retrieval can be read off the
queries: "red apple pie" is closest to "red apple tart" (2/3), and nothing of it is in "blue sky whale"."""

from __future__ import annotations

import pytest

from agemem.eval.stream.addition import (
    AddAll,
    CoarseAddition,
    FixedAddition,
    ModelCoarseJudge,
    Outcome,
    PolicyAddition,
    RuleCoarseJudge,
    StrictAddition,
    stated_answer,
)
from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.deletion import (
    CombinedDeletion,
    HistoryDeletion,
    PeriodicDeletion,
    history_reason,
    periodic_reason,
)
from agemem.eval.stream.runner import run_stream
from tests.conftest import WordSetEncoder
from tests.eval.stream.helpers import HandTask, ScriptedSolver, item, stream_config

A = item("A", "red apple tart")
B = item("B", "blue sky whale")


def _record(record_id: str, created_at: int, retrieved_at=(), utilities=()) -> Record:
    return Record(
        record_id,
        f"query {record_id}",
        "Answer: x",
        record_id,
        created_at,
        "stream",
        retrieved_at=list(retrieved_at),
        similarities=[1.0] * len(retrieved_at),
        utilities=list(utilities),
    )


def _run(tmp_path, items, solver, *overrides):
    config = stream_config("stream.top_k=1", "stream.precision_k=1", *overrides)
    task = HandTask(items)
    return run_stream(config, task, solver, WordSetEncoder(), tmp_path, model="scripted", coarse=RuleCoarseJudge())


def _deleted(outcome):
    return [[d["id"] for d in step["deletions"]] for step in outcome.steps]


# --------------------------------------------------------------------------------------------- periodic


def test_periodic_reason_counts_retrievals_in_the_window_and_protects_young_records():
    old = _record("old", -1, retrieved_at=[0])
    assert periodic_reason(old, 2, window=3, alpha=0) is None  # retrieved once in steps 0..2
    assert periodic_reason(old, 3, window=3, alpha=0) == "periodic: retrieved 0 <= alpha=0 times in steps 1..3 (W=3)"
    young = _record("young", 5)
    assert periodic_reason(young, 7, window=3, alpha=0) is None  # age 2 < W: protected, though never retrieved
    assert periodic_reason(young, 8, window=3, alpha=0) is not None
    busy = _record("busy", -1, retrieved_at=[4, 5])
    assert periodic_reason(busy, 5, window=3, alpha=1) is None and periodic_reason(busy, 5, window=3, alpha=2)


def test_periodic_deletion_runs_every_n_tasks():
    bank = MemoryBank(WordSetEncoder())
    bank.add(_record("never", -1))
    rule = PeriodicDeletion(window=2, alpha=0, every=2)
    assert rule.select(bank, 2) == []  # (2 + 1) % 2 != 0: not a check step
    assert [d.record_id for d in rule.select(bank, 3)] == ["never"]


def test_periodic_deletion_on_a_stream_deletes_the_never_retrieved_record_once_it_is_w_tasks_old(tmp_path):
    stream = [item(f"s{i}", "red apple pie") for i in range(5)]
    outcome = _run(
        tmp_path,
        [A, B, *stream],
        ScriptedSolver(),
        "stream.initial_size=2",
        "stream.addition=fixed",
        "stream.deletion=periodic",
        "stream.window=3",
        "stream.alpha=0",
    )
    assert [s["retrieved"][0]["id"] for s in outcome.steps] == ["mem_init0000"] * 5  # A, every time
    assert _deleted(outcome) == [[], [], ["mem_init0001"], [], []]  # B, at the first step it is 3 tasks old
    reason = outcome.steps[2]["deletions"][0]["reason"]
    assert reason == "periodic: retrieved 0 <= alpha=0 times in steps 0..2 (W=3)"
    assert [s["bank_size"] for s in outcome.steps] == [2, 2, 1, 1, 1]


def test_periodic_deletion_with_add_all_deletes_each_record_w_tasks_after_it_was_written(tmp_path):
    # every task retrieves the newest "red apple pie" record (equal similarity: the newer wins), once; with
    # alpha=1 a record retrieved once in the window goes as soon as it is 3 tasks old
    stream = [item(f"s{i}", "red apple pie") for i in range(5)]
    outcome = _run(
        tmp_path,
        [A, B, *stream],
        ScriptedSolver(),
        "stream.initial_size=2",
        "stream.addition=add_all",
        "stream.deletion=periodic",
        "stream.window=3",
        "stream.alpha=1",
    )
    written = [s["additions"][0]["id"] for s in outcome.steps]
    retrieved = [s["retrieved"][0]["id"] for s in outcome.steps]
    assert retrieved == ["mem_init0000", *written[:4]]
    assert _deleted(outcome) == [[], [], ["mem_init0000", "mem_init0001"], [written[0]], [written[1]]]
    assert "retrieved 1 <= alpha=1 times in steps 1..3" in outcome.steps[3]["deletions"][0]["reason"]


# --------------------------------------------------------------------------------------------- history


def test_history_reason_needs_n_retrievals_and_a_low_mean_utility():
    assert history_reason(_record("r", -1, [0], [0.0]), min_retrievals=2, beta=0.5) is None  # 1 < n
    low = _record("r", -1, [0, 1], [1.0, 0.0])
    assert history_reason(low, 2, 0.5) == "history: mean utility 0.500 <= beta=0.5 over 2 >= n=2 retrievals"
    assert history_reason(_record("r", -1, [0, 1, 2], [1.0, 1.0, 0.0]), 2, 0.5) is None  # mean 0.667


def test_history_deletion_on_a_stream_deletes_the_record_whose_users_failed(tmp_path):
    stream = [
        item("s0", "red apple pie"),
        item("s1", "blue sky night"),
        item("s2", "red apple cake"),
        item("s3", "blue sky day"),
    ]
    outcome = _run(
        tmp_path,
        [A, B, *stream],
        ScriptedSolver(succeed={"s1", "s3"}),
        "stream.initial_size=2",
        "stream.addition=fixed",
        "stream.deletion=history",
        "stream.history_min_retrievals=2",
        "stream.history_beta=0.5",
    )
    assert [s["retrieved"][0]["id"] for s in outcome.steps] == ["mem_init0000", "mem_init0001"] * 2
    assert [s["utility"] for s in outcome.steps] == [0.0, 1.0, 0.0, 1.0]
    assert _deleted(outcome) == [[], [], ["mem_init0000"], []]  # A: used twice, both failed
    assert outcome.steps[2]["deletions"][0]["reason"].startswith("history: mean utility 0.000 <= beta=0.5 over 2")
    assert outcome.final_ids == ["mem_init0001"]


def test_combined_deletion_deletes_what_either_rule_deletes_with_both_reasons():
    bank = MemoryBank(WordSetEncoder())
    bank.add(_record("stale", -1))  # never retrieved: periodic
    bank.add(_record("harmful", -1, [8, 9], [0.0, 0.0]))  # retrieved recently, but its users failed: history
    bank.add(_record("both", -1, [1, 2], [0.0, 0.0]))  # neither recently retrieved nor useful
    bank.add(_record("good", -1, [8, 9], [1.0, 1.0]))
    rule = CombinedDeletion([PeriodicDeletion(window=3, alpha=0), HistoryDeletion(min_retrievals=2, beta=0.5)])
    chosen = {d.record_id: d.reason for d in rule.select(bank, 9)}
    assert list(chosen) == ["stale", "harmful", "both"]
    assert chosen["stale"].startswith("periodic") and chosen["harmful"].startswith("history")
    assert chosen["both"].startswith("periodic") and "; history" in chosen["both"]


# --------------------------------------------------------------------------------------------- capacity


def test_capacity_mode_evicts_the_record_with_the_lowest_mean_utility(tmp_path):
    stream = [item("s0", "red apple pie"), item("s1", "blue sky night")]
    outcome = _run(
        tmp_path,
        [A, B, *stream],
        ScriptedSolver(succeed={"s1"}),
        "stream.initial_size=2",
        "stream.addition=add_all",
        "stream.retention=utility",
        "stream.capacity=2",
    )
    # step 0 retrieves A and fails: A's mean utility 0 < the 0.5 prior of B and of the new record
    assert _deleted(outcome)[0] == ["mem_init0000"]
    assert outcome.steps[0]["deletions"][0]["reason"] == "capacity: utility score 0 lowest of 3 > K=2"
    # step 1 retrieves B and succeeds (B: 1.0); the new record and s0's record hold the prior: the older goes
    assert _deleted(outcome)[1] == [outcome.steps[0]["additions"][0]["id"]]
    assert all(s["bank_size"] <= 2 for s in outcome.steps)


# --------------------------------------------------------------------------------------------- addition


def test_addition_rules_admit_by_their_evaluator():
    right, wrong = Outcome(1.0, 0.2), Outcome(0.0, 0.9)
    assert [FixedAddition().admit(o) for o in (right, wrong)] == [False, False]
    assert [AddAll().admit(o) for o in (right, wrong)] == [True, True]
    assert [StrictAddition().admit(o) for o in (right, wrong)] == [True, False]
    assert [CoarseAddition(0.5).admit(o) for o in (right, wrong)] == [False, True]  # the judge has no gold answer
    assert [PolicyAddition().admit(o) for o in (right, wrong)] == [False, False]
    with pytest.raises(ValueError, match="coarse judge"):
        CoarseAddition(0.5).admit(Outcome(1.0))


def test_rule_coarse_judge_checks_that_an_answer_is_stated_not_that_it_is_right():
    judge = RuleCoarseJudge()
    assert judge.score("q", "Reasoning: x\nAnswer: Paris") == 1.0
    assert judge.score("q", "Answer: I don't know") == 0.0
    assert judge.score("q", "Answer: unknown.") == 0.0
    assert judge.score("q", "<think>hmm</think> no tags") == 0.0
    assert judge.score("q", "> go to desk 1\nOutcome: done") == 1.0
    assert stated_answer("Answer: a\nAnswer: b ") == "b"


def test_strict_and_coarse_addition_on_a_stream(tmp_path):
    class Refuser(ScriptedSolver):
        def solve(self, item, demos, tools, seed):
            attempt = super().solve(item, demos, tools, seed)
            if item.id == "s1":  # wrong but confident; s2: refuses
                return attempt
            if item.id == "s2":
                attempt.execution, attempt.answer = "Answer: I don't know", "I don't know"
            return attempt

    stream = [item("s0", "red apple pie"), item("s1", "blue sky night"), item("s2", "green tea cup")]
    solver = Refuser(succeed={"s0"})
    strict = _run(tmp_path / "strict", stream, solver, "stream.addition=strict")
    coarse = _run(tmp_path / "coarse", stream, solver, "stream.addition=coarse")
    assert [len(s["additions"]) for s in strict.steps] == [1, 0, 0]
    assert [len(s["additions"]) for s in coarse.steps] == [1, 1, 0]  # s1 states an answer: the judge lets it in
    assert [s["coarse"] for s in coarse.steps] == [1.0, 1.0, 0.0]
    assert coarse.steps[1]["additions"][0]["success"] == 0.0  # its ground-truth label is kept for analysis


def test_model_coarse_judge_asks_without_the_gold_answer_and_falls_back_to_the_rules(tmp_path):
    from agemem.core.httpclient import HTTPRequestError

    prompts = []

    def complete(messages):
        prompts.append(messages)
        if "fail" in messages[1]["content"]:
            raise HTTPRequestError("http://x", 3, "down", status=503, transient=True)
        return "Score: 0.8" if "Paris" in messages[1]["content"] else "no idea"

    judge = ModelCoarseJudge(complete, "llm:test", cache_dir=str(tmp_path))
    assert judge.score("Capital of France?", "Answer: Paris") == 0.8
    assert judge.score("Capital of France?", "Answer: Lyon") == 1.0  # unparsable reply: rule fallback
    assert judge.score("fail", "Answer: x") == 1.0  # endpoint down: rule fallback
    assert judge.score("Capital of France?", "Answer: Paris") == 0.8  # cached
    assert judge.counters == {"requests": 3, "cache_hits": 1, "errors": 1, "unparsable": 1, "fallbacks": 2}
    assert "Task: Capital of France?" in prompts[0][1]["content"] and "reference" not in prompts[0][1]["content"]

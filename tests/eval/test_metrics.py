"""The evaluation metrics and report helpers, checked against hand-computed values."""

from __future__ import annotations

import json

import pytest

from agemem.core.env import EpisodeStats
from agemem.eval.metrics import mean, mean_tool_calls, percent, pooled_mean, stage_prompt_tokens, tool_calls
from agemem.eval.qa import aggregate, memory_quality, memory_quality_items
from agemem.eval.report import Column, ExampleLog, markdown_table, slug, unique_labels
from agemem.rewards.judges import RuleJudge
from agemem.rollouts.records import Step, Trajectory


def _step(stage: int, tokens: int, *calls: str, kind: str = "action") -> Step:
    return Step(
        stage=stage,
        kind=kind,
        turn=0,
        prompt_ids=[0] * tokens,
        completion_ids=[1],
        logprobs=None,
        finish_reason="stop",
        prompt_text="",
        completion_text="",
        tool_calls=[{"name": name, "arguments": {}, "error": None} for name in calls],
        context_tokens=tokens,
    )


def _trajectory(steps: list[Step]) -> Trajectory:
    return Trajectory("t", 0, "q?", "gold", steps, "gold", "answer", EpisodeStats())


def test_tool_calls_count_offered_tools_only():
    trajectory = _trajectory(
        [
            _step(1, 100, "Add_memory", "Add_memory"),
            _step(1, 120, "Add_memory", "Summary_context"),
            _step(3, 300, "Retrieve_memory", "Frobnicate"),
            _step(3, 500),
        ]
    )
    counts = tool_calls(trajectory)
    assert counts == {
        "Add_memory": 3,
        "Update_memory": 0,
        "Delete_memory": 0,
        "Retrieve_memory": 1,
        "Summary_context": 1,
        "Filter_context": 0,
        "total": 5,  # the unknown tool is not one of the six
    }
    # the rag variant offers Add/Update/Delete: its Retrieve and Summary attempts were unknown-tool errors
    rag = tool_calls(trajectory, ("Add_memory", "Update_memory", "Delete_memory"))
    assert (rag["Add_memory"], rag["Retrieve_memory"], rag["Summary_context"], rag["total"]) == (3, 0, 0, 3)


def test_stage_prompt_tokens_and_tn_is_pooled_over_steps():
    trajectory = _trajectory([_step(1, 100), _step(3, 300), _step(3, 500), _step(3, 999, kind="summary")])
    assert stage_prompt_tokens(trajectory, 3) == (800, 2)  # the policy-written summary is not an agent step
    assert stage_prompt_tokens(trajectory, 2) == (0, 0)
    # two episodes: 800 tokens over 2 steps and 100 over 1 -> 900 / 3, not the mean of 400 and 100
    assert pooled_mean([800, 100], [2, 1]) == 300.0
    assert pooled_mean([0], [0]) is None


def test_means_percent_and_tool_call_means():
    assert mean([1.0, None, 0.0]) == 0.5 and mean([None]) is None
    assert percent([1.0, 0.0, 0.5, 0.5]) == 50.0
    episodes = [{"Add_memory": 3, "total": 4}, {"Add_memory": 1, "Retrieve_memory": 2, "total": 3}]
    means = mean_tool_calls(episodes)
    assert means["Add_memory"] == 2.0 and means["Retrieve_memory"] == 1.0 and means["total"] == 3.5
    assert means["Filter_context"] == 0.0 and len(means) == 7


def test_memory_quality_with_the_rule_judge_is_content_word_coverage():
    # question 0 of the bundled sample: the memory holds the first supporting sentence only
    f0 = 'VIVA Media GmbH (until 2004 "VIVA Media AG") is a music television network originating from Germany.'
    f1 = (
        "A Gesellschaft mit beschränkter Haftung (] , abbreviated GmbH ] and also GesmbH in Austria) is a type of "
        "legal entity very common in Germany, Austria, Switzerland (where it is equivalent to a S.à r.l.) and "
        "Liechtenstein."
    )
    items = memory_quality_items([f0], [f0, f1])
    assert [item.supporting_facts for item in items] == [(f0,), (f1,)]
    scores = RuleJudge().memory_scores(items)
    # C(f1) has 18 content words; the memory shares 'gmbh' and 'germany' with it
    assert scores == pytest.approx([1.0, 2 / 18])
    assert memory_quality(scores) == pytest.approx(5 / 9)
    # split over two entries, the facts are still covered
    assert memory_quality(RuleJudge().memory_scores(memory_quality_items(["x", f1, f0], [f0, f1]))) == 1.0
    assert memory_quality([]) is None


def _example(judge, em, f1, mq, tokens, steps, answer="a", ended_by="answer"):
    return {
        "judge": judge,
        "em": em,
        "f1": f1,
        "mq": mq,
        "stage3_prompt_tokens": tokens,
        "stage3_steps": steps,
        "tool_calls": {"Add_memory": 2, "total": 2},
        "answer": answer,
        "ended_by": ended_by,
    }


def test_aggregate_reports_the_paper_metrics():
    examples = [
        _example(1.0, 1.0, 1.0, 0.5, 600, 2),
        _example(0.5, 0.0, 0.5, None, 300, 1),
        _example(0.0, 0.0, 0.0, 0.25, 300, 3, answer=None, ended_by="round_limit"),
    ]
    results = aggregate(examples)
    assert results["questions"] == 3
    assert results["J"] == pytest.approx(50.0)
    assert results["EM"] == pytest.approx(100 / 3)
    assert results["F1"] == pytest.approx(50.0)
    assert results["MQ"] == pytest.approx(0.375)  # the question without MQ is left out
    assert results["TN"] == pytest.approx(1200 / 6)
    assert results["TC"]["Add_memory"] == 2.0 and results["TC"]["total"] == 2.0
    assert results["answered"] == pytest.approx(200 / 3)
    assert results["ended_by"] == {"answer": 2, "round_limit": 1}


def test_example_log_cuts_a_torn_line_and_appends(tmp_path):
    log = ExampleLog(tmp_path / "examples.jsonl")
    assert log.finished() == {}
    log.append([{"id": "a", "x": 1}, {"id": "b", "x": 2}])
    with (tmp_path / "examples.jsonl").open("a") as handle:
        handle.write('{"id": "c", "x"')  # killed mid-line
    assert list(log.finished()) == ["a", "b"]
    log.append([{"id": "c", "x": 3}])
    lines = (tmp_path / "examples.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c"]
    (tmp_path / "examples.jsonl").write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(ValueError, match=r"examples\.jsonl:2"):
        log.finished()


def test_markdown_table_and_labels():
    columns = [Column("model", "model", "{}"), Column("J", "J"), Column("TC.total", "TC", "{:.2f}")]
    table = markdown_table([{"model": "a|b", "J": 12.345, "TC": {"total": 3}}, {"model": "c", "J": None}], columns)
    assert table.splitlines() == [
        "| model | J | TC |",
        "|:---|---:|---:|",
        "| a\\|b | 12.3 | 3.00 |",
        "| c | – | – |",
    ]
    assert slug("runs/grpo/step_000010") == "runs_grpo_step_000010"
    assert unique_labels(["a", "b", "a", "a"]) == ["a", "b", "a-2", "a-3"]

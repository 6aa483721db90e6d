"""ReMem (Evo-Memory) in a stream: a scripted chat model thinks, refines the bank (deletes a wrong record, rewrites
another into a lesson), answers; its malformed replies get format feedback; a task without an Act within the steps
fails. Then the counts in the step log and results, resume, ALFWorld, the settings, the label and the sweeps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agemem.core.configlib import ConfigError
from agemem.core.protocol import parse_response
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.stream.bank import MemoryBank
from agemem.eval.stream.base import ModelSolver
from agemem.eval.stream.evaluate import evaluate_stream, strategy_label
from agemem.eval.stream.remem import REFINE_TOOLS, ReMemBudget, ReMemSession, operation_of
from agemem.eval.stream.runner import StreamState, read_steps, run_stream, strategy_settings
from agemem.eval.stream.sweep import load_sweep, strategy_config
from agemem.eval.stream.tasks import build_task
from tests.conftest import WordSetEncoder
from tests.eval.stream.helpers import ScriptedChat, stream_config

REMEM = [
    "stream.task=synthetic",
    "stream.synthetic_tasks=4",
    "stream.synthetic_families=2",
    "stream.top_k=2",
    "stream.agent=remem",
    "stream.remem_max_think=2",
    "stream.remem_max_refine=3",
    "stream.remem_refine_top_k=1",
    "stream.remem_max_steps=5",
]
LESSON = "Lesson: read the facts; Fyvu Doul's favourite colour is olive."
ROOT = Path(__file__).resolve().parents[3]


def shown_records(messages) -> dict[str, str]:
    """The records the task message shows: memory id -> execution."""
    blocks = messages[1]["content"].split("Now your task.")[0].split("\n\n")[1:]
    return {
        re.search(r"memory_id: (mem_\w+)", block).group(1): block.split("Execution: ", 1)[1].split("\nFeedback: ")[0]
        for block in blocks
        if "memory_id: " in block
    }


def refine(messages) -> str:
    """Deletes the record that answered harp (wrong: the facts say cello) and rewrites the other into a lesson."""
    shown = shown_records(messages)
    wrong = next(i for i, execution in shown.items() if execution.endswith("Answer: harp"))
    other = next(i for i in shown if i != wrong)
    calls = [
        {"name": "Delete_memory", "arguments": {"memory_id": wrong, "confirmation": True}},
        {"name": "Update_memory", "arguments": {"memory_id": other, "content": LESSON}},
    ]
    return f"<think>one record is wrong</think><tool_call>{json.dumps(calls)}</tool_call>"


def many_retrievals(messages) -> str:
    calls = [{"name": "Retrieve_memory", "arguments": {"query": "favourite colour", "top_k": 5}}] * 4
    return f"<tool_call>{json.dumps(calls)}</tool_call>"


SCRIPTS = [
    ["<think>a guess</think><answer>harp</answer>"],  # task 0 (instrument): a wrong record
    ["<think>the facts say olive</think><answer>olive</answer>"],  # task 1 (colour)
    [  # task 2 (instrument again): think, refine, a malformed reply, act
        "<think>The shown record says harp, but the facts say cello.</think>",
        refine,
        "I will answer now",
        "<think>so cello</think><answer>cello</answer>",
    ],
    [  # task 3 (colour again): two thinks, a third refused, four retrievals (one over budget), no act
        "<think>first</think>",
        "<think>second</think>",
        "<think>third</think>",
        many_retrievals,
        "still no answer",
    ],
]


def _play(config, chat):
    """The stream's tasks played one by one on a bank the test holds; returns (state, entries)."""
    task = build_task(config)
    state = StreamState(config, task, MemoryBank(WordSetEncoder()))
    solver = ModelSolver(task, chat)
    entries = [state.step(t, item, solver, seed=None) for t, item in enumerate(task.items())]
    return state, entries


def test_remem_thinks_refines_the_bank_and_acts():
    chat = ScriptedChat(SCRIPTS)
    state, steps = _play(stream_config(*REMEM), chat)
    wrong, lesson, answered, failed = (steps[t]["additions"][0]["id"] for t in range(4))
    bank = state.bank
    # the wrong record is gone, the rewritten one holds the lesson, both new experiences were written (add_all)
    assert wrong not in bank and bank.ids() == [lesson, answered, failed]
    assert bank.get(lesson).execution == LESSON and bank.get(lesson).query == steps[1]["query"]
    assert bank.get(answered).execution == (
        "Reasoning: The shown record says harp, but the facts say cello. so cello\nAnswer: cello"
    )
    assert [s["success"] for s in steps] == [0.0, 1.0, 1.0, 0.0] and [s["bank_size"] for s in steps] == [1, 2, 2, 3]
    third = steps[2]
    assert [r["id"] for r in third["retrieved"]] == [wrong, lesson]
    assert third["deletions"] == [{"id": wrong, "reason": "remem: Delete_memory"}]
    assert third["updates"] == [{"id": lesson, "execution": LESSON, "metadata": {}}]
    assert [e["operation"] for e in third["transcript"]] == ["think", "refine", "malformed", "act"]
    assert third["remem"] == {
        "think": 1,
        "think_refused": 0,
        "refine": {"retrieve": 0, "add": 0, "update": 1, "merge": 0, "delete": 1},
        "refine_ops": 2,
        "refine_failed": 0,
        "refine_refused": 0,
        "refine_steps": 1,
        "acts": 1,
        "malformed": 1,
        "deleted": [wrong],
        "updated": [lesson],
    }
    assert third["replies"] == 4 and third["answer"] == "cello"
    # what the agent was told: the operations and tools, the status after each step, the format feedback
    system = chat.seen[0][0]["content"]
    assert "Think: <think>your reasoning</think> and nothing else" in system and "At most 2 per step" in system
    assert all(f'"name": "{name}"' in system for name in REFINE_TOOLS)  # Add and Merge too
    # records are Evo-Memory's (input, output, feedback): the wrong record says it failed
    assert "Answer: harp\nFeedback: failure" in chat.seen[3][1]["content"]
    thought, refined, malformed = (json.loads(chat.seen[3 + n][-1]["content"]) for n in range(3))
    assert thought["tool"] == "remem" and thought["message"].startswith(
        "Thought noted. Step 1 of 5 for this task (4 left). Think operations left: 1; Refine operations left: 3."
    )
    assert refined["message"].startswith("Refine done. Step 2 of 5")
    assert "Refine operations left: 1." in refined["message"]
    assert malformed["tool"] == "format_check" and malformed["ok"] is False
    assert "text outside tags" in malformed["message"] and "Step 3 of 5 for this task (2 left)" in malformed["message"]
    deleted = json.loads(chat.seen[4][-3]["content"])
    assert deleted == {"tool": "Delete_memory", "ok": True, "message": f"deleted {wrong}"}


def test_a_task_without_an_act_fails_at_the_step_limit_and_budgets_refuse_the_extra_operations():
    chat = ScriptedChat(SCRIPTS)
    _, steps = _play(stream_config(*REMEM), chat)
    last = steps[3]
    assert last["success"] == 0.0 and last["answer"] is None and last["error"] is None
    assert last["replies"] == 5 and last["execution"] == "still no answer"
    assert [e["operation"] for e in last["transcript"]] == ["think", "think", "malformed", "refine", "malformed"]
    counts = last["remem"]
    assert (counts["think"], counts["think_refused"], counts["malformed"], counts["acts"]) == (2, 1, 1, 0)
    assert counts["refine"] == {"retrieve": 3, "add": 0, "update": 0, "merge": 0, "delete": 0}
    assert counts["refine_refused"] == 1
    retrievals = last["transcript"][3]["tool_calls"]
    assert [len(c.get("memories", [])) for c in retrievals] == [1, 1, 1, 0]  # top_k 5 capped at 1
    assert retrievals[3]["ok"] is False and retrievals[3]["message"].startswith("no Refine operation left in this step")
    refused_think = json.loads(chat.seen[-2][-1]["content"])  # told with the fourth request
    assert refused_think["tool"] == "format_check"
    assert "no Think operation left in this step (2 per step)" in refused_think["message"]


def test_results_count_remem_operations_and_a_resumed_run_rebuilds_the_refined_bank(tmp_path):
    config = stream_config(*REMEM)
    solver = ModelSolver(build_task(config), ScriptedChat(SCRIPTS))
    results = evaluate_stream(config, tmp_path, solver=solver, encoder=WordSetEncoder())
    assert results["strategy"] == "remem" and results["agent"] == "remem" and results["accuracy"] == 0.5
    assert results["mean_replies"] == (1 + 1 + 4 + 5) / 4 and results["final_bank_size"] == 3
    assert results["deletions"] == {"remem": 1} and results["additions"] == {"stream": 4}
    assert results["remem"] == {
        "tasks": 4,
        "think": 3,
        "think_per_task": 0.75,
        "think_refused": 1,
        "refine": {"retrieve": 3, "add": 0, "update": 1, "merge": 0, "delete": 1},
        "refine_ops": 5,
        "refine_per_task": 1.25,
        "refine_failed": 0,
        "refine_refused": 1,
        "refine_steps": 2,
        "malformed": 2,
        "records_deleted": 1,
        "records_updated": 1,
    }
    assert json.loads((tmp_path / "results.json").read_text())["remem"]["records_updated"] == 1
    row = next(line for line in (tmp_path / "results.md").read_text().splitlines() if line.startswith("| remem |"))
    assert "| 2.75 | 0.75 | 1.25 | 1 |" in row
    # the log alone rebuilds the refined bank: the rewrite, the deletion, the writes
    rebuilt = StreamState(config, build_task(config), MemoryBank(WordSetEncoder()))
    logged = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    for entry in logged:
        rebuilt.apply_logged(entry)
    steps = read_steps(tmp_path)
    lesson = steps[1]["additions"][0]["id"]
    assert rebuilt.bank.get(lesson).execution == LESSON and len(rebuilt.bank) == 3
    again = run_stream(config, build_task(config), solver, WordSetEncoder(), tmp_path, model="model")
    assert again.played == 0 and again.final_ids == rebuilt.bank.ids()


def test_remem_in_alfworld_thinks_and_refines_between_commands():
    from agemem.eval.stream.bank import Record
    from agemem.eval.stream.base import Demonstration
    from tests.eval.stream.test_alfworld_stream import ScriptedGame, _item, _task

    bank = MemoryBank(WordSetEncoder())
    bank.add(Record("mem_00000001", "put a pen in drawer", "> go to sofa 1\nOutcome: not done", "t", 0, "stream"))
    delete = [{"name": "Delete_memory", "arguments": {"memory_id": "mem_00000001", "confirmation": True}}]
    chat = ScriptedChat(
        [
            [
                "<think>the record wandered off; the pen is on the desk</think>",
                f"<tool_call>{json.dumps(delete)}</tool_call>",
                "<answer>go to desk 1</answer>",
                "<answer>take pen 1 from desk 1</answer>",
            ]
        ]
    )
    session = ReMemSession(bank, ReMemBudget(max_think=1, max_refine=1))
    demo = Demonstration("mem_00000001", "put a pen in drawer", "> go to sofa 1\nOutcome: not done", 0.9)
    game = ScriptedGame(_item().payload)
    attempt = _task([game]).play(_item(), [demo], chat, session, seed=None)
    assert attempt.won and game.said == ["go to desk 1", "take pen 1 from desk 1"] and attempt.replies == 4
    assert len(bank) == 0 and [r.id for r in session.deleted] == ["mem_00000001"]
    assert session.to_json()["acts"] == 2 and session.counts.think == 1 and session.counts.refine["delete"] == 1
    system = chat.seen[0][0]["content"]
    assert system.startswith("You are an agent in a text-based household game (ALFWorld).")
    assert "<answer>one game command, e.g. go to countertop 1</answer>" in system
    assert '"name": "Delete_memory"' in system and '"name": "Add_memory"' not in system
    status = json.loads(chat.seen[1][-1]["content"])["message"]
    assert "Step 1 of 8 for this command (7 left)" in status  # ReMem's own replies per command, remem_max_steps
    assert all(not m["content"].startswith("The task is over") for m in chat.seen[-1])  # no memory turn


@pytest.mark.parametrize(
    ("reply", "operation"),
    [
        ("<think>only a thought</think>", "think"),
        ('<think>x</think><tool_call>[{"name": "Retrieve_memory", "arguments": {"query": "q"}}]</tool_call>', "refine"),
        ("<think>x</think><answer>Paris</answer>", "act"),
        ("<think>x</think> and more", "malformed"),
        ("<think>never closed", "malformed"),
        ("no tags", "malformed"),
    ],
)
def test_each_reply_is_one_operation(reply, operation):
    assert operation_of(parse_response(reply, REFINE_TOOLS)) == operation


def test_remem_settings_are_checked_labelled_and_part_of_the_run_identity():
    with pytest.raises(ConfigError, match="addition=policy"):
        stream_config("stream.agent=remem", "stream.addition=policy")
    with pytest.raises(ConfigError, match="drop replay_of"):
        stream_config("stream.agent=remem", "stream.replay_of=runs/x")
    with pytest.raises(ConfigError, match="set retrieval=similar"):
        stream_config("stream.agent=remem", "stream.retrieval=none")
    with pytest.raises(ConfigError, match="remem_max_steps=0 must be >= 1"):
        stream_config("stream.agent=remem", "stream.remem_max_steps=0")
    with pytest.raises(ConfigError, match="remem_max_think=-1 must be >= 0"):
        stream_config("stream.remem_max_think=-1")
    assert strategy_label(stream_config("stream.agent=remem")) == "remem"
    assert strategy_label(stream_config("stream.agent=remem", "stream.addition=strict")) == "remem/strict"
    assert strategy_label(stream_config("stream.agent=remem", "stream.retrieval=recent")) == "remem/recent"
    remem = strategy_settings(stream_config("stream.agent=remem"))
    assert remem["agent"] == "remem" and remem["remem_max_refine"] == 4
    standard = strategy_settings(stream_config())
    assert "agent" not in standard and not any(key.startswith("remem_") for key in standard)


def test_the_shipped_sweeps_have_a_remem_arm():
    for name in ("stream_hotpotqa.yaml", "stream_retention.yaml"):
        spec = load_sweep(ROOT / "configs" / "sweeps" / name)
        config = strategy_config(AgeMemConfig(), spec.base, spec.strategies["remem"])
        assert config.stream.agent == "remem" and strategy_label(config) == "remem"


def test_remem_refines_at_several_steps_of_a_game_each_step_with_its_own_budget():
    from agemem.eval.stream.bank import Record
    from tests.eval.stream.test_alfworld_stream import ScriptedGame, _item, _task

    bank = MemoryBank(WordSetEncoder())
    for n, execution in enumerate(["> go to desk 1\nOutcome: done", "> look\nOutcome: not done"], 1):
        bank.add(Record(f"mem_0000000{n}", "put a pen in drawer", execution, "t", 0, "stream", score=1.0 - (n - 1)))
    written = []

    def write(content, metadata):
        written.append(bank.add(Record(f"mem_r{len(written):07d}", "put a pen in drawer", content, "t", 1, "remem")))
        return written[-1]

    def calls(*pairs):
        return f"<tool_call>{json.dumps([{'name': n, 'arguments': a} for n, a in pairs])}</tool_call>"

    update = ("Update_memory", {"memory_id": "mem_00000001", "content": "Lesson: the pen is on the desk."})
    merge = ("Merge_memory", {"memory_ids": ["mem_00000001", "mem_00000002"], "content": "Lesson: desk, then take."})
    add = ("Add_memory", {"content": "Lesson: take pen 1 from desk 1 wins."})
    chat = ScriptedChat(
        [
            [
                # step 1 (the first command): a thought, an update, a second Refine refused (one per step), the command
                "<think>the first record is right</think>",
                calls(update),
                calls(("Retrieve_memory", {"query": "pen"})),
                "<answer>go to desk 1</answer>",
                # step 2: fresh budgets: a thought again, a merge of both records, the command
                "<think>the records say the same</think>",
                calls(merge),
                "<answer>take pen 1 from desk 1</answer>",
            ]
        ]
    )
    session = ReMemSession(bank, ReMemBudget(max_think=1, max_refine=1, max_steps=4), write)
    game = ScriptedGame(_item().payload)
    attempt = _task([game]).play(_item(), [], chat, session, seed=None)
    assert attempt.won and game.said == ["go to desk 1", "take pen 1 from desk 1"] and attempt.replies == 7
    counts = session.to_json()
    assert counts["refine"] == {"retrieve": 0, "add": 0, "update": 1, "merge": 1, "delete": 0}
    assert (counts["refine_steps"], counts["refine_refused"], counts["think"], counts["acts"]) == (2, 1, 2, 2)
    assert counts["think_refused"] == 0  # the second thought came in the second step
    # the merge kept the first record with the merged content and deleted the second
    assert bank.ids() == ["mem_00000001"] and bank.get("mem_00000001").execution == "Lesson: desk, then take."
    assert [r.id for r in session.deleted] == ["mem_00000002"] and counts["updated"] == ["mem_00000001"]
    refused = json.loads(chat.seen[3][-2]["content"])  # the refused call's result, then the status
    assert refused["message"].startswith("no Refine operation left in this step (1 per step)")
    statuses = [json.loads(m[-1]["content"])["message"] for m in (chat.seen[1], chat.seen[5])]
    assert all("Step 1 of 4 for this command (3 left)" in status for status in statuses)  # each command afresh
    assert "Refine operations left: 1" in statuses[1]  # the budget came back with the new step

    # Add: a new record of the task, through the runner's write
    chat = ScriptedChat([[calls(add), "<answer>go to desk 1</answer>", "<answer>take pen 1 from desk 1</answer>"]])
    session = ReMemSession(bank, ReMemBudget(max_refine=1, max_steps=4), write)
    assert _task([ScriptedGame(_item().payload)]).play(_item(), [], chat, session, seed=None).won
    assert [r.execution for r in written] == ["Lesson: take pen 1 from desk 1 wins."] and session.added == written

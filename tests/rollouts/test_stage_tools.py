"""rollout.stage_tools: every tool in every stage (all, the default), or the paper's per-stage sets (paper).

Scripted policies play through the real driver, env, parser and tokenizer; the tests read what each prompt
offered (the system message and the chat template's tools), what an out-of-stage call did, and the counts.
"""

from __future__ import annotations

import json
import re

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.core.tools import PAPER_STAGE_TOOLS, TOOL_NAMES
from agemem.entrypoints.roots import AgeMemConfig
from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.rollouts.scripted import MemoryAgent, answer, call, last_user
from tests.rollouts.test_episode import conversation, make_config, play

SCHEMA_NAME = re.compile(r'"name": "([A-Za-z_]+)", "description"')
"""a tool schema's name as the system prompt (tool format agemem) or the chat template (native) renders it."""
NOTES = {
    1: "; at this point they are Add_memory, Update_memory and Delete_memory, and no others.",
    2: "; at this point they are Summary_context and Filter_context, and no others.",
    3: "; at this point they are Retrieve_memory and Summary_context, and no others.",
}


def offered_in(step, tokenizer) -> set[str]:
    """The tools whose schemas the prompt of ``step`` shows (system prompt and chat-template tools alike)."""
    return set(SCHEMA_NAME.findall(conversation(step, tokenizer)[0]["content"]))


@pytest.fixture(scope="module")
def tasks():
    return generate_synthetic_tasks(2, seed=3)


@pytest.mark.parametrize("tool_format", ["agemem", "native"])
def test_paper_each_stage_prompt_offers_exactly_that_stages_tools(tool_format, tasks, qwen_tokenizer):
    config = make_config("rollout.stage_tools=paper", f"env.tool_format={tool_format}")
    result, _, _ = play(tasks[:1], config, MemoryAgent(tasks, stage2="filter"), qwen_tokenizer)
    (trajectory,) = result.trajectories
    assert trajectory.ended_by == "answer" and trajectory.answer == tasks[0].answer
    for stage in (1, 2, 3):
        steps = trajectory.stage_steps(stage)
        assert steps
        for step in steps:
            assert offered_in(step, qwen_tokenizer) == set(PAPER_STAGE_TOOLS[stage]), (stage, step.turn)
        system = conversation(steps[0], qwen_tokenizer)[0]["content"]
        guide, note = system.split("The tools you may use change as the conversation goes on")
        assert NOTES[stage] in note  # the prompt says the tools change and names those available now
        for name in set(TOOL_NAMES) - set(PAPER_STAGE_TOOLS[stage]):
            assert name not in guide, (stage, name)  # the guide speaks of the stage's tools only
    # the paper's stages did their work: Stage-1 adds, a Stage-2 filter, a Stage-3 retrieval, nothing refused
    assert [op.stage for op in trajectory.stats.ops("add")] == [1, 1, 1]
    assert trajectory.stats.filters and {f.stage for f in trajectory.stats.filters} == {2}
    assert [r.stage for r in trajectory.stats.retrievals] == [3]
    assert not any(v["kind"] == "unknown_tool" for v in trajectory.stats.violations)


def test_all_offers_every_tool_in_every_stage(tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config(), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    assert {s.stage for s in trajectory.steps} == {1, 2, 3}
    assert all(offered_in(s, qwen_tokenizer) == set(TOOL_NAMES) for s in trajectory.steps)
    assert "The tools you may use change" not in conversation(trajectory.steps[0], qwen_tokenizer)[0]["content"]


def test_all_is_the_default_and_plays_as_before_stage_tools_existed(tasks, qwen_tokenizer):
    """The default prompt is the one the env always built; an out-of-stage habit (an Add_memory in Stage 2) runs."""
    assert AgeMemConfig().rollout.stage_tools == "all"
    result, _, _ = play(tasks[:1], make_config(), MemoryAgent(tasks, stage2="store"), qwen_tokenizer)
    (trajectory,) = result.trajectories
    assert [op.stage for op in trajectory.stats.ops("add")] == [1, 1, 1, 2, 2, 2, 2, 2]
    assert trajectory.stats.violations == []


def _stage_pair(stage2_call: str, stage3_call: str):
    """A policy that stores each fact, makes ``stage2_call`` once per distractor and ``stage3_call`` once after the
    question, then acknowledges / retrieves / answers."""
    distractors: set[str] = set()
    questions: dict[str, str] = {}

    def policy(messages):
        index = last_user(messages)
        message = messages[index]["content"]
        replies = messages[index + 1 :]
        acted = sum(m["role"] == "assistant" for m in replies)
        if message in questions:
            moves = [stage3_call, call("Retrieve_memory", query=message), answer(questions[message])]
            return moves[min(acted, 2)]
        if message in distractors:
            return answer("OK") if acted else stage2_call
        return answer("OK") if acted else call("Add_memory", content=message)

    return policy, distractors, questions


def test_paper_out_of_stage_calls_are_refused_seen_and_counted(tasks, qwen_tokenizer):
    task = tasks[0]
    policy, distractors, questions = _stage_pair(
        call("Add_memory", content="a distractor worth nothing"), call("Filter_context", criteria=task.distractors[0])
    )
    distractors.update(task.distractors)
    questions[task.question] = task.answer
    result, _, _ = play(tasks[:1], make_config("rollout.stage_tools=paper"), policy, qwen_tokenizer)
    (trajectory,) = result.trajectories
    stats = trajectory.stats

    # refused: nothing ran, memory holds the three Stage-1 facts only, no filter touched the context
    assert [op.stage for op in stats.memory_ops] == [1, 1, 1]
    assert len(trajectory.final_memory) == 3 and stats.filters == [] and stats.summaries == []
    refused = [s for s in trajectory.steps if s.tool_calls and s.tool_calls[0]["error"]]
    assert [(s.stage, s.tool_calls[0]["name"]) for s in refused] == [(2, "Add_memory")] * 5 + [(3, "Filter_context")]
    for step in refused:
        message = step.tool_results[0]["message"]
        expected = {2: "in Stage 2; the tools available now are Summary_context, Filter_context"}
        expected[3] = "in Stage 3; the tools available now are Retrieve_memory, Summary_context"
        assert message == f"{step.tool_calls[0]['name']} is not available {expected[step.stage]}"
        assert step.tool_results[0]["ok"] is False and step.violations == ["unknown_tool"]

    # the agent saw the error: the next prompt ends with it, and the distractors are all still in the context
    after = conversation(trajectory.stage_steps(3)[1], qwen_tokenizer)
    assert json.loads(re.search(r"<tool_response>\s*(.*?)\s*</tool_response>", after[-1]["content"], re.S)[1]) == {
        "tool": "Filter_context",
        "ok": False,
        "message": "Filter_context is not available in Stage 3; the tools available now are Retrieve_memory, "
        "Summary_context",
    }
    assert sum(m["content"] in task.distractors for m in after) == len(task.distractors)

    # counted like any invalid call: one unknown_tool violation per refused call, a failed call in the step records
    assert [(v["stage"], v["kind"]) for v in stats.violations] == [(2, "unknown_tool")] * 5 + [(3, "unknown_tool")]
    assert sum(len(r.failed_calls) for r in stats.steps) == 6
    assert stats.tool_counts["Add_memory"] == 8 and stats.tool_counts["Filter_context"] == 1  # attempts
    # training goes on: the episode still retrieves and answers
    assert trajectory.ended_by == "answer" and trajectory.answer == task.answer


def test_paper_keeps_the_reset_before_stage2_only_and_renews_the_system_prompt_at_stage3(tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config("rollout.stage_tools=paper"), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    task = tasks[0]
    first2 = conversation(trajectory.stage_steps(2)[0], qwen_tokenizer)
    assert [m["role"] for m in first2] == ["system", "user"]  # reset before Stage 2: only the (new) system prompt
    last2, first3 = trajectory.stage_steps(2)[-1], trajectory.stage_steps(3)[0]
    stage3 = conversation(first3, qwen_tokenizer)
    users = [m["content"] for m in stage3 if m["role"] == "user" and "<tool_response>" not in m["content"]]
    assert users == [*task.distractors, task.question]  # no reset before Stage 3: the Stage-2 context goes on
    # ...under the Stage-3 system prompt, so the first Stage-3 prompt does not extend the last Stage-2 one
    assert conversation(last2, qwen_tokenizer)[1:] == stage3[1 : len(conversation(last2, qwen_tokenizer))]
    assert first3.prompt_ids[: len(last2.prompt_ids)] != last2.prompt_ids
    later3 = trajectory.stage_steps(3)[1]
    assert later3.prompt_ids[: len(first3.prompt_ids)] == first3.prompt_ids  # within a stage prompts extend


def test_paper_limits_to_env_tools_and_never_offers_a_tool_env_tools_leaves_out(tasks, qwen_tokenizer):
    config = make_config("rollout.stage_tools=paper", "env.tools=[Add_memory,Retrieve_memory,Filter_context]")
    policy, distractors, questions = _stage_pair(
        call("Summary_context", span="all"), call("Retrieve_memory", query=tasks[0].question)
    )
    distractors.update(tasks[0].distractors)
    questions[tasks[0].question] = tasks[0].answer
    result, _, _ = play(tasks[:1], config, policy, qwen_tokenizer)
    (trajectory,) = result.trajectories
    offered = {stage: offered_in(trajectory.stage_steps(stage)[0], qwen_tokenizer) for stage in (1, 2, 3)}
    assert offered == {1: {"Add_memory"}, 2: {"Filter_context"}, 3: {"Retrieve_memory"}}
    # a tool env.tools never offers stays an unknown tool (not "not available in Stage 2")
    step = next(s for s in trajectory.stage_steps(2) if s.tool_calls)
    assert step.tool_calls[0]["error"] == "unknown tool 'Summary_context'; available tools: Filter_context"


@pytest.mark.parametrize("value", ["stage", "Paper", "none"])
def test_a_bad_stage_tools_value_is_refused_naming_the_allowed_values(value):
    with pytest.raises(ConfigError) as raised:
        load_config(AgeMemConfig, overrides=[f"rollout.stage_tools={value}"])
    message = str(raised.value)
    assert "rollout.stage_tools" in message and repr(value) in message
    assert "'all'" in message and "'paper'" in message


def test_stage_tools_loads_from_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("rollout:\n  stage_tools: paper\n")
    assert load_config(AgeMemConfig, path).rollout.stage_tools == "paper"

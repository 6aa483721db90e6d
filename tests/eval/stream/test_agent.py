"""The model side of a stream: prompts with demonstrations, the response protocol, and the policy addition, in
which the agent itself writes and deletes records with Add_memory / Delete_memory through the tool interface."""

from __future__ import annotations

import json
import re

import pytest

from agemem.core.chat import load_tokenizer
from agemem.eval.models import Backend
from agemem.eval.stream.evaluate import evaluate_stream
from agemem.eval.stream.runner import read_steps
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer, call
from tests.eval.stream.helpers import stream_config

SYNTHETIC = ["stream.task=synthetic", "stream.synthetic_tasks=6", "stream.synthetic_families=2", "stream.top_k=1"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def _gold(conversation):
    from agemem.tasks.synthetic import synthetic_items

    by_query = {i.query: i.answer for i in synthetic_items(6, 2, 0, True)}
    task_message = conversation[1]["content"]
    question = re.search(r"Question: (.*)", task_message.split("Now your task.")[-1]).group(1)
    return by_query[question]


def memory_manager(conversation):
    """Answers with the gold answer; in the memory turn deletes the record it was shown and stores its own."""
    last = conversation[-1]
    if last["role"] == "tool":
        return answer("OK")
    if last["content"].startswith("The task is over"):
        shown = re.findall(r"memory_id: (mem_\w+)", conversation[1]["content"])
        calls = [("Delete_memory", {"memory_id": shown[0], "confirmation": True})] if shown else []
        calls.append(("Add_memory", {"content": f"Answer: {_gold(conversation)}", "memory_type": "experience"}))
        return call(*calls)
    return f"<think>the facts say so</think><answer>{_gold(conversation)}</answer>"


def _evaluate(tmp_path, tokenizer, policy, *overrides):
    engine = MessagesEngine(tokenizer, policy)
    config = stream_config(*SYNTHETIC, "eval.models=[scripted]", *overrides)
    results = evaluate_stream(
        config, tmp_path, backends={"scripted": Backend(engine, tokenizer)}, encoder=WordSetEncoder()
    )
    return results, engine


def test_policy_addition_lets_the_agent_write_and_delete_records(tmp_path, tokenizer):
    results, engine = _evaluate(tmp_path, tokenizer, memory_manager, "stream.addition=policy")
    steps = read_steps(tmp_path)
    assert results["accuracy"] == 1.0 and results["additions"] == {"policy": 6}
    assert [len(s["additions"]) for s in steps] == [1] * 6
    assert steps[0]["deletions"] == [] and steps[0]["retrieved"] == []
    for position, step in enumerate(steps[1:], 1):  # each task deletes the record it was shown, stores its own
        shown = step["retrieved"][0]["id"]
        assert step["deletions"] == [{"id": shown, "reason": "policy: Delete_memory"}]
        assert shown == steps[position - 1]["additions"][0]["id"]
    record = steps[0]["additions"][0]
    assert record["source"] == "policy" and record["execution"].startswith("Answer: ")
    assert record["success"] == 1.0 and record["metadata"] == {"memory_type": "experience"}
    assert [s["bank_size"] for s in steps] == [1] * 6  # one in, one out
    # the agent saw the memory tools, its demonstrations with their ids, and the tools' results
    system = engine.seen[0][0]["content"]
    assert '"name": "Add_memory"' in system and '"name": "Delete_memory"' in system
    assert '"name": "Retrieve_memory"' not in system
    second_task = next(c for c in engine.seen if "memory_id: " in c[1]["content"])
    assert "Now your task." in second_task[1]["content"] and "Execution: Answer: " in second_task[1]["content"]
    tool_results = [json.loads(m["content"]) for c in engine.seen for m in c if m["role"] == "tool"]
    assert any(
        r["tool"] == "Add_memory" and r["ok"] and r["message"].startswith("stored 1 memory entry") for r in tool_results
    )
    assert any(r["tool"] == "Delete_memory" and r["ok"] for r in tool_results)
    assert steps[1]["transcript"][-2]["tool_calls"][0]["name"] == "Delete_memory"


def test_without_policy_addition_the_agent_has_no_tools_and_malformed_replies_are_observations(tmp_path, tokenizer):
    replies = iter(["I think it is Paris", call(("Add_memory", {"content": "x"}))] * 50)

    def policy(conversation):
        if conversation[-1]["role"] == "user":
            return next(replies)
        return answer(_gold(conversation))

    results, engine = _evaluate(tmp_path, tokenizer, policy, "stream.addition=strict", "stream.max_steps=2")
    steps = read_steps(tmp_path)
    assert "Add_memory" not in engine.seen[0][0]["content"]
    first = steps[0]["transcript"]
    assert first[0]["violations"] == ["text_outside_tags", "no_action"] and first[1]["answer"] is not None
    feedback = json.loads(engine.seen[1][-1]["content"])
    assert feedback["tool"] == "format_check" and "format error" in feedback["message"]
    second = steps[1]["transcript"][0]["tool_calls"][0]
    assert second["name"] == "Add_memory" and second["ok"] is False and "no tools are available" in second["message"]
    assert results["accuracy"] == 1.0 and steps[0]["execution"].startswith("Reasoning: scripted\nAnswer: ")


def test_an_engine_error_ends_the_task_without_crashing_the_stream(tmp_path, tokenizer):
    from agemem.rollouts.engines.base import Completion

    class Broken(MessagesEngine):
        def generate(self, prompts, sampling, *, messages=None):
            return [Completion([], None, "error", error="server down") for _ in prompts]

    engine = Broken(tokenizer, memory_manager)
    config = stream_config(*SYNTHETIC, "eval.models=[scripted]", "stream.limit=2")
    results = evaluate_stream(
        config, tmp_path, backends={"scripted": Backend(engine, tokenizer)}, encoder=WordSetEncoder()
    )
    steps = read_steps(tmp_path)
    assert results["accuracy"] == 0.0 and [s["error"] for s in steps] == ["server down"] * 2


def test_hotpotqa_stream_with_a_gold_agent_and_an_llm_coarse_judge(tmp_path, tokenizer):
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.tasks import load_tasks
    from tests.fake_endpoint import FakeChatEndpoint

    sample = load_tasks(AgeMemConfig())[:3]
    gold = {t.question: t.answer for t in sample}

    def agent(conversation):
        task = conversation[1]["content"].split("Now your task.")[-1]
        question = re.search(r"Question: (.*)", task).group(1)
        return f"<think>from the paragraphs</think><answer>{gold[question]}</answer>"

    def judge(body, number):
        assert body["messages"][0]["content"].startswith("You grade an agent's execution")
        return 200, "Score: 0.9" if number == 1 else "Score: 0.1"  # only the first execution passes

    endpoint = FakeChatEndpoint(judge)
    try:
        judge_settings = [
            "reward.judge.backend=openai",
            "reward.judge.model=judge",
            f"reward.judge.base_url={endpoint.url}",
        ]
        overrides = ["stream.task=hotpotqa", "stream.limit=3", "stream.addition=coarse", *judge_settings]
        results, engine = _evaluate(tmp_path, tokenizer, agent, *overrides)
    finally:
        endpoint.close()
    steps = read_steps(tmp_path)
    assert results["accuracy"] == 1.0 and results["evaluator"] == "coarse"
    assert [s["coarse"] for s in steps] == [0.9, 0.1, 0.1] and [len(s["additions"]) for s in steps] == [1, 0, 0]
    assert results["coarse_judge"]["requests"] == 3 and results["coarse_judge"]["fallbacks"] == 0
    judged = [body["messages"][1]["content"] for _, _, body in endpoint.requests]
    assert all(text.startswith("Task: ") and "Reference" not in text for text in judged)  # no gold answer shown
    assert "Paragraphs:" in engine.seen[0][1]["content"]  # HotpotQA's distractor setting
    assert steps[1]["retrieved"][0]["id"] == steps[0]["additions"][0]["id"]
    assert steps[0]["additions"][0]["execution"] == f"Reasoning: from the paragraphs\nAnswer: {sample[0].answer}"

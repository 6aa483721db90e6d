"""MemoryAgent: a scripted policy stores a fact in one session and answers from it in the next (the LTM
file survives the restart), malformed replies become feedback, the context is kept within budget, and
a failing model is a clear error."""

from __future__ import annotations

import pytest

import agemem
from agemem.core.configlib import load_config
from agemem.entrypoints.agent import AgentError, MemoryAgent, agent_settings
from agemem.entrypoints.roots import AgeMemConfig
from tests.agemem.memory_policy import ScriptedMemoryPolicy


def _settings(*overrides: str) -> dict:
    config = load_config(AgeMemConfig, overrides=["env.summarizer.backend=extractive", *overrides])
    return agent_settings(config, {"kind": "test"})


def _agent(policy, qwen_tokenizer, minilm, memory, **kwargs) -> MemoryAgent:
    return MemoryAgent(
        policy, qwen_tokenizer, kwargs.pop("settings", _settings()), memory=memory, encoder=minilm, **kwargs
    )


def test_a_fact_stored_in_one_session_is_retrieved_in_the_next(tmp_path, qwen_tokenizer, minilm):
    memory = tmp_path / "memory.sqlite"
    seen = []
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, memory, on_step=seen.append) as first:
        reply = first.chat("Remember: my locker number is 317.")
        assert reply.answer == "I will remember that."
        (add, _) = reply.steps
        ((name, ok, arguments),) = [(e.name, e.ok, e.arguments) for e in add.tool_events]
        assert (name, ok, arguments["content"]) == ("Add_memory", True, "my locker number is 317.")
        assert seen == reply.steps  # on_step saw every reply as it happened
        assert [m.content for m in first.memories()] == ["my locker number is 317."]
    # a new process would see the same file; the export's Stage-1 introspection (top 3) shows the memory first
    policy = ScriptedMemoryPolicy()
    with _agent(policy, qwen_tokenizer, minilm, memory) as second:
        reply = second.chat("What is my locker number?")
        recall, answer = reply.steps
        assert recall.automatic and recall.tool_events[0].result["memories"][0]["content"] == "my locker number is 317."
        assert not answer.tool_events and reply.answer == "my locker number is 317."
    # the second session started from a fresh context: system prompt, the question, the recalled memory
    assert [m["role"] for m in policy.calls[0]] == ["system", "user", "tool"]
    # trained without introspection, the policy retrieves by itself
    settings = _settings("rollout.introspective_top_k=0")
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, memory, settings=settings) as third:
        reply = third.chat("What is my locker number?")
        assert [e.name for step in reply.steps for e in step.tool_events] == ["Retrieve_memory"]
        assert not any(step.automatic for step in reply.steps)
        assert reply.answer == "my locker number is 317."
        retrieved = reply.steps[0].tool_events[0].result["memories"]
        assert retrieved[0]["content"] == "my locker number is 317."


def test_users_have_separate_memories_in_one_file(tmp_path, qwen_tokenizer, minilm):
    memory = tmp_path / "memory.sqlite"
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, memory, user="ann") as ann:
        ann.chat("Remember: my locker number is 317.")
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, memory, user="ben") as ben:
        assert ben.memories() == []
        assert ben.chat("What is my locker number?").answer == "I do not know."


def test_malformed_replies_become_feedback_and_the_budget_ends_the_turn(qwen_tokenizer, minilm):
    policy = ScriptedMemoryPolicy()
    with _agent(policy, qwen_tokenizer, minilm, None, max_steps_per_turn=2) as agent:
        reply = agent.chat("garble")
        assert reply.answer is None and "no answer" in reply.text
        assert len(reply.steps) == 2 and all(step.violations for step in reply.steps)
        # the second attempt saw the environment's format feedback for the first
        assert "Reply with <think>" in policy.calls[1][-1]["content"]
        assert agent.chat("hello").answer == "OK"  # the session goes on


def test_the_context_is_summarised_when_it_outgrows_its_budget(qwen_tokenizer, minilm):
    settings = _settings("env.context.max_context_tokens=1300")
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, None, settings=settings) as agent:
        system_tokens = agent.env.context_tokens()
        for i in range(12):
            agent.chat(f"hello number {i}, " + "and some filler words " * 8)
        assert agent.env.context_tokens() <= 1300 + 200  # folded before each reply; the newest round stays whole
        kinds = [m.kind for m in agent.env.context.messages]
        assert "summary" in kinds and kinds[0] == "system"
        assert "hello number 11" in agent.env.context.messages[-2].content
        assert system_tokens < 1300


def test_a_failing_model_raises_agent_error_and_bad_input_is_refused(qwen_tokenizer, minilm):
    with _agent(ScriptedMemoryPolicy(error="HTTP 503 from the endpoint"), qwen_tokenizer, minilm, None) as agent:
        with pytest.raises(AgentError, match="HTTP 503"):
            agent.chat("hello")
        with pytest.raises(ValueError, match="non-empty"):
            agent.chat("  ")


def test_memory_agent_is_importable_from_the_package_lazily():
    assert agemem.MemoryAgent is MemoryAgent
    with pytest.raises(AttributeError):
        agemem.NotAThing  # noqa: B018


def test_short_memory_ids_carry_on_counting_in_the_next_session(tmp_path, qwen_tokenizer, minilm):
    """env.ltm.id_style=short reaches the agent's SQLite store, whose count survives a restart."""
    memory, settings = tmp_path / "memory.sqlite", _settings("env.ltm.id_style=short", "rollout.introspective_top_k=0")
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, memory, settings=settings) as first:
        first.chat("Remember: my locker number is 317.")
        assert [m.id for m in first.memories()] == ["m1"]
    with _agent(ScriptedMemoryPolicy(), qwen_tokenizer, minilm, memory, settings=settings) as second:
        second.chat("Remember: my bike is blue.")
        assert [m.id for m in second.memories()] == ["m1", "m2"]

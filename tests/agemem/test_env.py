import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agemem.core.config import ContextConfig, EnvConfig
from agemem.core.env import EpisodeStats
from agemem.core.summarizers import LLMSummarizer, SummarizerError
from tests.agemem.test_protocol import FRAGMENTS
from tests.conftest import RecordingSummarizer


def call(name: str, **arguments) -> str:
    return f"<think>t</think><tool_call>{json.dumps([{'name': name, 'arguments': arguments}])}</tool_call>"


def observation(result, i=0) -> dict:
    return json.loads(result.tool_results[i].to_text())


def tool_messages(env) -> list[dict]:
    return [json.loads(m.content) for m in env.context.messages if m.role == "tool"]


def test_add_memory_stores_with_stage_and_records_the_op(make_env):
    env = make_env()
    env.add_user("The Eiffel Tower is 330 metres tall.", kind="fact")
    result = env.step(
        call("Add_memory", content="Eiffel Tower: 330 m", memory_type="fact", metadata={"tags": ["paris"]})
    )
    obs = observation(result)
    assert obs["ok"] and obs["tool"] == "Add_memory" and not result.done
    (entry,) = env.ltm.entries()
    assert entry.content == "Eiffel Tower: 330 m"
    assert {k: entry.metadata[k] for k in ("memory_type", "source", "stage", "tags")} == {
        "memory_type": "fact", "source": "agent", "stage": 1, "tags": ["paris"],
    }  # fmt: skip
    (op,) = env.stats.memory_ops
    assert (op.op, op.stage, op.step, op.ok, op.memory_id) == ("add", 1, 1, True, entry.id)
    assert env.context.messages[-1].role == "tool" and env.context.messages[-2].role == "assistant"


def test_without_echo_changes_show_their_ids_not_their_entries_and_retrieval_is_unchanged(make_env):
    def session(echo: bool) -> tuple[list[dict], list]:
        config = EnvConfig()
        config.ltm.echo_changes = echo
        env = make_env(config)
        added = observation(env.step(call("Add_memory", content="red apple pie")))
        memory_id = env.ltm.entries()[0].id
        shown = [
            added,
            observation(env.step(call("Update_memory", memory_id=memory_id, content="green apple pie"))),
            observation(env.step(call("Retrieve_memory", query="apple pie"))),
            observation(env.step(call("Delete_memory", memory_id=memory_id, confirmation=True))),
        ]
        return shown, [(op.op, op.ok, op.memory_id) for op in env.stats.memory_ops]

    echoed, echoed_ops = session(True)
    quiet, quiet_ops = session(False)
    assert quiet_ops == echoed_ops and all(o["ok"] for o in quiet)  # the same changes, booked the same way
    for loud, short in zip(echoed, quiet, strict=True):
        assert short["message"] == loud["message"]
        if short["tool"] == "Retrieve_memory":
            assert short == loud  # what a lookup finds is always shown
        else:
            memory_id = loud["memories"][0]["memory_id"]
            assert "memories" not in short and {**short, "memories": loud["memories"]} == loud
            assert memory_id in short["message"]  # "stored 1 memory entry: m1", "updated m1", "deleted m1"
    assert len(json.dumps(quiet[0])) < len(json.dumps(echoed[0]))


def test_add_memory_with_empty_content_is_an_argument_error_and_stores_nothing(make_env):
    env = make_env()
    result = env.step(call("Add_memory", content=""))
    assert not observation(result)["ok"] and "bad arguments" in observation(result)["message"]
    assert len(env.ltm) == 0 and result.parsed.violation_kinds() == ["bad_arguments"]


def test_update_and_delete_success_and_error_paths(make_env):
    env = make_env()
    memory_id = observation(env.step(call("Add_memory", content="old fact")))["memories"][0]["memory_id"]
    env.set_stage(3)
    assert observation(env.step(call("Update_memory", memory_id=memory_id, content="new fact")))["ok"]
    assert env.ltm.get(memory_id).content == "new fact"
    missing = observation(env.step(call("Update_memory", memory_id="mem_00000000", content="x")))
    assert not missing["ok"] and "mem_00000000" in missing["message"]
    unconfirmed = observation(env.step(call("Delete_memory", memory_id=memory_id, confirmation=False)))
    assert not unconfirmed["ok"] and "confirmation" in unconfirmed["message"] and len(env.ltm) == 1
    assert observation(env.step(call("Delete_memory", memory_id=memory_id, confirmed=True)))["ok"]  # alias
    assert len(env.ltm) == 0
    assert not observation(env.step(call("Delete_memory", memory_id=memory_id, confirmation=True)))["ok"]
    ops = [(r.op, r.stage, r.ok, r.content, r.previous_content) for r in env.stats.memory_ops]
    assert ops == [
        ("add", 1, True, "old fact", None),
        ("update", 3, True, "new fact", "old fact"),
        ("update", 3, False, "x", None),
        ("delete", 3, False, "", None),
        ("delete", 3, True, "new fact", None),
        ("delete", 3, False, "", None),
    ]
    assert len(env.stats.ops("update")) == 1 and len(env.stats.ops("delete", ok=None)) == 3


def test_retrieve_brings_memories_into_context_and_is_recorded(make_env):
    env = make_env()
    env.ltm.add_many(["red apple pie", "blue car", "red apple"], [{"stage": 1}, {"stage": 1}, {"stage": 2}])
    env.set_stage(3)
    env.add_user("tell me about red apple pie", question=True)
    obs = observation(env.step(call("Retrieve_memory", query="red apple pie", top_k=2)))
    assert [m["content"] for m in obs["memories"]] == ["red apple pie", "red apple"]
    assert "red apple pie" in env.context.messages[-1].content  # now part of the context
    filtered = observation(env.step(call("Retrieve_memory", query="red apple", metadata_filter={"stage": 2})))
    assert [m["content"] for m in filtered["memories"]] == ["red apple"]
    (first, second) = env.stats.retrievals
    assert (first.stage, first.query, first.top_k, first.contents) == (
        3,
        "red apple pie",
        2,
        ["red apple pie", "red apple"],
    )
    assert second.top_k == 3  # the configured default when the agent gives none


def test_summary_context_all_and_rounds(make_env):
    summarizer = RecordingSummarizer("compressed")
    env = make_env(summarizer=summarizer)
    env.set_stage(2)
    for text in ("distractor one", "distractor two", "distractor three"):
        env.add_user(text, kind="distractor")
        env.step("<answer>ok</answer>")
    obs = observation(env.step(call("Summary_context", span=2)))  # integer span accepted
    one = env.stats.summaries[0]
    tokens = f"({one.tokens_before} -> {one.tokens_after} context tokens)"
    assert obs == {"tool": "Summary_context", "ok": True, "message": f"replaced 4 message(s) with a summary {tokens}"}
    # the summary stands in the span's place once: the tool's answer does not repeat it
    assert sum("compressed" in m.content for m in env.context.messages) == 1
    assert [m.content for m in summarizer.seen[0]] == [
        "distractor two", "<answer>ok</answer>", "distractor three", "<answer>ok</answer>",
    ]  # fmt: skip
    env.step(call("Summary_context", span="full"))  # alias of "all"
    kinds = [m.kind for m in env.context.messages]
    assert kinds == ["system", "summary", "action", "tool_result"]
    (one, two) = env.stats.summaries
    assert (one.span, len(one.replaced_contents), two.span) == ("2", 4, "all")


def test_summary_context_errors_are_observations(make_env):
    env = make_env(summarizer=RecordingSummarizer(error=SummarizerError("endpoint http://x timed out")))
    nothing = observation(env.step(call("Summary_context", span="all")))
    assert not nothing["ok"] and "nothing to summarise" in nothing["message"]
    env.add_user("some chatter")
    failed = observation(env.step(call("Summary_context", span="all")))
    assert not failed["ok"] and "timed out" in failed["message"]
    assert any(m.content == "some chatter" for m in env.context.messages)
    assert env.stats.summary_failures == 1 and env.stats.summaries == []  # counted (episode/summary_failures)
    assert EpisodeStats.from_json(env.stats.to_json()).summary_failures == 1
    bad = env.step(call("Summary_context", span="0"))
    assert bad.parsed.violation_kinds() == ["bad_arguments"]


def test_filter_context_removes_distractor_but_not_question(make_env):
    env = make_env()
    env.add_user("football scores saturday arsenal won", kind="distractor")
    env.set_stage(3)
    env.add_user("what football team won on saturday", question=True)
    obs = observation(env.step(call("Clear_context", criteria="football scores saturday arsenal won")))  # alias
    assert obs["ok"] and obs["removed"] == ["football scores saturday arsenal won"]
    assert [m.kind for m in env.context.messages] == ["system", "question", "action", "tool_result"]
    (record,) = env.stats.filters
    assert record.removed_contents == ["football scores saturday arsenal won"] and record.similarities == pytest.approx(
        [1.0]
    )
    assert env.stats.tool_counts == {"Filter_context": 1}


def test_several_calls_run_in_order_with_one_result_each(make_env):
    env = make_env()
    text = (
        '<tool_call>{"name": "Add_memory", "arguments": {"content": "alpha"}}</tool_call>\n'
        '<tool_call>{"name": "Retrieve_memory", "arguments": {"query": "alpha"}}</tool_call>'
    )
    result = env.step(text)
    assert [r.name for r in result.tool_results] == ["Add_memory", "Retrieve_memory"]
    assert observation(result, 1)["memories"][0]["content"] == "alpha"  # the add ran first
    assert result.parsed.violations == []


def test_answer_ends_the_turn(make_env):
    env = make_env()
    result = env.step("<think>easy</think><answer>Paris</answer>")
    assert result.done and result.answer == "Paris" and result.tool_results == []
    assert env.context.messages[-1].content == "<think>easy</think><answer>Paris</answer>"


def test_tool_call_and_answer_runs_the_calls_and_ends_the_turn(make_env):
    env = make_env()
    result = env.step(call("Add_memory", content="alpha") + "<answer>done</answer>")
    assert result.done and len(env.ltm) == 1
    assert result.parsed.violation_kinds() == ["tool_call_and_answer"]
    assert env.stats.violations == [
        {"stage": 1, "step": 1, "kind": "tool_call_and_answer", "detail": result.parsed.violations[0].detail}
    ]


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("I think the answer is Paris.", ["text_outside_tags", "no_action"]),
        ('<tool_call>[{"name": "Add_memory", "arguments": {"content": "x"}}, 3]</tool_call>', ["non_object_call"]),
        ("<tool_call>[{not json}]</tool_call>", ["invalid_json"]),
        ('<tool_call>[{"name": "Forget_everything", "arguments": {}}]</tool_call>', ["unknown_tool"]),
    ],
)
def test_malformed_output_becomes_an_observation(make_env, text, kinds):
    env = make_env()
    result = env.step(text)
    assert result.parsed.violation_kinds() == kinds and not result.done
    messages = tool_messages(env)
    assert messages and not messages[-1]["ok"]
    if kinds != ["unknown_tool"]:  # an unknown tool gets its own error result instead of a format note
        assert messages[-1]["tool"] == "format_check" and "format error" in messages[-1]["message"]
    if kinds == ["non_object_call"]:
        assert len(env.ltm) == 1  # defect 6: the valid element still runs; the reference code crashed here


def test_stage_reset_keeps_ltm_and_clears_stm(make_env):
    env = make_env()
    env.add_user("fact")
    env.step(call("Add_memory", content="fact kept"))
    env.reset_context()
    env.set_stage(2)
    assert [m.role for m in env.context.messages] == ["system"] and len(env.ltm) == 1
    with pytest.raises(ValueError):
        env.set_stage(4)


def test_context_tokens_and_overflow_are_recorded(make_env):
    env = make_env(EnvConfig(context=ContextConfig(max_context_tokens=1200)))
    base = env.context_tokens()
    env.add_user("word " * 50)
    first = env.step("<answer>ok</answer>")
    assert first.prompt_tokens == env.stats.steps[0].prompt_tokens > base
    assert first.tokens_after == env.context_tokens() > first.prompt_tokens
    assert not env.stats.overflow
    env.add_user("word " * 400)
    env.step("<answer>ok</answer>")
    assert env.stats.overflow and env.stats.first_overflow_step == 2
    assert env.stats.max_context_tokens == env.context_tokens()


def test_native_tool_format_passes_schemas_to_the_template(make_env, qwen_tokenizer):
    agemem_env = make_env()
    native_env = make_env(EnvConfig(tool_format="native"))
    assert "Add_memory" in agemem_env.context.system_prompt and agemem_env.tools is None
    assert '"parameters"' not in native_env.context.system_prompt and len(native_env.tools) == 6
    from agemem.core.chat import render_chat

    rendered = render_chat(qwen_tokenizer, native_env.prompt_messages(), native_env.tools)
    assert "<tools>" in rendered and '"name": "Filter_context"' in rendered


def test_envs_sharing_resources_have_separate_memories(make_env):
    env_a = make_env(scope="task/0")
    env_b = type(env_a)(env_a.resources, scope="task/1")
    env_a.step(call("Add_memory", content="only in a"))
    obs = observation(env_b.step(call("Retrieve_memory", query="only in a")))
    assert obs["ok"] and obs["message"] == "long-term memory is empty"
    assert len(env_a.ltm.entries(scope="task/0")) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=200), min_size=1, max_size=4))
def test_random_model_output_never_breaks_the_env(make_env, texts):
    env = make_env()
    env.add_user("what is the capital of france", question=True)
    for text in texts:
        env.step(text)
    assert env.context.messages[0].role == "system"
    assert any(m.kind == "question" for m in env.context.messages)
    assert len(env.stats.steps) == len(texts)


def test_agent_cannot_set_stage_or_source(make_env):
    env = make_env()
    env.set_stage(3)
    added = observation(env.step(call("Add_memory", content="late fact", metadata={"stage": 1, "source": "gold"})))
    memory_id = added["memories"][0]["memory_id"]
    env.step(call("Update_memory", memory_id=memory_id, content="late fact v2", metadata={"stage": 1}))
    meta = env.ltm.get(memory_id).metadata
    assert (meta["stage"], meta["source"]) == (3, "agent")  # forging Stage 1 would game the storage reward


def test_failed_update_records_the_id_it_tried(make_env):
    env = make_env()
    env.step(call("Update_memory", memory_id="mem_12345678", content="x"))
    assert env.stats.memory_ops[0].memory_id == "mem_12345678" and not env.stats.memory_ops[0].ok


def test_any_summarizer_failure_is_an_observation_and_earlier_calls_keep_their_results(make_env):
    def failing_policy(messages):
        raise RuntimeError("CUDA out of memory")

    env = make_env(summarizer=LLMSummarizer(failing_policy))
    env.add_user("chatter")
    text = (
        '<tool_call>[{"name": "Add_memory", "arguments": {"content": "kept"}},'
        ' {"name": "Summary_context", "arguments": {"span": "all"}}]</tool_call>'
    )
    result = env.step(text)
    assert [r.ok for r in result.tool_results] == [True, False]
    assert "CUDA out of memory" in observation(result, 1)["message"]
    assert [m["tool"] for m in tool_messages(env)] == ["Add_memory", "Summary_context"]
    assert len(env.stats.steps) == 1


def test_integral_float_top_k_is_accepted(make_env):
    env = make_env()
    env.ltm.add_many(["a b", "a c", "a d"])
    obs = observation(env.step(call("Retrieve_memory", query="a", top_k=2.0)))
    assert obs["ok"] and len(obs["memories"]) == 2


def test_overflow_steps_are_the_prompts_over_budget(make_env):
    env = make_env(EnvConfig(context=ContextConfig(max_context_tokens=1200)))
    env.add_user("word " * 400)
    env.step('<tool_call>[{"name": "Filter_context", "arguments": {"criteria": "word"}}]</tool_call>')
    env.step("<answer>ok</answer>")  # back under budget after the filter
    assert env.stats.overflow_steps == [1] and env.stats.first_overflow_step == 1


# The parser tests' fragments (tags, brackets, tool names) make soup that reaches every env code path.
tagged_text = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(tagged_text, min_size=1, max_size=4))
def test_tag_soup_never_breaks_the_env(make_env, texts):
    env = make_env()
    env.add_user("what is the capital of france", question=True)
    for text in texts:
        env.step(text)
    assert env.context.messages[0].role == "system" and len(env.stats.steps) == len(texts)
    assert any(m.kind == "question" for m in env.context.messages)


def test_a_reduced_tool_set_is_all_the_agent_is_offered(make_env):
    env = make_env(EnvConfig(tools=["Add_memory", "Retrieve_memory"]))
    prompt = env.context.system_prompt
    assert '"name": "Add_memory"' in prompt and '"name": "Retrieve_memory"' in prompt
    assert "Filter_context" not in prompt and "Summary_context" not in prompt and "Delete_memory" not in prompt
    env.add_user("Keep the context short.")
    result = env.step(call("Summary_context", span="all"))
    obs = observation(result)
    assert not obs["ok"] and "unknown tool 'Summary_context'" in obs["message"]
    assert "available tools: Add_memory, Retrieve_memory" in obs["message"] and env.stats.summaries == []
    bare = make_env(EnvConfig(tools=[]))
    assert "tool_call" not in bare.context.system_prompt and "<answer>" in bare.context.system_prompt
    bare.add_user("What is 2 + 2?", question=True)
    assert "no tools are available" in observation(bare.step(call("Add_memory", content="x")))["message"]
    assert make_env(EnvConfig(tool_format="native", tools=[])).tools is None


def test_rag_retrieval_shows_memories_for_the_latest_message_once_per_change(make_env):
    env = make_env(EnvConfig(tools=["Add_memory", "Update_memory", "Delete_memory"], rag_top_k=2))
    assert "retrieved for you" in env.context.system_prompt
    env.add_user("Paris is the capital of France.")
    assert env.rag_retrieve() is None  # nothing stored yet
    env.step(call("Add_memory", content="Paris is the capital of France"))
    first = env.rag_retrieve()
    assert first is not None and first.query == "Paris is the capital of France."
    assert env.rag_retrieve() is None  # the same entries for the same message are not shown again
    env.add_user("What is the capital of France?", question=True)
    second = env.rag_retrieve()
    assert second is not None and second.contents == ["Paris is the capital of France"]
    shown = tool_messages(env)[-1]
    assert shown["source"] == "rag" and shown["memories"][0]["content"] == "Paris is the capital of France"
    assert env.stats.introspections == [first, second] and env.stats.retrievals == []
    assert make_env().rag_retrieve() is None  # rag_top_k = 0: off

import pytest

from agemem.core.chat import ChatTemplateTokenCounter, encode_chat
from agemem.core.context import SUMMARY_PREFIX, ShortTermContext
from agemem.core.tools import tool_schemas
from tests.conftest import RecordingSummarizer


def conversation() -> ShortTermContext:
    """system | r1: u a t | r2: u a | r3: question(protected) a."""
    context = ShortTermContext("SYSTEM")
    context.append("user", "first fact about paris")
    context.append("assistant", "storing it")
    context.append("tool", '{"ok": true}')
    context.append("user", "football scores from saturday")
    context.append("assistant", "ok")
    context.append("user", "what is the capital of france", kind="question", protected=True)
    context.append("assistant", "<tool_call>[...]</tool_call>")
    return context


def contents(messages):
    return [m.content for m in messages]


def test_rounds_follow_user_turns():
    context = conversation()
    assert [(m.role, m.round) for m in context.messages] == [
        ("system", 0), ("user", 1), ("assistant", 1), ("tool", 1), ("user", 2), ("assistant", 2),
        ("user", 3), ("assistant", 3),
    ]  # fmt: skip


def test_span_all_skips_system_protected_and_in_flight():
    context = conversation()
    context.begin_step(context.messages[-1])
    assert contents(context.select_span("all")) == [
        "first fact about paris", "storing it", '{"ok": true}', "football scores from saturday", "ok",
    ]  # fmt: skip


def test_span_n_selects_last_rounds():
    context = conversation()
    context.begin_step(context.messages[-1])
    # Round 3 holds only the protected question and the in-flight message, so it has nothing eligible;
    # the last rounds with eligible messages are 2 and then 1.
    assert contents(context.select_span("1")) == ["football scores from saturday", "ok"]
    assert len(context.select_span("2")) == 5
    assert len(context.select_span("99")) == 5
    with pytest.raises(ValueError):
        context.select_span("0")


def test_summarize_replaces_span_in_place_and_keeps_protected_messages():
    context = conversation()
    context.begin_step(context.messages[-1])
    summarizer = RecordingSummarizer("Paris fact stored; football chatter.")
    summary, replaced = context.summarize("all", summarizer)
    assert len(replaced) == 5 and contents(summarizer.seen[0]) == contents(replaced)
    assert [(m.role, m.kind) for m in context.messages] == [
        ("system", "system"),
        ("user", "summary"),
        ("user", "question"),
        ("assistant", "chat"),
    ]
    assert summary.content == SUMMARY_PREFIX + "Paris fact stored; football chatter."


def test_summarize_last_round_keeps_older_rounds_in_order():
    context = conversation()
    context.begin_step(context.messages[-1])
    context.summarize("1", RecordingSummarizer("S"))
    assert [m.kind if m.kind == "summary" else m.content for m in context.messages][:6] == [
        "SYSTEM", "first fact about paris", "storing it", '{"ok": true}', "summary", "what is the capital of france",
    ]  # fmt: skip


def test_summarize_empty_span_and_failing_summarizer_leave_context_untouched():
    context = ShortTermContext("SYSTEM")
    assert context.summarize("all", RecordingSummarizer()) is None
    context = conversation()
    before = contents(context.messages)
    with pytest.raises(RuntimeError):
        context.summarize("all", RecordingSummarizer(error=RuntimeError("endpoint down")))
    assert contents(context.messages) == before


def test_filter_threshold_is_inclusive(word_encoder):
    # criteria {paris, france}: "paris france" -> 1.0; "paris today" -> 1/sqrt(2*2) = 0.5;
    # "paris rome france" -> 2/sqrt(2*3) = 0.816; "football" -> 0.
    context = ShortTermContext("SYSTEM")
    for text in ("paris france", "paris today", "paris rome france", "football"):
        context.append("user", text)
    removed = context.filter("paris france", word_encoder, threshold=0.5)
    assert contents(m for m, _ in removed) == ["paris france", "paris today", "paris rome france"]
    assert [s for _, s in removed] == pytest.approx([1.0, 0.5, 2 / 6**0.5], abs=1e-6)
    assert contents(context.messages) == ["SYSTEM", "football"]


def test_filter_just_below_threshold_keeps_message(word_encoder):
    context = ShortTermContext("SYSTEM")
    context.append("user", "paris today")  # similarity 0.5 to the criteria
    assert context.filter("paris france", word_encoder, threshold=0.5001) == []


def test_filter_never_removes_system_prompt_question_or_in_flight_message(word_encoder):
    """Defect 7 of the reference code: its Filter could delete the system prompt and the live question."""
    context = ShortTermContext("capital of france")
    context.append("user", "capital of france", protected=True, kind="question")
    in_flight = context.append("assistant", "capital of france")
    context.begin_step(in_flight)
    context.append("tool", "capital of france")  # result of an earlier call in the same step
    assert context.filter("capital of france", word_encoder, threshold=0.0) == []
    assert len(context.messages) == 4
    context.end_step()
    assert contents(m for m, _ in context.filter("capital of france", word_encoder, 0.0)) == ["capital of france"] * 2


def test_reset_keeps_only_system_prompt_and_restarts_rounds():
    context = conversation()
    context.reset()
    assert contents(context.messages) == ["SYSTEM"]
    assert context.append("user", "hello").round == 1


def test_token_count_is_the_chat_template_length(qwen_tokenizer):
    """Defect 8 of the reference code: it counted characters / 4."""
    counter = ChatTemplateTokenCounter(qwen_tokenizer)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "hello"}]
    expected = qwen_tokenizer(
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
        add_special_tokens=False,
    )["input_ids"]
    assert counter.count(messages) == len(expected) == len(encode_chat(qwen_tokenizer, messages))
    # 3 specials + "system\nS" ... : a char/4 estimate (80 chars -> 20) would be wrong here.
    assert counter.count(messages) != len(qwen_tokenizer.apply_chat_template(messages, tokenize=False)) // 4
    # Tool schemas passed to the template (native format) are counted too.
    assert counter.count(messages, tool_schemas()) > counter.count(messages) + 200


# --------------------------------------------------------------------------------------------- long conversations


def test_the_oldest_round_goes_first_and_the_newest_and_protected_stay():
    context = conversation()
    assert contents(context.drop_oldest_round()) == ["first fact about paris", "storing it", '{"ok": true}']
    assert contents(context.drop_oldest_round()) == ["football scores from saturday", "ok"]
    # round 3 is the newest (its question is protected, its answer the newest round's): nothing more goes
    assert context.drop_oldest_round() == []
    assert contents(context.drop_oldest_round(keep_newest=False)) == ["<tool_call>[...]</tool_call>"]
    assert contents(context.messages) == ["SYSTEM", "what is the capital of france"]
    assert context.drop_oldest_round(keep_newest=False) == []


def test_a_context_survives_json_with_its_rounds_and_protection():
    import json

    context = conversation()
    context.drop_oldest_round()
    restored = ShortTermContext.from_json(json.loads(json.dumps(context.to_json())))
    fields = ("role", "content", "round", "stage", "kind", "protected", "name")
    assert [[getattr(m, f) for f in fields] for m in restored.messages] == [
        [getattr(m, f) for f in fields] for m in context.messages
    ]
    assert restored.append("user", "next").round == context.append("user", "next").round == 4
    assert restored.system_prompt == "SYSTEM"


def test_fit_context_drops_whole_rounds_until_the_incoming_message_fits(make_env):
    env = make_env()
    for n in range(6):
        env.context.append("user", f"session {n}: " + "words " * 200)
        env.context.append("assistant", "noted " * 20)
    incoming = "session 6: " + "words " * 200

    def prompt_tokens() -> int:  # the context with the incoming message, as the next prompt would render
        return env.resources.token_counter.count([*env.context.as_chat(), {"role": "user", "content": incoming}])

    budget = prompt_tokens() - 1  # one token too many: exactly the oldest round goes
    dropped = env.fit_context(budget, incoming)
    assert [m.content[:9] for m in dropped] == ["session 0", "noted not"]
    assert prompt_tokens() <= budget and env.context.messages[1].content.startswith("session 1")
    # nothing fits but the system prompt: everything unprotected goes, and the call still returns
    gone = env.fit_context(1, incoming)
    assert len(gone) == 10 and [m.role for m in env.context.messages] == ["system"]
    assert env.fit_context(10**6) == []

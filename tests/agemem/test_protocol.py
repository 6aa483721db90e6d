"""Tests for agemem.core.protocol: model text -> thought / tool calls / answer / violations.

Property tests call ``parse_response_strict`` (no safety net) so that a crash in the parser
shows up as a failure instead of being turned into an INVALID_JSON violation.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agemem.core import protocol
from agemem.core.protocol import (
    BAD_ARGUMENTS,
    INVALID_JSON,
    MULTIPLE_ANSWERS,
    NO_ACTION,
    NON_OBJECT_CALL,
    TEXT_OUTSIDE_TAGS,
    TOOL_CALL_AND_ANSWER,
    TRUNCATED,
    UNKNOWN_TOOL,
    VIOLATION_KINDS,
    ParsedResponse,
    decode_json_values,
    parse_response,
    parse_response_strict,
    recover_truncated_json,
)
from agemem.core.tools import TOOL_NAMES, ToolCall, tool_schemas

AVAILABLE = "Add_memory, Update_memory, Delete_memory, Retrieve_memory, Summary_context, Filter_context"
UNKNOWN_FOO = f"unknown tool 'Foo'; available tools: {AVAILABLE}"

# Independent validators built from the public schemas (not the module's cached ones).
SCHEMA_VALIDATORS = {s["function"]["name"]: Draft202012Validator(s["function"]["parameters"]) for s in tool_schemas()}

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tool_block(payload: Any) -> str:
    return f"<tool_call>{json.dumps(payload)}</tool_call>"


def call_tuples(parsed: ParsedResponse) -> list[tuple[str, dict[str, Any], str | None]]:
    return [(c.name, c.arguments, c.error) for c in parsed.tool_calls]


def check_invariants(parsed: ParsedResponse) -> None:
    """Structural invariants every parse of a str must satisfy."""
    assert isinstance(parsed, ParsedResponse)
    kinds = parsed.violation_kinds()
    assert all(kind in VIOLATION_KINDS for kind in kinds), kinds
    assert all(isinstance(v.detail, str) and v.detail for v in parsed.violations)
    assert parsed.answer is None or isinstance(parsed.answer, str)
    assert parsed.thought is None or isinstance(parsed.thought, str)
    for call in parsed.tool_calls:
        assert isinstance(call, ToolCall)
        assert isinstance(call.arguments, dict)
        assert call.valid is (call.error is None)
        # valid <=> a known tool whose normalised arguments satisfy its schema
        schema_ok = call.name in TOOL_NAMES and SCHEMA_VALIDATORS[call.name].is_valid(call.arguments)
        assert call.valid is schema_ok, (call, schema_ok)
        assert call.error is None or isinstance(call.error, str)
    assert parsed.valid_calls == [c for c in parsed.tool_calls if c.valid]
    # every invalid call is reported exactly once, as unknown_tool or bad_arguments, with its error as detail
    invalid_errors = Counter(c.error for c in parsed.tool_calls if not c.valid)
    call_level = Counter(v.detail for v in parsed.violations if v.kind in (UNKNOWN_TOOL, BAD_ARGUMENTS))
    assert invalid_errors == call_level
    for v in parsed.violations:
        if v.kind == UNKNOWN_TOOL:
            assert v.detail.startswith("unknown tool")
    if NO_ACTION in kinds:
        assert parsed.tool_calls == []
        assert parsed.answer is None
    if TOOL_CALL_AND_ANSWER in kinds or MULTIPLE_ANSWERS in kinds:
        assert parsed.answer is not None
    assert kinds.count(NO_ACTION) <= 1
    assert kinds.count(TOOL_CALL_AND_ANSWER) <= 1
    assert kinds.count(MULTIPLE_ANSWERS) <= 1
    assert kinds.count(TEXT_OUTSIDE_TAGS) <= 1


# --------------------------------------------------------------------------- 1. AgeMem format


def test_agemem_tool_call_list():
    text = (
        "<think>I should store this and then tidy the context.</think>\n"
        '<tool_call>[{"name": "Add_memory", "arguments": {"content": "Alice likes tea", "memory_type": "preference"}},'
        ' {"name": "Filter_context", "arguments": {"criteria": "weather chatter"}}]</tool_call>'
    )
    parsed = parse_response_strict(text)
    assert parsed.thought == "I should store this and then tidy the context."
    assert call_tuples(parsed) == [
        ("Add_memory", {"content": "Alice likes tea", "memory_type": "preference"}, None),
        ("Filter_context", {"criteria": "weather chatter"}, None),
    ]
    assert parsed.answer is None
    assert parsed.violation_kinds() == []
    assert parsed.valid_calls == parsed.tool_calls


def test_agemem_answer():
    parsed = parse_response_strict("<think>The capital of France.</think>\n<answer>Paris</answer>")
    assert parsed.thought == "The capital of France."
    assert parsed.answer == "Paris"
    assert parsed.tool_calls == []
    assert parsed.violation_kinds() == []


def test_answer_and_thought_are_stripped_and_thoughts_joined():
    parsed = parse_response_strict("<think> a </think>\n<think>b\n</think><answer>\n Paris \n</answer>")
    assert parsed.thought == "a\nb"
    assert parsed.answer == "Paris"
    assert parsed.violation_kinds() == []


def test_whitespace_between_tags_is_not_a_violation():
    parsed = parse_response_strict("\n  <think>x</think>\n\n\t<answer>y</answer>\n")
    assert parsed.violation_kinds() == []
    assert parsed.answer == "y"


# --------------------------------------------------------------------------- 2. Qwen-native form


def test_qwen_native_blocks():
    text = (
        "<think>two calls</think>\n"
        '<tool_call>\n{"name": "Retrieve_memory", "arguments": {"query": "Alice", "top_k": 2}}\n</tool_call>\n'
        '<tool_call>\n{"name": "Summary_context", "arguments": {"span": "all"}}\n</tool_call>'
    )
    parsed = parse_response_strict(text)
    assert parsed.thought == "two calls"
    assert call_tuples(parsed) == [
        ("Retrieve_memory", {"query": "Alice", "top_k": 2}, None),
        ("Summary_context", {"span": "all"}, None),
    ]
    assert parsed.violation_kinds() == []


def test_mixed_forms_keep_order():
    text = (
        '<tool_call>[{"name": "Add_memory", "arguments": {"content": "a"}},'
        ' {"name": "Add_memory", "arguments": {"content": "b"}}]</tool_call>\n'
        '<tool_call>\n{"name": "Filter_context", "arguments": {"criteria": "c"}}\n</tool_call>\n'
        '<tool_call>[{"name": "Summary_context", "arguments": {"span": "2"}}]</tool_call>'
    )
    parsed = parse_response_strict(text)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("Add_memory", {"content": "a"}),
        ("Add_memory", {"content": "b"}),
        ("Filter_context", {"criteria": "c"}),
        ("Summary_context", {"span": "2"}),
    ]
    assert parsed.violation_kinds() == []


def test_several_values_in_one_block_separated_by_commas_or_newlines():
    text = (
        '<tool_call>{"name": "Filter_context", "arguments": {"criteria": "a"}},\n'
        '{"name": "Filter_context", "arguments": {"criteria": "b"}} [{"name": "Filter_context",'
        ' "arguments": {"criteria": "c"}}]</tool_call>'
    )
    parsed = parse_response_strict(text)
    assert [c.arguments["criteria"] for c in parsed.tool_calls] == ["a", "b", "c"]
    assert parsed.violation_kinds() == []


# --------------------------------------------------------------------------- 3. single object in an AgeMem block


def test_single_object_in_agemem_block_is_parsed():
    # defect 6 of the authors' code: a bare object (not a list) in <tool_call> was silently ignored
    parsed = parse_response_strict(
        '<think>t</think><tool_call>{"name": "Delete_memory", "arguments": {"memory_id": "m7", "confirmation": true}}'
        "</tool_call>"
    )
    assert call_tuples(parsed) == [("Delete_memory", {"memory_id": "m7", "confirmation": True}, None)]
    assert parsed.violation_kinds() == []


# --------------------------------------------------------------------------- 4. arguments as a JSON string


def test_arguments_as_json_string_are_decoded():
    payload = {"name": "Update_memory", "arguments": json.dumps({"memory_id": "m1", "content": "new"})}
    parsed = parse_response_strict(tool_block(payload))
    assert call_tuples(parsed) == [("Update_memory", {"memory_id": "m1", "content": "new"}, None)]
    assert parsed.violation_kinds() == []


def test_arguments_as_json_string_then_normalised():
    payload = {"name": "Delete_memory", "arguments": '{"memory_id": "m1", "confirmed": "yes"}'}
    parsed = parse_response_strict(tool_block(payload))
    assert call_tuples(parsed) == [("Delete_memory", {"memory_id": "m1", "confirmation": True}, None)]


def test_arguments_empty_string_means_no_arguments():
    parsed = parse_response_strict(tool_block({"name": "Filter_context", "arguments": "  "}))
    assert call_tuples(parsed) == [("Filter_context", {}, "bad arguments for Filter_context: missing 'criteria'")]
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]


def test_arguments_string_that_is_not_an_object():
    parsed = parse_response_strict(tool_block({"name": "Filter_context", "arguments": "[1, 2]"}))
    assert call_tuples(parsed) == [("Filter_context", {}, "Filter_context arguments must be a JSON object, got str")]
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]


def test_arguments_string_cut_off_is_recovered_and_reported():
    parsed = parse_response_strict(tool_block({"name": "Filter_context", "arguments": '{"criteria": "x"'}))
    assert call_tuples(parsed) == [("Filter_context", {"criteria": "x"}, None)]
    assert parsed.violation_kinds() == [TRUNCATED]


def test_arguments_not_an_object():
    parsed = parse_response_strict(tool_block({"name": "Filter_context", "arguments": [1]}))
    assert call_tuples(parsed) == [("Filter_context", {}, "Filter_context arguments must be a JSON object, got list")]
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]


def test_arguments_null_or_missing_means_empty():
    for payload in ({"name": "Filter_context", "arguments": None}, {"name": "Filter_context"}):
        parsed = parse_response_strict(tool_block(payload))
        assert call_tuples(parsed) == [("Filter_context", {}, "bad arguments for Filter_context: missing 'criteria'")]


# --------------------------------------------------------------------------- 5. violations


def test_text_outside_tags():
    parsed = parse_response_strict("Sure! <think>t</think> <answer>a</answer> Hope that helps.")
    assert parsed.answer == "a"
    assert parsed.violation_kinds() == [TEXT_OUTSIDE_TAGS]
    assert parsed.violations[0].detail == "text outside tags: 'Sure! Hope that helps.'"


def test_stray_closing_tag_counts_as_outside_text():
    parsed = parse_response_strict("<answer>a</answer></think>")
    assert parsed.violation_kinds() == [TEXT_OUTSIDE_TAGS]


def test_tool_call_and_answer():
    text = '<think>t</think><tool_call>[{"name": "Filter_context", "arguments": {"criteria": "x"}}]</tool_call>'
    parsed = parse_response_strict(text + "<answer>a</answer>")
    # both are kept; the environment decides what to do with them
    assert call_tuples(parsed) == [("Filter_context", {"criteria": "x"}, None)]
    assert parsed.answer == "a"
    assert parsed.violation_kinds() == [TOOL_CALL_AND_ANSWER]


@pytest.mark.parametrize("text", ["", "   \n", "<think>only thinking</think>"])
def test_no_action(text):
    parsed = parse_response_strict(text)
    assert parsed.tool_calls == []
    assert parsed.answer is None
    assert parsed.violation_kinds() == [NO_ACTION]
    assert parsed.violations[0].detail == "no <tool_call> and no <answer>"


def test_plain_text_is_outside_tags_and_no_action():
    parsed = parse_response_strict("The answer is Paris.")
    assert parsed.violation_kinds() == [TEXT_OUTSIDE_TAGS, NO_ACTION]


def test_invalid_json():
    parsed = parse_response_strict("<tool_call>[{name: Filter_context}]</tool_call>")
    assert parsed.tool_calls == []
    assert parsed.violation_kinds() == [INVALID_JSON]
    assert parsed.violations[0].detail.startswith("invalid JSON in <tool_call>: ")


def test_invalid_json_keeps_calls_before_the_bad_part():
    # separate values: the first one decodes before the garbage stops the decoder
    text = (
        '<tool_call>{"name": "Filter_context", "arguments": {"criteria": "a"}}\n'
        '{"name": "Add_memory", "arguments": {"content": oops}}</tool_call>'
    )
    parsed = parse_response_strict(text)
    assert call_tuples(parsed) == [("Filter_context", {"criteria": "a"}, None)]
    assert parsed.violation_kinds() == [INVALID_JSON]
    assert parsed.violations[0].detail == "invalid JSON in <tool_call>: Expecting value"


def test_empty_tool_call_block():
    parsed = parse_response_strict("<tool_call> \n </tool_call>")
    assert parsed.violation_kinds() == [INVALID_JSON]
    assert parsed.violations[0].detail == "empty <tool_call> block"


def test_non_object_element_keeps_the_valid_call():
    # defect 6: the authors' code crashed the whole task on a non-object element
    parsed = parse_response_strict(
        '<tool_call>[3, {"name": "Filter_context", "arguments": {"criteria": "x"}}]</tool_call>'
    )
    assert call_tuples(parsed) == [("Filter_context", {"criteria": "x"}, None)]
    assert parsed.violation_kinds() == [NON_OBJECT_CALL]
    assert parsed.violations[0].detail == "a tool call must be an object, got 3"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ('"Filter_context"', "a tool call must be an object, got 'Filter_context'"),
        ("null", "a tool call must be an object, got null"),
        ('[[{"name": "Filter_context"}]]', 'a tool call must be an object, got [{"name": "Filter_context"}]'),
    ],
)
def test_non_object_values(body, detail):
    parsed = parse_response_strict(f"<tool_call>{body}</tool_call>")
    assert parsed.tool_calls == []
    assert parsed.violation_kinds() == [NON_OBJECT_CALL]
    assert parsed.violations[0].detail == detail


def test_unknown_tool_lists_available_tools():
    parsed = parse_response_strict(tool_block([{"name": "Foo", "arguments": {"x": 1}}]))
    assert call_tuples(parsed) == [("Foo", {}, UNKNOWN_FOO)]
    assert parsed.violation_kinds() == [UNKNOWN_TOOL]
    assert parsed.violations[0].detail == UNKNOWN_FOO
    assert parsed.valid_calls == []


def test_unknown_tool_respects_allowed_tools():
    parsed = parse_response_strict(
        tool_block({"name": "Add_memory", "arguments": {"content": "x"}}), allowed_tools=("Filter_context",)
    )
    assert call_tuples(parsed) == [("Add_memory", {}, "unknown tool 'Add_memory'; available tools: Filter_context")]
    assert parsed.violation_kinds() == [UNKNOWN_TOOL]


def test_unknown_tool_does_not_drop_valid_neighbours():
    parsed = parse_response_strict(
        tool_block([{"name": "Foo", "arguments": {}}, {"name": "Filter_context", "arguments": {"criteria": "x"}}])
    )
    assert [(c.name, c.valid) for c in parsed.tool_calls] == [("Foo", False), ("Filter_context", True)]
    assert [c.name for c in parsed.valid_calls] == ["Filter_context"]
    assert parsed.violation_kinds() == [UNKNOWN_TOOL]


@pytest.mark.parametrize(
    ("name", "arguments", "normalised", "error"),
    [
        ("Add_memory", {}, {}, "missing 'content'"),
        ("Update_memory", {"memory_id": "m1"}, {"memory_id": "m1"}, "missing 'content'"),
        ("Add_memory", {"content": 3}, {"content": 3}, "content: 3 is not of type 'string'"),
        ("Add_memory", {"content": ""}, {"content": ""}, "content: '' should be non-empty"),
        (
            "Add_memory",
            {"content": "x", "foo": 1},
            {"content": "x", "foo": 1},
            "unexpected argument(s) ('foo' was unexpected)",
        ),
        (
            "Add_memory",
            {"content": "x", "metadata": "tags"},
            {"content": "x", "metadata": "tags"},
            "metadata: 'tags' is not of type 'object'",
        ),
        ("Summary_context", {"span": "0"}, {"span": "0"}, "span: '0' does not match '^(all|[1-9][0-9]*)$'"),
        ("Summary_context", {"span": "abc"}, {"span": "abc"}, "span: 'abc' does not match '^(all|[1-9][0-9]*)$'"),
        # an integer span is stringified first, then fails the pattern
        ("Summary_context", {"span": 0}, {"span": "0"}, "span: '0' does not match '^(all|[1-9][0-9]*)$'"),
        ("Summary_context", {"span": True}, {"span": True}, "span: True is not of type 'string'"),
        (
            "Retrieve_memory",
            {"query": "q", "top_k": 0},
            {"query": "q", "top_k": 0},
            "top_k: 0 is less than the minimum of 1",
        ),
        (
            "Delete_memory",
            {"memory_id": "m1", "confirmation": "maybe"},
            {"memory_id": "m1", "confirmation": "maybe"},
            "confirmation: 'maybe' is not of type 'boolean'",
        ),
        ("Delete_memory", {"memory_id": "m1"}, {"memory_id": "m1"}, "missing 'confirmation'"),
    ],
)
def test_bad_arguments(name, arguments, normalised, error):
    parsed = parse_response_strict(tool_block([{"name": name, "arguments": arguments}]))
    assert call_tuples(parsed) == [(name, normalised, f"bad arguments for {name}: {error}")]
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]
    assert parsed.violations[0].detail == f"bad arguments for {name}: {error}"


@pytest.mark.parametrize("payload", [{"arguments": {"criteria": "x"}}, {"name": None}, {"name": ""}, {"name": 5}])
def test_missing_name_is_bad_arguments(payload):
    parsed = parse_response_strict(tool_block(payload))
    assert len(parsed.tool_calls) == 1
    assert parsed.tool_calls[0].error == 'the tool call has no "name" string'
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]


def test_truncated_unclosed_tag_with_complete_json():
    parsed = parse_response_strict(
        '<think>t</think><tool_call>[{"name": "Filter_context", "arguments": {"criteria": "x"}}]'
    )
    assert call_tuples(parsed) == [("Filter_context", {"criteria": "x"}, None)]
    assert parsed.violation_kinds() == [TRUNCATED]
    assert parsed.violations[0].detail == "<tool_call> is never closed"


def test_truncated_json_after_complete_object_is_recovered():
    # closed tag, but the list's "]" was lost (and a trailing comma left behind)
    parsed = parse_response_strict(
        '<tool_call>[{"name": "Filter_context", "arguments": {"criteria": "x"}},</tool_call>'
    )
    assert call_tuples(parsed) == [("Filter_context", {"criteria": "x"}, None)]
    assert parsed.violation_kinds() == [TRUNCATED]
    assert parsed.violations[0].detail == "JSON was cut off; recovered by closing its brackets"


def test_truncated_generation_reports_tag_and_json():
    # a generation cut at the token limit: no "]" and no closing tag -> both problems are reported
    parsed = parse_response_strict(
        '<tool_call>[{"name": "Add_memory", "arguments": {"content": "a"}}, '
        '{"name": "Filter_context", "arguments": {"criteria": "b"}'
    )
    assert call_tuples(parsed) == [("Add_memory", {"content": "a"}, None), ("Filter_context", {"criteria": "b"}, None)]
    assert parsed.violation_kinds() == [TRUNCATED, TRUNCATED]
    assert [v.detail for v in parsed.violations] == [
        "<tool_call> is never closed",
        "JSON was cut off; recovered by closing its brackets",
    ]


def test_truncated_inside_string_is_not_guessed():
    parsed = parse_response_strict('<tool_call>[{"name": "Add_memory", "arguments": {"content": "Alice li')
    assert parsed.tool_calls == []
    assert parsed.violation_kinds() == [TRUNCATED, INVALID_JSON]


def test_truncated_think_swallows_the_rest():
    parsed = parse_response_strict("<think>thinking... <answer>x</answer>")
    assert parsed.thought == "thinking... <answer>x</answer>"
    assert parsed.answer is None
    assert parsed.violation_kinds() == [TRUNCATED, NO_ACTION]
    assert parsed.violations[0].detail == "<think> is never closed"


def test_multiple_answers_first_is_used():
    parsed = parse_response_strict("<answer>first</answer><answer>second</answer>")
    assert parsed.answer == "first"
    assert parsed.violation_kinds() == [MULTIPLE_ANSWERS]
    assert parsed.violations[0].detail == "2 <answer> blocks; the first is used"


def test_multiple_answers_and_tool_call():
    text = '<answer>a</answer><tool_call>{"name": "Filter_context", "arguments": {"criteria": "x"}}</tool_call>'
    parsed = parse_response_strict(text + "<answer>b</answer>")
    assert parsed.answer == "a"
    assert parsed.violation_kinds() == [MULTIPLE_ANSWERS, TOOL_CALL_AND_ANSWER]


def test_every_violation_kind_is_reachable():
    samples = [
        "x <answer>a</answer>",
        '<tool_call>{"name": "Filter_context", "arguments": {"criteria": "x"}}</tool_call><answer>a</answer>',
        "<think>t</think>",
        "<tool_call>{]</tool_call>",
        "<tool_call>[1]</tool_call>",
        '<tool_call>{"name": "Foo"}</tool_call>',
        '<tool_call>{"name": "Filter_context"}</tool_call>',
        "<answer>a",
        "<answer>a</answer><answer>b</answer>",
    ]
    seen = {kind for text in samples for kind in parse_response_strict(text).violation_kinds()}
    assert seen == set(VIOLATION_KINDS)
    assert len(VIOLATION_KINDS) == 9


# --------------------------------------------------------------------------- 6. truncated-JSON recovery


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2, ", [1, 2]),  # the comma proves 2 was complete
        ('[{"a": 1}, {', [{"a": 1}]),  # an opener with nothing inside is dropped
        (
            '[{"name": "Filter_context", "arguments": {"criteria": "x"}}',
            [{"name": "Filter_context", "arguments": {"criteria": "x"}}],
        ),
        (
            '{"name": "Filter_context", "arguments": {"criteria": "x"',
            {"name": "Filter_context", "arguments": {"criteria": "x"}},
        ),
        ('[{"a": 1},', [{"a": 1}]),
        ('{"a": 1, ', {"a": 1}),
        ('{"a": [1, {"b": "}]"}', {"a": [1, {"b": "}]"}]}),  # brackets inside strings are ignored
        ('["a\\"b"', ['a"b']),  # escaped quote does not end the string
        ('{"a": true', {"a": True}),
    ],
)
def test_recover_truncated_json(text, expected):
    assert recover_truncated_json(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '["abc',  # cut inside a string
        '{"a": "x\\',  # cut right after a backslash, still inside the string
        '{"na',  # cut inside a key
        '{"a":',  # key with no value
        '{"a": ',  # key with no value, trailing space
        '{"a"',  # key with no colon
        "[1}",  # mismatched brackets
        '{"a": [1}',  # mismatched brackets
        "]",  # closer with nothing open
        "[1]",  # nothing left open
        '{"a": 1}',  # nothing left open
        "",
        "   ",
        "[tru",  # an incomplete literal
        "[1, 2",  # cut right after a digit: 2 may have been 20
        '{"top_k": 1',  # likewise
        "[[[",  # only openers: nothing was generated
        "[{",
        "[1, 2] [",  # closing alone does not make this one value
    ],
)
def test_recover_truncated_json_ambiguous_returns_none(text):
    assert recover_truncated_json(text) is None


def test_decode_json_values():
    assert decode_json_values('{"a": 1}, {"b": 2}\n[3]') == ([{"a": 1}, {"b": 2}, [3]], None)
    values, problem = decode_json_values('{"a": 1} nope')
    assert values == [{"a": 1}]
    assert (problem.kind, problem.detail) == (INVALID_JSON, "invalid JSON in <tool_call>: Expecting value")
    values, problem = decode_json_values('{"a": 1} [2, {"b": 3}')
    assert values == [{"a": 1}, [2, {"b": 3}]]
    assert problem.kind == TRUNCATED
    values, problem = decode_json_values(" \n ")
    assert values == []
    assert (problem.kind, problem.detail) == (INVALID_JSON, "empty <tool_call> block")


# --------------------------------------------------------------------------- 7. aliases


@pytest.mark.parametrize(
    ("name", "arguments", "canonical", "normalised"),
    [
        ("Clear_context", {"criteria": "ads"}, "Filter_context", {"criteria": "ads"}),
        (
            "Delete_memory",
            {"memory_id": "m1", "confirmed": True},
            "Delete_memory",
            {"memory_id": "m1", "confirmation": True},
        ),
        (
            "Delete_memory",
            {"memory_id": "m1", "confirmation": "yes"},
            "Delete_memory",
            {"memory_id": "m1", "confirmation": True},
        ),
        (
            "Delete_memory",
            {"memory_id": "m1", "confirmation": " TRUE "},
            "Delete_memory",
            {"memory_id": "m1", "confirmation": True},
        ),
        (
            "Delete_memory",
            {"memory_id": "m1", "confirmed": "no"},
            "Delete_memory",
            {"memory_id": "m1", "confirmation": False},
        ),
        ("Summary_context", {"span": "full"}, "Summary_context", {"span": "all"}),
        ("Summary_context", {"span": " ALL "}, "Summary_context", {"span": "all"}),
        ("Summary_context", {"span": 3}, "Summary_context", {"span": "3"}),
        ("Summary_context", {"span": " 12 "}, "Summary_context", {"span": "12"}),
        ("Retrieve_memory", {"query": "q", "top_k": "5"}, "Retrieve_memory", {"query": "q", "top_k": 5}),
        ("Retrieve_memory", {"query": "q", "top_k": " 7 "}, "Retrieve_memory", {"query": "q", "top_k": 7}),
    ],
)
def test_aliases(name, arguments, canonical, normalised):
    parsed = parse_response_strict(tool_block([{"name": name, "arguments": arguments}]))
    assert call_tuples(parsed) == [(canonical, normalised, None)]
    assert parsed.tool_calls[0].raw_name == name
    assert parsed.violation_kinds() == []


def test_alias_with_bad_arguments_reports_canonical_name():
    parsed = parse_response_strict(tool_block({"name": "Clear_context", "arguments": {}}))
    assert call_tuples(parsed) == [("Filter_context", {}, "bad arguments for Filter_context: missing 'criteria'")]
    assert parsed.tool_calls[0].raw_name == "Clear_context"


def test_top_k_non_numeric_string_is_left_for_validation():
    parsed = parse_response_strict(
        tool_block({"name": "Retrieve_memory", "arguments": {"query": "q", "top_k": "five"}})
    )
    assert call_tuples(parsed) == [
        (
            "Retrieve_memory",
            {"query": "q", "top_k": "five"},
            "bad arguments for Retrieve_memory: top_k: 'five' is not of type 'integer'",
        )
    ]


# --------------------------------------------------------------------------- 9. safety net


def test_parse_response_non_str_input():
    parsed = parse_response(None)
    assert isinstance(parsed, ParsedResponse)
    assert parsed.tool_calls == []
    assert parsed.answer is None
    assert parsed.violation_kinds() == [NO_ACTION]
    assert parsed.violations[0].detail == "expected text, got NoneType"
    assert parse_response(b"<answer>a</answer>").violations[0].detail == "expected text, got bytes"


def test_parse_response_turns_a_crash_into_a_violation(monkeypatch):
    def boom(text, allowed_tools):
        raise KeyError("x")

    monkeypatch.setattr(protocol, "parse_response_strict", boom)
    parsed = parse_response("<answer>a</answer>")
    assert parsed.tool_calls == []
    assert parsed.answer is None
    assert parsed.violation_kinds() == [INVALID_JSON]
    assert parsed.violations[0].detail == "unparseable response (KeyError)"


def test_parse_response_equals_strict_on_normal_input():
    text = '<think>t</think><tool_call>[{"name": "Clear_context", "arguments": {"criteria": "x"}}]</tool_call>'
    assert parse_response(text) == parse_response_strict(text)


# --------------------------------------------------------------------------- 8. property tests

VALID_RESPONSES = [
    "<think>I will store it.</think>\n"
    '<tool_call>[{"name": "Add_memory", "arguments": {"content": "Alice likes tea", "metadata": {"tags": ["person"]}}},'
    ' {"name": "Filter_context", "arguments": {"criteria": "small talk"}}]</tool_call>',
    "<think>Look it up.</think>\n"
    '<tool_call>\n{"name": "Retrieve_memory", "arguments": {"query": "Alice", "top_k": 3}}\n</tool_call>\n'
    '<tool_call>\n{"name": "Summary_context", "arguments": {"span": "all"}}\n</tool_call>',
    '<think>Fix it.</think><tool_call>[{"name": "Update_memory", "arguments": {"memory_id": "m1", "content": "x"}},'
    ' {"name": "Delete_memory", "arguments": {"memory_id": "m2", "confirmation": true}}]</tool_call>',
    '<tool_call>{"name": "Clear_context", "arguments": "{\\"criteria\\": \\"ads\\"}"}</tool_call>',
    "<think>Done.</think>\n<answer>Paris</answer>",
]

FRAGMENTS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "[",
    "]",
    "{",
    "}",
    '"',
    ",",
    ":",
    "\\",
    " ",
    "\n",
    "null",
    "true",
    "1",
    "-0",
    "1e999",
    '"name"',
    '"arguments"',
    '"Filter_context"',
    '"Add_memory"',
    '"Summary_context"',
    '"Retrieve_memory"',
    '"Delete_memory"',
    '"Clear_context"',
    '"criteria"',
    '"content"',
    '"span"',
    '"top_k"',
    '"query"',
    '"memory_id"',
    '"confirmed"',
    '"x"',
    '"all"',
    '"3"',
    '"yes"',
]


def test_valid_responses_are_valid():
    for text in VALID_RESPONSES:
        parsed = parse_response_strict(text)
        assert parsed.violation_kinds() == [], text
        assert parsed.tool_calls or parsed.answer


tag_soup = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=30).map("".join)


@PROPERTY_SETTINGS
@given(st.text())
def test_property_random_text(text):
    check_invariants(parse_response_strict(text))


@PROPERTY_SETTINGS
@given(tag_soup)
def test_property_tag_soup(text):
    check_invariants(parse_response_strict(text))


@st.composite
def mutated_responses(draw):
    text = draw(st.sampled_from(VALID_RESPONSES))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i, j = sorted((draw(st.integers(0, n)), draw(st.integers(0, n))))
        op = draw(st.sampled_from(["delete", "insert", "truncate", "duplicate", "swap"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.one_of(st.text(max_size=10), st.sampled_from(FRAGMENTS))) + text[i:]
        elif op == "truncate":
            text = text[:i]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif j < n:  # swap
            chars = list(text)
            chars[i], chars[j] = chars[j], chars[i]
            text = "".join(chars)
    return text


@PROPERTY_SETTINGS
@given(mutated_responses())
def test_property_mutated_valid_responses(text):
    check_invariants(parse_response_strict(text))


# Flat argument values only (no nested metadata) and single-digit integers: a cut inside a
# multi-digit number would be "recovered" as a shorter number, which is not a sub-dict.
_word = st.text(min_size=1, max_size=12).filter(lambda s: "</tool_call>" not in s)
generated_call = st.one_of(
    st.builds(lambda c, t: {"name": "Add_memory", "arguments": {"content": c, "memory_type": t}}, _word, _word),
    st.builds(lambda i, c: {"name": "Update_memory", "arguments": {"memory_id": i, "content": c}}, _word, _word),
    st.builds(
        lambda i, b: {"name": "Delete_memory", "arguments": {"memory_id": i, "confirmation": b}}, _word, st.booleans()
    ),
    st.builds(
        lambda q, k: {"name": "Retrieve_memory", "arguments": {"query": q, "top_k": k}}, _word, st.integers(1, 9)
    ),
    st.builds(lambda s: {"name": "Summary_context", "arguments": {"span": s}}, st.sampled_from(["all", "1", "2", "9"])),
    st.builds(lambda c: {"name": "Filter_context", "arguments": {"criteria": c}}, _word),
)


def check_truncation_of(parsed: ParsedResponse, calls: list[dict[str, Any]]) -> None:
    """A truncated response never invents a call: the calls found are a prefix of ``calls``, all complete but
    the last, which may carry a subset of its arguments (or, cut right after its "{", no name at all)."""
    check_invariants(parsed)
    found = [(c.name, c.arguments) for c in parsed.tool_calls]
    assert len(found) <= len(calls)
    expected = [(c["name"], c["arguments"]) for c in calls]
    if not found:
        return
    assert found[:-1] == expected[: len(found) - 1]
    last, original = parsed.tool_calls[-1], calls[len(found) - 1]
    if last.error == 'the tool call has no "name" string':
        assert last.arguments == {}
        return
    assert last.name == original["name"]
    assert all(original["arguments"].get(k, object()) == v for k, v in last.arguments.items())


@PROPERTY_SETTINGS
@given(st.lists(generated_call, min_size=1, max_size=4), st.booleans(), st.data())
def test_property_truncated_valid_response(calls, ensure_ascii, data):
    body = json.dumps(calls, ensure_ascii=ensure_ascii)
    text = f"<think>plan</think>\n<tool_call>{body}</tool_call>"
    full = parse_response_strict(text)
    assert [(c["name"], c["arguments"]) for c in calls] == [(c.name, c.arguments) for c in full.tool_calls]
    assert full.violation_kinds() == []
    cut = data.draw(st.integers(0, len(text)))
    check_truncation_of(parse_response_strict(text[:cut]), calls)


def test_truncated_at_every_index():
    calls = [
        {"name": "Add_memory", "arguments": {"content": 'Alice likes "tea" [}', "memory_type": "fact"}},
        {"name": "Delete_memory", "arguments": {"memory_id": "m2", "confirmation": True}},
        {"name": "Retrieve_memory", "arguments": {"query": "tea", "top_k": 4}},
    ]
    text = f"<think>plan</think><tool_call>{json.dumps(calls)}</tool_call>"
    for cut in range(len(text) + 1):
        check_truncation_of(parse_response_strict(text[:cut]), calls)
    # only the closing tag missing: everything is kept
    head = text[: -len("</tool_call>")]
    parsed = parse_response_strict(head)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(c["name"], c["arguments"]) for c in calls]
    assert parsed.violation_kinds() == [TRUNCATED]
    # cut right after the first object: recovered by closing the list
    first_end = text.index("}}") + 2
    parsed = parse_response_strict(text[:first_end])
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(calls[0]["name"], calls[0]["arguments"])]
    assert parsed.violation_kinds() == [TRUNCATED, TRUNCATED]


@pytest.mark.parametrize(
    ("body", "closed", "kinds"),
    [
        ("[" * 5000, True, [INVALID_JSON]),
        ("[" * 5000, False, [TRUNCATED, INVALID_JSON]),
        ("{" * 5000, True, [INVALID_JSON]),
        ('[{"a":' * 3000, True, [INVALID_JSON]),
        ("[" * 5000 + "]" * 5000, True, [INVALID_JSON]),
        ('{"name": "Add_memory", "arguments": {"content": ' + "[" * 5000 + "]" * 5000 + "}}", True, [INVALID_JSON]),
        ("[" * 100_000, True, [INVALID_JSON]),
    ],
)
def test_deep_nesting_never_raises(body, closed, kinds):
    # json's C decoder hits the recursion limit; this must become a violation, not a RecursionError
    text = f"<tool_call>{body}</tool_call>" if closed else f"<tool_call>{body}"
    parsed = parse_response_strict(text)
    assert parsed.tool_calls == []
    assert parsed.violation_kinds() == kinds
    assert recover_truncated_json(body) is None


# --------------------------------------------------------------------------- regressions (bugs found and fixed)


@pytest.mark.parametrize("top_k", ["²", "①"])
def test_regression_top_k_unicode_digit_string(top_k):
    # str.isdigit() accepts these but int() does not: the ValueError used to escape and drop every call.
    payload = [
        {"name": "Filter_context", "arguments": {"criteria": "x"}},
        {"name": "Retrieve_memory", "arguments": {"query": "q", "top_k": top_k}},
    ]
    parsed = parse_response_strict(tool_block(payload))
    assert [c.valid for c in parsed.tool_calls] == [True, False]
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]


def test_regression_nesting_just_under_recursion_limit():
    limit = sys.getrecursionlimit()
    for depth in range(limit // 2, limit + 20):
        nested = "[" * depth + "]" * depth
        # a deep non-object element (-> _preview's json.dumps) and a deep wrongly-typed argument (-> jsonschema repr)
        for body in (
            f"[{nested}]",
            '{"name": "Retrieve_memory", "arguments": {"query": "q", "metadata_filter": ' + nested + "}}",
        ):
            check_invariants(parse_response_strict(f"<tool_call>{body}</tool_call>"))


def test_regression_unknown_tool_with_string_arguments():
    parsed = parse_response_strict(tool_block({"name": "Foo", "arguments": "nope"}))
    assert parsed.violation_kinds() == [UNKNOWN_TOOL]
    assert parsed.tool_calls[0].error == UNKNOWN_FOO


def test_regression_alias_not_resolved_with_string_arguments():
    parsed = parse_response_strict(tool_block({"name": "Clear_context", "arguments": "nope"}))
    assert parsed.tool_calls[0].name == "Filter_context"
    assert parsed.tool_calls[0].raw_name == "Clear_context"
    assert parsed.violation_kinds() == [BAD_ARGUMENTS]


def test_regression_empty_call_list_is_silent():
    parsed = parse_response_strict("<think>t</think><tool_call>[]</tool_call>")
    assert parsed.tool_calls == []
    # which kind a fix uses is open; what matters is that something is reported
    assert parsed.violation_kinds() in ([NO_ACTION], [INVALID_JSON])

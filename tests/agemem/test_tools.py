import json

import pytest
from jsonschema import Draft202012Validator

from agemem.core.prompts import system_prompt, template_tools
from agemem.core.tools import TOOL_NAMES, make_call, schemas_json, tool_schemas


def test_six_tools_with_the_papers_names_and_valid_schemas():
    assert TOOL_NAMES == (
        "Add_memory", "Update_memory", "Delete_memory", "Retrieve_memory", "Summary_context", "Filter_context",
    )  # fmt: skip
    for schema in tool_schemas():
        Draft202012Validator.check_schema(schema["function"]["parameters"])
    assert [json.loads(line)["function"]["name"] for line in schemas_json().splitlines()] == list(TOOL_NAMES)
    required = {s["function"]["name"]: s["function"]["parameters"]["required"] for s in tool_schemas()}
    assert required == {
        "Add_memory": ["content"], "Update_memory": ["memory_id", "content"],
        "Delete_memory": ["memory_id", "confirmation"], "Retrieve_memory": ["query"],
        "Summary_context": ["span"], "Filter_context": ["criteria"],
    }  # fmt: skip


def test_schemas_are_copies():
    tool_schemas()[0]["function"]["name"] = "changed"
    assert tool_schemas()[0]["function"]["name"] == "Add_memory"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("Clear_context", {"criteria": "x"}, ("Filter_context", {"criteria": "x"})),
        (
            "Delete_memory",
            {"memory_id": "m", "confirmed": True},
            ("Delete_memory", {"memory_id": "m", "confirmation": True}),
        ),
        (
            "Delete_memory",
            {"memory_id": "m", "confirmation": "yes"},
            ("Delete_memory", {"memory_id": "m", "confirmation": True}),
        ),
        ("Summary_context", {"span": "full"}, ("Summary_context", {"span": "all"})),
        ("Summary_context", {"span": 4}, ("Summary_context", {"span": "4"})),
        ("Retrieve_memory", {"query": "q", "top_k": "5"}, ("Retrieve_memory", {"query": "q", "top_k": 5})),
    ],
)
def test_accepted_spellings_are_normalised(name, arguments, expected):
    call = make_call(name, arguments)
    assert call.valid and (call.name, call.arguments) == expected and call.raw_name == name


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("Add_memory", {}, "missing 'content'"),
        ("Add_memory", {"content": "x", "colour": "red"}, "unexpected argument"),
        ("Add_memory", {"content": 5}, "content: 5 is not of type 'string'"),
        ("Delete_memory", {"memory_id": "m", "confirmation": "maybe"}, "confirmation"),
        ("Summary_context", {"span": "0"}, "span"),
        ("Summary_context", {"span": "last"}, "span"),
        ("Retrieve_memory", {"query": "q", "top_k": 0}, "top_k"),
        ("Filter_context", [], "must be a JSON object"),
        ("Forget", {}, "unknown tool 'Forget'; available tools: Add_memory"),
        (None, {}, 'no "name"'),
    ],
)
def test_invalid_calls_carry_an_error_naming_the_problem(name, arguments, fragment):
    call = make_call(name, arguments)
    assert not call.valid and fragment in call.error


def test_system_prompts_for_both_tool_formats():
    agemem = system_prompt("agemem")
    assert all(f'"name": "{name}"' in agemem for name in TOOL_NAMES) and "<answer>" in agemem
    native = system_prompt("native")
    assert '"parameters"' not in native and "<tool_call>" in native
    assert template_tools("agemem") is None and len(template_tools("native")) == 6
    assert system_prompt("agemem", override="Custom.\n{tools}").startswith('Custom.\n{"type": "function"')

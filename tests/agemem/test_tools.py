import json

import pytest
from jsonschema import Draft202012Validator

from agemem.core.prompts import system_prompt, template_tools
from agemem.core.tools import TOOL_NAMES, make_call, schemas_json, tool_schemas


def test_six_tools_with_the_papers_names_and_valid_schemas():
    assert TOOL_NAMES == (
        "Add_memory", "Update_memory", "Delete_memory", "Retrieve_memory", "Summary_context", "Filter_context",
    )  # fmt: skip
    for schema in tool_schemas():  # Merge_memory (registered, not a default tool) included
        Draft202012Validator.check_schema(schema["function"]["parameters"])
    assert [json.loads(line)["function"]["name"] for line in schemas_json(TOOL_NAMES).splitlines()] == list(TOOL_NAMES)
    required = {s["function"]["name"]: s["function"]["parameters"]["required"] for s in tool_schemas(TOOL_NAMES)}
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


def test_merge_memory_keeps_the_first_entry_with_the_merged_text_and_deletes_the_others(make_env):
    from agemem.core.config import EnvConfig

    env = make_env(EnvConfig(tools=[*TOOL_NAMES, "Merge_memory"]))
    ids = [env.ltm.add(text, scope=env.scope).entries[0].id for text in ("Ada lives in Oslo", "Ada moved", "Bo")]

    def merge(arguments):
        call = json.dumps([{"name": "Merge_memory", "arguments": arguments}])
        (result,) = env.step(f"<think>t</think><tool_call>{call}</tool_call>").tool_results
        return result.payload

    refused = merge({"memory_ids": [ids[0], "mem_nope"], "content": "x"})
    assert refused["ok"] is False and "mem_nope" in refused["message"]
    assert merge({"memory_ids": [ids[0], ids[0]], "content": "x"})["message"] == "give at least two distinct memory_ids"
    assert [e.content for e in env.ltm.entries(scope=env.scope)] == ["Ada lives in Oslo", "Ada moved", "Bo"]
    merged = merge({"ids": ids[:2], "content": "Ada lives in Bergen (moved from Oslo)"})  # ids: an alias
    assert merged["ok"] and merged["message"] == f"merged 2 entries into {ids[0]} (deleted {ids[1]})"
    held = {e.id: e.content for e in env.ltm.entries(scope=env.scope)}
    assert held == {ids[0]: "Ada lives in Bergen (moved from Oslo)", ids[2]: "Bo"}
    # booked as the verbs it is: one update (with the text it replaced) and one delete
    ops = [(op.op, op.ok, op.memory_id, op.previous_content) for op in env.stats.memory_ops if op.ok]
    assert ops == [("update", True, ids[0], "Ada lives in Oslo"), ("delete", True, ids[1], None)]

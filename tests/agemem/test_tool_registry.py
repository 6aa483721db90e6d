"""One tool registry, one executor, one memory interface.

A new tool is ONE :func:`agemem.core.tools.register` call: it is then offered, parsed, validated and executed in
the training environment and on the streaming benchmark's bank alike, with the same result. And every memory
backend (in RAM, SQLite, the stream's experience bank) passes the same :class:`MemoryStore` checks, so the memory
tools written against that protocol run on each of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from agemem.core.config import EnvConfig
from agemem.core.ltm import LongTermMemory
from agemem.core.memory import DEFAULT_SCOPE, MemoryResult, MemoryStore
from agemem.core.memory_store import SQLiteLongTermMemory
from agemem.core.protocol import parse_response
from agemem.core.tools import TOOL_NAMES, TOOLS, MemoryEvent, ToolCall, execute, make_call, register, unregister
from agemem.eval.stream.agent import MEMORY_TOOLS, BankTools, StreamPlay
from agemem.eval.stream.bank import BankMemory, MemoryBank, Record
from tests.conftest import WordSetEncoder

COUNT_SCHEMA = {
    "type": "function",
    "function": {
        "name": "Count_memory",
        "description": "Count the long-term memory entries whose id starts with a prefix.",
        "parameters": {
            "type": "object",
            "properties": {"prefix": {"type": "string", "description": "Only ids starting with it (default: all)."}},
            "additionalProperties": False,
        },
    },
}


def count_memory(session, prefix: str = "") -> dict[str, Any]:
    """The toy tool's handler: it sees only the session's MemoryStore, so it runs on any backend."""
    count = sum(1 for memory_id in session.memory.ids(scope=session.scope) if memory_id.startswith(prefix))
    return {"ok": True, "message": f"{count} memor{'y' if count == 1 else 'ies'}", "count": count}


@pytest.fixture
def count_tool():
    tool = register(COUNT_SCHEMA, count_memory, aliases={"starts_with": "prefix"})
    yield tool
    unregister(tool.name)
    assert "Count_memory" not in TOOLS


def _calls(*calls: tuple[str, dict[str, Any]]) -> str:
    return "<think>t</think><tool_call>" + json.dumps([{"name": n, "arguments": a} for n, a in calls]) + "</tool_call>"


SCRIPT = _calls(
    ("Add_memory", {"content": "Ada Quill lives in Oslo"}),
    ("Count_memory", {"starts_with": "mem_"}),
    ("Count_memory", {"prefix": 3}),
)


def test_a_registered_tool_is_offered_parsed_and_run_alike_in_the_env_and_on_the_stream_bank(count_tool, make_env):
    # the training environment: offered when the config lists it, in its prompt, run by the env's executor
    env = make_env(EnvConfig(tools=[*TOOL_NAMES, "Count_memory"]))
    assert env.offered[-1] == "Count_memory" and '"name": "Count_memory"' in env.context.messages[0].content
    env.add_user("Remember: Ada Quill lives in Oslo.")
    env_results = [json.loads(r.to_text()) for r in env.step(SCRIPT).tool_results]

    # the streaming benchmark: the same tool offered to a policy on the experience bank, in a stream task's env
    bank = MemoryBank(WordSetEncoder())

    def write(content: str, metadata: dict[str, Any]) -> Record:
        return bank.add(Record(f"mem_{len(bank):08d}", "the task", content, "t", 0, "policy", metadata=metadata))

    offered = (*MEMORY_TOOLS, "Count_memory")
    play = StreamPlay()
    stream_env = play.env(BankTools(bank, write, offered), play.setup(lambda *args: None, 2), "")
    assert '"name": "Count_memory"' in stream_env.context.messages[0].content
    bank_results = [json.loads(r.to_text()) for r in stream_env.step(SCRIPT).tool_results]

    count, bad = {"tool": "Count_memory", "ok": True, "message": "1 memory", "count": 1}, env_results[2]
    assert env_results[1] == bank_results[1] == count  # parsed (alias), executed and shaped the same
    assert bad == bank_results[2] and not bad["ok"] and bad["message"].startswith("bad arguments for Count_memory")
    assert env.stats.tool_counts["Count_memory"] == 2 and len(bank) == 1


def test_a_tool_the_session_does_not_offer_is_an_unknown_tool_even_when_registered(count_tool):
    tools = BankTools(MemoryBank(WordSetEncoder()), lambda content, metadata: None)  # type: ignore[arg-type,return-value]
    valid_elsewhere = make_call("Count_memory", {}, (*MEMORY_TOOLS, "Count_memory"))
    assert tools.run(valid_elsewhere) == {
        "ok": False,
        "message": "unknown tool 'Count_memory'; available tools: Add_memory, Delete_memory",
    }
    assert parse_response(_calls(("Count_memory", {})), tools.offered).tool_calls[0].error.startswith("unknown tool")


def test_registering_a_name_twice_is_an_error(count_tool):
    with pytest.raises(ValueError, match="already registered"):
        register(COUNT_SCHEMA, count_memory)


# ------------------------------------------------------------------------------------------ the memory protocol


@pytest.fixture(params=["ram", "sqlite", "stream_bank"])
def store(request, tmp_path):
    encoder = WordSetEncoder()
    if request.param == "ram":
        yield LongTermMemory(encoder)
    elif request.param == "sqlite":
        with SQLiteLongTermMemory(encoder, tmp_path / "memory.sqlite") as sqlite_store:
            yield sqlite_store
    else:
        yield BankMemory(MemoryBank(encoder))


def _shape(result: MemoryResult) -> tuple[str, bool, list[str]]:
    return result.op, result.ok, sorted(result.to_observation())


def test_every_backend_passes_the_same_protocol_checks(store):
    assert isinstance(store, MemoryStore) and len(store) == 0 and store.ids() == []
    added = store.add("Ada Quill lives in Oslo", {"tags": ["person"]})
    (ada,) = added.entries
    assert _shape(added) == ("add", True, ["memories", "message", "ok"])
    assert added.message == f"stored 1 memory entry: {ada.id}" and ada.id.startswith("mem_")
    other = store.add("Bob Stone drinks green tea").entries[0].id
    assert store.ids() == [ada.id, other] and len(store) == 2

    found = store.retrieve("Ada Quill Oslo", top_k=1)  # search finds it
    assert _shape(found) == ("retrieve", True, ["memories", "message", "ok"]) and found.message == "1 memory retrieved"
    assert [e.id for e in found.entries] == [ada.id] and len(found.scores) == 1 and found.scores[0] > 0

    updated = store.update(ada.id, "Ada Quill lives in Bergen", {"city": "Bergen"})  # update changes content
    assert _shape(updated) == ("update", True, ["memories", "message", "ok"]) and updated.message == f"updated {ada.id}"
    now = store.get(ada.id)
    assert now.content == "Ada Quill lives in Bergen" and now.metadata["city"] == "Bergen"
    assert now.metadata["tags"] == ["person"]

    deleted = store.delete(ada.id)  # delete removes it
    assert _shape(deleted) == ("delete", True, ["memories", "message", "ok"]) and deleted.message == f"deleted {ada.id}"
    assert [e.id for e in deleted.entries] == [ada.id] and store.get(ada.id) is None and store.ids() == [other]

    for missing in (store.delete(ada.id), store.update(ada.id, "x")):
        assert _shape(missing)[1:] == (False, ["message", "ok"])
        assert missing.message.startswith(f"no memory with id {ada.id!r}; recent ids: {other}")


@dataclass
class PlainSession:
    """The smallest ToolSession: a store and a scope, the agent's metadata as given, the store's results shown."""

    memory: MemoryStore
    scope: str = DEFAULT_SCOPE
    offered: tuple[str, ...] = ("Add_memory", "Update_memory", "Delete_memory", "Retrieve_memory")
    default_top_k: int = 3

    def metadata_for(self, tool: str, metadata: dict[str, Any] | None, memory_type: str | None = None):
        return {**(metadata or {}), **({"memory_type": memory_type} if memory_type else {})}

    def settle(self, event: MemoryEvent) -> dict[str, Any]:
        return event.result.to_observation()


def test_the_one_executor_runs_the_memory_tools_on_every_backend(store):
    session = PlainSession(store)

    def run(name: str, **arguments: Any) -> dict[str, Any]:
        call = make_call(name, arguments, session.offered)
        assert isinstance(call, ToolCall) and call.valid, call.error
        return execute(session, call).payload  # type: ignore[union-attr]

    stored = run("Add_memory", content="Ada Quill lives in Oslo", memory_type="fact")
    memory_id = stored["memories"][0]["memory_id"]
    assert stored["ok"] and store.get(memory_id).metadata["memory_type"] == "fact"
    found = run("Retrieve_memory", query="Ada Quill Oslo")
    assert [m["memory_id"] for m in found["memories"]] == [memory_id] and set(found["memories"][0]) == {
        "memory_id", "content", "metadata", "score",
    }  # fmt: skip
    assert run("Update_memory", memory_id=memory_id, content="Ada Quill lives in Bergen")["ok"]
    unconfirmed = run("Delete_memory", memory_id=memory_id, confirmation="no")
    assert unconfirmed == {
        "ok": False,
        "message": 'deletion not confirmed: call Delete_memory again with "confirmation": true',
    }
    assert run("Delete_memory", memory_id=memory_id, confirmed=True)["ok"] and len(store) == 0


def test_a_registered_tool_stays_offered_in_evaluation_and_its_calls_count(count_tool):
    from agemem.core.configlib import load_config
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.eval.metrics import count_tool_calls, mean_tool_calls
    from agemem.eval.variants import apply_variant
    from agemem.rollouts.records import Step

    config = load_config(AgeMemConfig, overrides=[f"env.tools={json.dumps([*TOOL_NAMES, 'Count_memory'])}"])
    assert apply_variant(config, "agemem").env.tools == [*TOOL_NAMES, "Count_memory"]
    assert "Count_memory" not in apply_variant(config, "ltm_only").env.tools  # the ablations keep their own sets
    calls = [{"name": "Count_memory", "arguments": {}}, {"name": "Add_memory", "arguments": {"content": "x"}}]
    step = Step(3, "action", 0, [1], [2], [-0.1], "stop", "p", "c", tool_calls=calls)
    counts = count_tool_calls([step], [*TOOL_NAMES, "Count_memory"])
    assert counts["Count_memory"] == 1 and counts["Add_memory"] == 1 and counts["total"] == 2
    assert count_tool_calls([step])["total"] == 1  # not offered: an unknown-tool error, not a call
    assert mean_tool_calls([counts, count_tool_calls([])])["Count_memory"] == 0.5

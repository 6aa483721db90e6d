"""The memory tools: one registry of (schema, handler), the call validation and the one executor.

A tool is ONE :func:`register` call: its JSON schema (OpenAI function format, so the same schema goes into the
system prompt in tool format ``agemem``, as the paper, or into a chat template's ``tools=`` in ``native``), its
handler, and optionally how to normalise its arguments. Everything else follows from the registry: the prompt
offers it (:func:`tool_schemas`), the parser accepts and validates it (:func:`make_call`), and :func:`execute`
runs it for any :class:`ToolSession`: the training environment (:class:`~agemem.core.env.MemoryEnv`, which
:class:`~agemem.entrypoints.agent.MemoryAgent` drives) and the streaming benchmark's ``BankTools`` alike.

Long-term memory handlers speak only to the session's :class:`~agemem.core.memory.MemoryStore`, so they run
unchanged on every backend; what differs between sessions (the metadata an Add stamps, the bookkeeping and the
shape of the observation) is the session's :meth:`ToolSession.metadata_for` and :meth:`ToolSession.settle`.
Short-term-memory tools act on the session's own context, which only the environment has (:class:`ContextSession`).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from agemem.core.memory import MemoryEntry, MemoryResult, MemoryStore, unknown_id_message

TOOL_SCHEMAS: list[dict[str, Any]] = [  # the built-in six, registered below with their handlers
    {
        "type": "function",
        "function": {
            "name": "Add_memory",
            "description": "Store a new fact in long-term memory so it can be retrieved in later turns or tasks.",
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The fact to store, self-contained and concise.",
                    },
                    "metadata": {
                        "type": "object",
                        "description": 'Optional key/value labels, e.g. {"tags": ["person"]}.',
                    },
                    "memory_type": {
                        "type": "string",
                        "description": "Optional category, e.g. fact, preference, episode.",
                    },
                },
                "required": ["content"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Update_memory",
            "description": "Replace the content of an existing long-term memory entry, e.g. to correct or merge it.",
            "parameters": {
                "type": "object",
                "properties": {
                    "memory_id": {
                        "type": "string",
                        "description": "Id of the entry, as shown when it was added or retrieved.",
                    },
                    "content": {"type": "string", "minLength": 1, "description": "The new content."},
                    "metadata": {"type": "object", "description": "Optional labels merged into the entry's metadata."},
                },
                "required": ["memory_id", "content"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Delete_memory",
            "description": "Remove an outdated or wrong entry from long-term memory.",
            "parameters": {
                "type": "object",
                "properties": {
                    "memory_id": {"type": "string", "description": "Id of the entry to delete."},
                    "confirmation": {"type": "boolean", "description": "Must be true to delete."},
                },
                "required": ["memory_id", "confirmation"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Retrieve_memory",
            "description": "Search long-term memory and bring the most relevant entries into the context.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                    "top_k": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "How many entries to return (default 3).",
                    },
                    "metadata_filter": {
                        "type": "object",
                        "description": "Optional: only entries whose metadata match these key/value pairs.",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Summary_context",
            "description": "Compress part of the conversation into one summary message to free context space.",
            "parameters": {
                "type": "object",
                "properties": {
                    "span": {
                        "type": "string",
                        "pattern": "^(all|[1-9][0-9]*)$",
                        "description": "'all' for the whole conversation, or a number N for the last N rounds.",
                    },
                },
                "required": ["span"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Filter_context",
            "description": "Remove messages similar to the criteria (irrelevant or distracting content).",
            "parameters": {
                "type": "object",
                "properties": {
                    "criteria": {"type": "string", "minLength": 1, "description": "Describes the content to remove."},
                },
                "required": ["criteria"],
                "additionalProperties": False,
            },
        },
    },
]

TOOL_NAMES: tuple[str, ...] = tuple(s["function"]["name"] for s in TOOL_SCHEMAS)
"""the built-in tools in canonical order: the default ``env.tools``."""
MERGE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "Merge_memory",
        "description": "Merge several long-term memory entries into one: the first id keeps the merged content, the "
        "others are deleted.",
        "parameters": {
            "type": "object",
            "properties": {
                "memory_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 2,
                    "description": "The entries to merge, the one to keep first.",
                },
                "content": {"type": "string", "minLength": 1, "description": "The merged entry's content."},
            },
            "required": ["memory_ids", "content"],
            "additionalProperties": False,
        },
    },
}
"""a registered tool beyond the paper's six (offered where listed: ReMem's Refine on the stream's bank; in
``env.tools`` like any other)."""
LTM_TOOLS = ("Add_memory", "Update_memory", "Delete_memory")
PAPER_STAGE_TOOLS: dict[int, tuple[str, ...]] = {
    1: LTM_TOOLS,
    2: ("Summary_context", "Filter_context"),
    3: ("Retrieve_memory", "Summary_context"),
}
"""the tools each stage offers under ``rollout.stage_tools=paper`` (paper Appendix A.3, Algorithms 3-5: Stage 1
builds LTM with Add/Update/Delete, Stage 2 uses Filter/Summary against distractors, Stage 3 uses Retrieve and
Summary), each further limited to ``env.tools``."""
NAME_ALIASES = {"Clear_context": "Filter_context"}
NOT_CONFIRMED = 'deletion not confirmed: call Delete_memory again with "confirmation": true'
_TRUE_WORDS = {"true": True, "yes": True, "false": False, "no": False}
_ASCII_INT = re.compile(r"\s*[0-9]+\s*")  # not str.isdigit(): it accepts "²", which int() rejects

Payload = dict[str, Any]
"""what the agent sees of one call: ``ok``, ``message`` and tool-specific fields."""
Handler = Callable[..., "Payload | Generator[Any, Any, Payload]"]
"""``handler(session, **arguments)``: the payload, or a generator returning it (a tool that must wait for text)."""


@dataclass
class ToolCall:
    name: str
    """canonical tool name (aliases resolved); the raw name when unknown."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """normalised arguments."""
    error: str | None = None
    """why the call cannot run (unknown tool, bad arguments); None when valid."""
    raw_name: str = ""

    @property
    def valid(self) -> bool:
        return self.error is None


@dataclass
class ToolResult:
    name: str
    ok: bool
    payload: Payload
    """what the agent sees: ok, message, and tool-specific fields."""

    def to_text(self) -> str:
        return json.dumps({"tool": self.name, **self.payload}, ensure_ascii=False)


@dataclass(frozen=True)
class Tool:
    """One registered tool: everything the prompt, the parser and the executor need to know about it."""

    schema: dict[str, Any]
    handler: Handler
    normalise: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """accepted spellings of argument values turned into the schema's (before validation)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """accepted argument names → the schema's (models trained on other spellings)."""

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]

    @cached_property
    def validator(self) -> Any:
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self.schema["function"]["parameters"])


TOOLS: dict[str, Tool] = {}
"""the registry, in the canonical order tools are offered in."""


def register(
    schema: dict[str, Any],
    handler: Handler,
    *,
    normalise: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    aliases: dict[str, str] | None = None,
) -> Tool:
    """Add a tool: from now on it can be offered, parsed, validated and executed in every session."""
    tool = Tool(copy.deepcopy(schema), handler, normalise, dict(aliases or {}))
    if tool.name in TOOLS:
        raise ValueError(f"tool {tool.name!r} is already registered; unregister it first")
    TOOLS[tool.name] = tool
    return tool


def unregister(name: str) -> None:
    """Forget a tool (a test's or a plugin's); the built-ins are not meant to go."""
    TOOLS.pop(name, None)


# ------------------------------------------------------------------------------------------ sessions


@dataclass(frozen=True)
class MemoryEvent:
    """One memory verb a handler ran, as its session's bookkeeping and observation see it."""

    tool: str
    result: MemoryResult
    arguments: dict[str, Any]
    """the arguments the verb ran with (Retrieve_memory's default top_k resolved)."""
    previous: MemoryEntry | None = None
    """the entry as it was before an Update_memory (None when the id is unknown)."""


class ToolSession(Protocol):
    """Who runs the tools: a memory backend and a scope in it, plus what differs between sessions."""

    offered: tuple[str, ...]
    """the tools this session's agent may call."""
    scope: str

    @property
    def memory(self) -> MemoryStore: ...

    @property
    def default_top_k(self) -> int:
        """Retrieve_memory's top_k when the agent gives none."""
        ...

    def metadata_for(self, tool: str, metadata: dict[str, Any] | None, memory_type: str | None = None) -> Payload:
        """The metadata an Add_memory / Update_memory stores, from the agent's (each session owns some keys)."""
        ...

    def settle(self, event: MemoryEvent) -> Payload:
        """Book the verb's outcome and return what the agent sees of it."""
        ...


class ContextSession(ToolSession, Protocol):
    """A session with a short-term context of its own (the training environment)."""

    def summary_context(self, span: str) -> Generator[Any, str, Payload]: ...

    def filter_context(self, criteria: str) -> Payload: ...


def execute(session: ToolSession, call: ToolCall) -> ToolResult | Generator[Any, Any, ToolResult]:
    """Run one parsed call in ``session``: its result, or a generator returning it when the handler must wait
    (Summary_context yields for its summary text; drive it with ``yield from``). Never raises for the agent's
    mistakes: an invalid call, or a tool the session does not offer, is an error result."""
    if not call.valid:
        return ToolResult(call.name, False, {"ok": False, "message": call.error})
    if call.name not in session.offered:
        message = f"unknown tool {call.name!r}; available tools: {', '.join(session.offered)}"
        return ToolResult(call.name, False, {"ok": False, "message": message})
    outcome = TOOLS[call.name].handler(session, **call.arguments)
    if inspect.isgenerator(outcome):
        return _finish(call.name, outcome)
    return ToolResult(call.name, bool(outcome["ok"]), outcome)


def _finish(name: str, events: Generator[Any, Any, Payload]) -> Generator[Any, Any, ToolResult]:
    payload = yield from events
    return ToolResult(name, bool(payload["ok"]), payload)


# ------------------------------------------------------------------------------------------ handlers


def add_memory(
    session: ToolSession, content: str, metadata: dict[str, Any] | None = None, memory_type: str | None = None
) -> Payload:
    stored = session.metadata_for("Add_memory", metadata, memory_type)
    result = session.memory.add(content, stored, scope=session.scope)
    return session.settle(MemoryEvent("Add_memory", result, {"content": content}))


def update_memory(
    session: ToolSession, memory_id: str, content: str, metadata: dict[str, Any] | None = None
) -> Payload:
    previous = session.memory.get(memory_id, scope=session.scope)
    stored = session.metadata_for("Update_memory", metadata)
    result = session.memory.update(memory_id, content, stored, scope=session.scope)
    return session.settle(MemoryEvent("Update_memory", result, {"memory_id": memory_id, "content": content}, previous))


def delete_memory(session: ToolSession, memory_id: str, confirmation: bool) -> Payload:
    if confirmation is not True:  # the schema asks for it so that a deletion is never a slip
        result = MemoryResult("delete", False, message=NOT_CONFIRMED)
    else:
        result = session.memory.delete(memory_id, scope=session.scope)
    return session.settle(MemoryEvent("Delete_memory", result, {"memory_id": memory_id}))


def merge_memory(session: ToolSession, memory_ids: list[str], content: str) -> Payload:
    """Merge_memory: an Update of the first entry to ``content`` and a Delete of each other, booked as those verbs;
    nothing changes unless every id exists and at least two are distinct."""
    ids = list(dict.fromkeys(memory_ids))
    arguments = {"memory_id": ids[0] if ids else "", "content": content}
    missing = [i for i in ids if session.memory.get(i, scope=session.scope) is None]
    if len(ids) < 2 or missing:
        known = session.memory.ids(scope=session.scope)
        message = unknown_id_message(missing[0], known) if missing else "give at least two distinct memory_ids"
        return session.settle(MemoryEvent("Merge_memory", MemoryResult("update", False, message=message), arguments))
    previous = session.memory.get(ids[0], scope=session.scope)
    updated = session.memory.update(ids[0], content, session.metadata_for("Update_memory", None), scope=session.scope)
    shown = session.settle(MemoryEvent("Merge_memory", updated, arguments, previous))
    if updated.ok:
        for other in ids[1:]:
            deleted = session.memory.delete(other, scope=session.scope)
            session.settle(MemoryEvent("Merge_memory", deleted, {"memory_id": other}))
        shown = {**shown, "message": f"merged {len(ids)} entries into {ids[0]} (deleted {', '.join(ids[1:])})"}
    return shown


def retrieve_memory(
    session: ToolSession, query: str, top_k: int | None = None, metadata_filter: dict[str, Any] | None = None
) -> Payload:
    top_k = session.default_top_k if top_k is None else top_k
    result = session.memory.retrieve(query, top_k, metadata_filter, scope=session.scope)
    return session.settle(MemoryEvent("Retrieve_memory", result, {"query": query, "top_k": top_k}))


def summary_context(session: ContextSession, span: str) -> Generator[Any, str, Payload]:
    return session.summary_context(span)


def filter_context(session: ContextSession, criteria: str) -> Payload:
    return session.filter_context(criteria)


def _normalise_span(arguments: dict[str, Any]) -> dict[str, Any]:
    """span ``full``/N → ``all``/"N"."""
    span = arguments.get("span")
    if isinstance(span, int) and not isinstance(span, bool):
        return {**arguments, "span": str(span)}
    if isinstance(span, str):
        return {**arguments, "span": "all" if span.strip().lower() in ("all", "full") else span.strip()}
    return arguments


def _normalise_confirmation(arguments: dict[str, Any]) -> dict[str, Any]:
    """confirmation ``"yes"``/``"true"`` → True (and no/false → False)."""
    value = arguments.get("confirmation")
    if isinstance(value, str):
        return {**arguments, "confirmation": _TRUE_WORDS.get(value.strip().lower(), value)}
    return arguments


def _normalise_top_k(arguments: dict[str, Any]) -> dict[str, Any]:
    """top_k ``"3"`` or 3.0 → 3: JSON Schema calls 3.0 an integer, but the store wants an int."""
    top_k = arguments.get("top_k")
    if (isinstance(top_k, str) and _ASCII_INT.fullmatch(top_k)) or (isinstance(top_k, float) and top_k.is_integer()):
        return {**arguments, "top_k": int(top_k)}
    return arguments


_BUILT_IN: dict[str, tuple[Handler, dict[str, Any]]] = {
    "Add_memory": (add_memory, {}),
    "Update_memory": (update_memory, {}),
    "Delete_memory": (delete_memory, {"normalise": _normalise_confirmation, "aliases": {"confirmed": "confirmation"}}),
    "Retrieve_memory": (retrieve_memory, {"normalise": _normalise_top_k}),
    "Summary_context": (summary_context, {"normalise": _normalise_span}),
    "Filter_context": (filter_context, {}),
}
for _schema in TOOL_SCHEMAS:
    _handler, _options = _BUILT_IN[_schema["function"]["name"]]
    register(_schema, _handler, **_options)
register(MERGE_SCHEMA, merge_memory, aliases={"ids": "memory_ids"})


# ------------------------------------------------------------------------------------------ schemas and calls


def tool_schemas(names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Deep copies of the registered schemas (callers may edit them), optionally only ``names``."""
    return [copy.deepcopy(t.schema) for t in TOOLS.values() if names is None or t.name in names]


def schemas_json(names: tuple[str, ...] | None = None) -> str:
    """The schemas as JSON lines, for a system prompt or an export."""
    return "\n".join(json.dumps(s, ensure_ascii=False) for s in tool_schemas(names))


def make_call(raw_name: Any, arguments: Any, allowed: tuple[str, ...] = TOOL_NAMES) -> ToolCall:
    """Resolve aliases, normalise arguments and validate them; never raises."""
    if not isinstance(raw_name, str) or not raw_name:
        return ToolCall(str(raw_name), {}, 'the tool call has no "name" string', str(raw_name))
    name = NAME_ALIASES.get(raw_name, raw_name)
    tool = TOOLS.get(name)
    if name not in allowed or tool is None:
        available = f"available tools: {', '.join(allowed)}" if allowed else "no tools are available; answer directly"
        return ToolCall(raw_name, {}, f"unknown tool {raw_name!r}; {available}", raw_name)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCall(name, {}, f"{name} arguments must be a JSON object, got {type(arguments).__name__}", raw_name)
    arguments = normalise_arguments(name, arguments)
    errors = sorted(tool.validator.iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(_describe(e) for e in errors[:3])
        return ToolCall(name, arguments, f"bad arguments for {name}: {details}", raw_name)
    return ToolCall(name, arguments, None, raw_name)


def normalise_arguments(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Apply the tool's accepted spellings (e.g. ``confirmed``→``confirmation``, span ``full``/N→``all``/"N")."""
    tool = TOOLS[name]
    out = {tool.aliases.get(k, k): v for k, v in arguments.items()}
    return tool.normalise(out) if tool.normalise is not None else out


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.path)
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unexpected argument(s)")
    if error.validator == "required":
        return f"missing {error.message.split(' is a required')[0]}"
    return f"{where or 'arguments'}: {error.message}"

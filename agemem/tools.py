"""The six memory tools: JSON schemas, name/argument aliases and validation.

Schemas use the OpenAI function format, so the same list goes into the system prompt
(tool format ``agemem``, as the paper) or into a chat template's ``tools=`` (``native``).
Execution lives in :mod:`agemem.env`; this module only decides whether a call is valid.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

TOOL_SCHEMAS: list[dict[str, Any]] = [
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
                        "description": "Id of the entry, as returned by Add_memory or Retrieve_memory.",
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
LTM_TOOLS = ("Add_memory", "Update_memory", "Delete_memory")
NAME_ALIASES = {"Clear_context": "Filter_context"}
ARGUMENT_ALIASES = {"Delete_memory": {"confirmed": "confirmation"}}
_TRUE_WORDS = {"true": True, "yes": True, "false": False, "no": False}
_ASCII_INT = re.compile(r"\s*[0-9]+\s*")  # not str.isdigit(): it accepts "²", which int() rejects


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


def tool_schemas(names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Deep copies of the schemas (callers may edit them), optionally only ``names``."""
    return [copy.deepcopy(s) for s in TOOL_SCHEMAS if names is None or s["function"]["name"] in names]


def schemas_json(names: tuple[str, ...] | None = None) -> str:
    """The schemas as JSON lines, for a system prompt or an export."""
    return "\n".join(json.dumps(s, ensure_ascii=False) for s in tool_schemas(names))


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = next(s["function"]["parameters"] for s in TOOL_SCHEMAS if s["function"]["name"] == name)
    return Draft202012Validator(schema)


def make_call(raw_name: Any, arguments: Any, allowed: tuple[str, ...] = TOOL_NAMES) -> ToolCall:
    """Resolve aliases, normalise arguments and validate them; never raises."""
    if not isinstance(raw_name, str) or not raw_name:
        return ToolCall(str(raw_name), {}, 'the tool call has no "name" string', str(raw_name))
    name = NAME_ALIASES.get(raw_name, raw_name)
    if name not in allowed:
        available = f"available tools: {', '.join(allowed)}" if allowed else "no tools are available; answer directly"
        return ToolCall(raw_name, {}, f"unknown tool {raw_name!r}; {available}", raw_name)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCall(name, {}, f"{name} arguments must be a JSON object, got {type(arguments).__name__}", raw_name)
    arguments = normalise_arguments(name, arguments)
    errors = sorted(_validator(name).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(_describe(e) for e in errors[:3])
        return ToolCall(name, arguments, f"bad arguments for {name}: {details}", raw_name)
    return ToolCall(name, arguments, None, raw_name)


def normalise_arguments(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Apply the accepted spellings: ``confirmed``→``confirmation``, span ``full``/N→``all``/"N", numeric strings."""
    out = {ARGUMENT_ALIASES.get(name, {}).get(k, k): v for k, v in arguments.items()}
    if name == "Summary_context" and "span" in out:
        span = out["span"]
        if isinstance(span, int) and not isinstance(span, bool):
            out["span"] = str(span)
        elif isinstance(span, str):
            out["span"] = "all" if span.strip().lower() in ("all", "full") else span.strip()
    if name == "Delete_memory" and isinstance(out.get("confirmation"), str):
        out["confirmation"] = _TRUE_WORDS.get(out["confirmation"].strip().lower(), out["confirmation"])
    top_k = out.get("top_k")
    if name == "Retrieve_memory" and isinstance(top_k, str) and _ASCII_INT.fullmatch(top_k):
        out["top_k"] = int(top_k)
    elif name == "Retrieve_memory" and isinstance(top_k, float) and top_k.is_integer():
        out["top_k"] = int(top_k)  # JSON Schema calls 3.0 an integer; the store wants an int
    return out


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.path)
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unexpected argument(s)")
    if error.validator == "required":
        return f"missing {error.message.split(' is a required')[0]}"
    return f"{where or 'arguments'}: {error.message}"

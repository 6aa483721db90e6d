"""The part of the OpenAI chat-completions contract the harness's engine server keeps, as pure functions.

:func:`parse_request` reads a request body into a :class:`ChatRequest` or raises :class:`RequestError` (an HTTP
400 naming the field); :func:`request_grammar` turns ``response_format`` and a forced ``tool_choice`` into the
grammar constrained decoding enforces; :func:`completion_body` and :func:`completion_chunks` write the reply as one
JSON body or as server-sent-event chunks.

What a field does here (docs/baselines.md, "The endpoint"):

| field | here |
|---|---|
| ``messages``, ``tools`` | rendered by the chat template; ``<tool_call>`` blocks become ``tool_calls`` |
| ``max_tokens`` / ``max_completion_tokens`` | honoured, capped at ``eval.memory_system.max_tokens`` |
| ``temperature``, ``top_p``, ``seed`` | honoured (a seed makes the reply reproducible on the same engine) |
| ``n`` | n choices, each sampled under its own seed |
| ``stop`` | up to 4 strings: each reply is cut before the first one found |
| ``response_format`` | ``text``; ``json_object``; ``json_schema`` (its ``strict``): constrained decoding |
| ``tool_choice`` | ``auto``, ``none`` (tools not shown), ``required`` and a named function: constrained decoding |
| ``parallel_tool_calls`` | ``false`` keeps the first call of a reply |
| ``stream``, ``stream_options.include_usage`` | server-sent events: the reply is generated whole, then sent in chunks |
| ``model``, ``user``, ``metadata`` | accepted, not used |

Any other field, or a listed one at a value it cannot honour (a non-text content part, ``strict`` tools under
``auto``), is a 400 that names it. Fields at their neutral value (``null``, which OpenAI reads as unset; a penalty
of 0, ``logprobs: false``, an empty ``logit_bias``, ``store: false``) are accepted.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_CHOICES = 8
"""most choices one request may ask for (``n``): each is a full generation on the one engine."""
MAX_STOPS = 4
"""OpenAI's limit on ``stop`` strings."""

ACCEPTED_UNUSED = frozenset({"model", "user", "metadata"})
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "frequency_penalty": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "logprobs": (False,),
    "top_logprobs": (0,),
    "logit_bias": ({},),
    "store": (False,),
    "service_tier": ("auto", "default"),
    "modalities": (["text"],),
}
"""fields this server does not implement, accepted only at the value that asks nothing of it."""
HONOURED = frozenset(
    {
        "messages", "tools", "tool_choice", "parallel_tool_calls", "max_tokens", "max_completion_tokens",
        "temperature", "top_p", "n", "stop", "seed", "stream", "stream_options", "response_format",
    }
)  # fmt: skip
TOOL_CALL_PREFIX, TOOL_CALL_SUFFIX = "<tool_call>\n", "\n</tool_call>"
"""the Hermes block Qwen's chat template asks for, and the one this server parses back into ``tool_calls``."""


class RequestError(ValueError):
    """A request this server cannot answer as asked: HTTP 400, OpenAI's error shape, ``param`` the field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": "invalid_request_error", "param": self.param, "code": None}}


@dataclass
class ChatRequest:
    """A validated chat-completions request."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    """the function definitions shown to the model (None: no tools, or ``tool_choice: none``)."""
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: int = 1
    stop: tuple[str, ...] = ()
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    response_format: dict[str, Any] | None = None
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    forced_tools: tuple[str, ...] = ()
    """the functions a forced ``tool_choice`` allows (empty: the model may answer in text)."""


def _number(body: dict[str, Any], name: str, low: float, high: float, *, low_open: bool = False) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"{name} must be a number, got {value!r}", name)
    if value > high or value < low or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise RequestError(f"{name}={value} is out of range {bound}", name)
    return float(value)


def _integer(body: dict[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {value!r}", name)
    if value < low or (high is not None and value > high):
        raise RequestError(f"{name}={value} is out of range [{low}, {high if high is not None else '...'}]", name)
    return value


def _check_fields(body: dict[str, Any]) -> None:
    for name, value in body.items():
        if name in HONOURED or name in ACCEPTED_UNUSED or value is None:
            continue
        if name in NEUTRAL_VALUES:
            if value not in NEUTRAL_VALUES[name]:
                raise RequestError(
                    f"{name}={json.dumps(value)} is not supported by the harness's engine server (only "
                    f"{' or '.join(json.dumps(v) for v in NEUTRAL_VALUES[name])}); drop it, or serve the model with "
                    "`vllm serve` and give --model openai:<model>@<url>",
                    name,
                )
            continue
        raise RequestError(
            f"{name} is not supported by the harness's engine server; drop it, or serve the model with `vllm serve` "
            "and give --model openai:<model>@<url>",
            name,
        )


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"messages[{index}] must be an object with a role", "messages")
        content = message.get("content")
        if isinstance(content, list):
            kinds = {part.get("type") if isinstance(part, dict) else type(part).__name__ for part in content}
            if kinds - {"text"}:
                raise RequestError(
                    f"messages[{index}].content has {sorted(map(str, kinds - {'text'}))} parts: this server reads "
                    "text parts only",
                    "messages",
                )
        for call in message.get("tool_calls") or []:
            if not isinstance((call or {}).get("function"), dict) or "name" not in call["function"]:
                raise RequestError(f"messages[{index}].tool_calls: each call needs function.name", "messages")
    return messages


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise RequestError("tools must be a list of function definitions", "tools")
    functions = []
    for index, tool in enumerate(tools):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        kind = tool.get("type", "function") if isinstance(tool, dict) else None
        if kind != "function" or not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(f"tools[{index}] must be {{'type': 'function', 'function': {{'name': ...}}}}", "tools")
        functions.append(function)
    return functions


def _check_strict_tools(functions: list[dict[str, Any]], forced: tuple[str, ...]) -> None:
    """``strict`` function calling is kept only where a call is forced (its arguments are then decoded strictly);
    under ``auto`` the model's free text may or may not hold a call, and nothing would hold it to the schema."""
    for index, function in enumerate(functions):
        if function.get("strict") and function["name"] not in forced:
            raise RequestError(
                f"tools[{index}].function.strict=true is enforced only when tool_choice forces the call (required, "
                "or this function by name); drop strict or force the call",
                "tools",
            )


def _tool_choice(body: dict[str, Any], functions: list[dict[str, Any]]) -> tuple[str | dict[str, Any], tuple[str, ...]]:
    choice = body.get("tool_choice")
    if choice is None:
        return "auto", ()
    names = tuple(f["name"] for f in functions)
    if choice in ("auto", "none"):
        return choice, ()
    if choice == "required":
        if not names:
            raise RequestError("tool_choice=required needs tools", "tool_choice")
        return choice, names
    if isinstance(choice, dict) and isinstance((choice.get("function") or {}).get("name"), str):
        name = choice["function"]["name"]
        if name not in names:
            raise RequestError(f"tool_choice names {name!r}, which is not among the tools {list(names)}", "tool_choice")
        return choice, (name,)
    raise RequestError(
        f"tool_choice={json.dumps(choice)}: use auto, none, required or {{'type': 'function', 'function': "
        "{'name': ...}}",
        "tool_choice",
    )


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    spec = body.get("response_format")
    if spec is None or (isinstance(spec, dict) and spec.get("type") == "text"):
        return None
    if not isinstance(spec, dict) or spec.get("type") not in ("json_object", "json_schema"):
        raise RequestError(
            f"response_format={json.dumps(spec)}: use type text, json_object or json_schema", "response_format"
        )
    if spec["type"] == "json_schema":
        schema = (spec.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise RequestError("response_format.json_schema.schema must be a JSON schema object", "response_format")
    return spec


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > MAX_STOPS:
        raise RequestError(f"stop must be a non-empty string or a list of up to {MAX_STOPS} of them", "stop")
    return tuple(stops)


def parse_request(body: Any) -> ChatRequest:
    """The request ``body`` validated, or a :class:`RequestError` naming the first field it cannot honour."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    _check_fields(body)
    functions = _tools(body)
    tool_choice, forced = _tool_choice(body, functions)
    _check_strict_tools(functions, forced)
    response_format = _response_format(body)
    if response_format is not None and forced:
        raise RequestError("response_format and a forced tool_choice cannot both constrain one reply", "tool_choice")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RequestError(f"stream must be true or false, got {stream!r}", "stream")
    options = body.get("stream_options")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise RequestError("stream_options is an object, allowed only with stream=true", "stream_options")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise RequestError(f"parallel_tool_calls must be true or false, got {parallel!r}", "parallel_tool_calls")
    max_tokens = _integer(body, "max_completion_tokens", 1)
    return ChatRequest(
        messages=_messages(body),
        tools=functions if functions and tool_choice != "none" else None,
        max_tokens=max_tokens if max_tokens is not None else _integer(body, "max_tokens", 1),
        temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0, low_open=True),
        n=_integer(body, "n", 1, MAX_CHOICES) or 1,
        stop=_stop(body),
        seed=_integer(body, "seed", -(2**63)),
        stream=bool(stream),
        include_usage=bool((options or {}).get("include_usage")),
        response_format=response_format,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel is not False,
        forced_tools=forced,
    )


# ------------------------------------------------------------------------------------------------ the grammar


def request_grammar(request: ChatRequest) -> str | None:
    """The grammar a reply must match (EBNF, xgrammar's dialect), or None when nothing constrains it.

    * ``json_object``: one JSON object; ``json_schema``: its schema (``strict`` as given: extra properties are
      allowed unless it is true);
    * a forced ``tool_choice``: one Hermes block ``<tool_call>\\n{"name": <one of the allowed>, "arguments":
      <that function's parameters>}\\n</tool_call>``.

    JSON is written without free whitespace between tokens (``any_whitespace=False``): a model cannot stall in
    blank space, and nothing a parser reads changes."""
    if request.response_format is None and not request.forced_tools:
        return None
    from agemem.rollouts.engines.grammar import xgrammar

    xgr = xgrammar()
    try:
        if request.response_format is not None:
            spec = request.response_format
            if spec["type"] == "json_object":
                return str(xgr.Grammar.from_json_schema({"type": "object"}, strict_mode=False, any_whitespace=False))
            schema = spec["json_schema"]
            grammar = xgr.Grammar.from_json_schema(
                schema["schema"], strict_mode=bool(schema.get("strict")), any_whitespace=False
            )
            return str(grammar)
        calls = [
            {
                "type": "object",
                "properties": {"name": {"const": f["name"]}, "arguments": f.get("parameters") or {"type": "object"}},
                "required": ["name", "arguments"],
            }
            for f in request.tools or []
            if f["name"] in request.forced_tools
        ]
        call = calls[0] if len(calls) == 1 else {"anyOf": calls}
        return str(
            xgr.Grammar.concat(
                xgr.Grammar.from_ebnf(f"root ::= {json.dumps(TOOL_CALL_PREFIX)}"),
                # strict: arguments hold the parameters the function declares, no others
                xgr.Grammar.from_json_schema(call, strict_mode=True, any_whitespace=False),
                xgr.Grammar.from_ebnf(f"root ::= {json.dumps(TOOL_CALL_SUFFIX)}"),
            )
        )
    except (RuntimeError, ValueError) as err:  # xgrammar's own words on what it could not read in the schema
        field_name = "response_format" if request.response_format is not None else "tools"
        raise RequestError(f"{field_name}: the schema cannot be enforced: {err}", field_name) from err


# ------------------------------------------------------------------------------------------------ the reply


def cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """``text`` cut before the earliest of ``stops``, and whether one was found."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return (text[: min(found)], True) if found else (text, False)


@dataclass
class Choice:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"


@dataclass
class Completed:
    """The whole reply to one request."""

    model: str
    choices: list[Choice]
    prompt_tokens: int
    completion_tokens: int
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:16]}")
    created: int = field(default_factory=lambda: int(time.time()))

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def _message(choice: Choice) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": choice.content}
    if choice.tool_calls:
        message["tool_calls"] = choice.tool_calls
    return message


def completion_body(reply: Completed) -> dict[str, Any]:
    """The ``chat.completion`` object."""
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [
            {"index": i, "message": _message(c), "finish_reason": c.finish_reason} for i, c in enumerate(reply.choices)
        ],
        "usage": reply.usage(),
    }


_PIECES = re.compile(r"\s*\S+|\s+")


def completion_chunks(reply: Completed, *, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order: per choice its role, its content a word
    at a time, its tool calls, its finish reason; then the usage (choices empty) when the client asked for it."""

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
        }

    for index, choice in enumerate(reply.choices):
        yield chunk(index, {"role": "assistant", "content": ""})
        for piece in _PIECES.findall(choice.content):
            yield chunk(index, {"content": piece})
        for position, call in enumerate(choice.tool_calls):
            yield chunk(index, {"tool_calls": [{"index": position, **call}]})
        yield chunk(index, {}, choice.finish_reason)
    if include_usage:
        yield {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "choices": [],
            "usage": reply.usage(),
        }


def sse_events(chunks: Iterator[dict[str, Any]]) -> Iterator[str]:
    """Server-sent events: ``data: <chunk JSON>`` per chunk, then ``data: [DONE]``."""
    for chunk in chunks:
        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"

"""The response protocol: model text → thought, tool calls, answer and format violations.

Accepted forms (both may be mixed in one response):

* AgeMem: ``<think>…</think>`` then ``<tool_call>[{"name": …, "arguments": {…}}, …]</tool_call>``
  or ``<answer>…</answer>``;
* Qwen-native: one JSON object per ``<tool_call>`` block, several blocks allowed.

``arguments`` may also be a JSON-encoded string. JSON cut off at the end (a truncated
generation) is recovered when appending the missing closing brackets alone makes it
parse; a cut inside a string is never guessed at. :func:`parse_response` never raises:
whatever is wrong becomes a :class:`Violation`, which the environment shows to the agent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agemem.core.tools import TOOL_NAMES, ToolCall, make_call

TEXT_OUTSIDE_TAGS = "text_outside_tags"
TOOL_CALL_AND_ANSWER = "tool_call_and_answer"
NO_ACTION = "no_action"
INVALID_JSON = "invalid_json"
NON_OBJECT_CALL = "non_object_call"
UNKNOWN_TOOL = "unknown_tool"
BAD_ARGUMENTS = "bad_arguments"
TRUNCATED = "truncated"
MULTIPLE_ANSWERS = "multiple_answers"
VIOLATION_KINDS = (
    TEXT_OUTSIDE_TAGS,
    TOOL_CALL_AND_ANSWER,
    NO_ACTION,
    INVALID_JSON,
    NON_OBJECT_CALL,
    UNKNOWN_TOOL,
    BAD_ARGUMENTS,
    TRUNCATED,
    MULTIPLE_ANSWERS,
)

_OPEN_TAG = re.compile(r"<(think|tool_call|answer)>")
MAX_JSON_DEPTH = 64


@dataclass
class Violation:
    kind: str
    """one of VIOLATION_KINDS."""
    detail: str


@dataclass
class ParsedResponse:
    thought: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    """every call found, in order; invalid ones carry ``error`` and are not executed."""
    answer: str | None = None
    violations: list[Violation] = field(default_factory=list)

    @property
    def valid_calls(self) -> list[ToolCall]:
        return [c for c in self.tool_calls if c.valid]

    def violation_kinds(self) -> list[str]:
        return [v.kind for v in self.violations]


def parse_response(text: str, allowed_tools: tuple[str, ...] = TOOL_NAMES) -> ParsedResponse:
    """Parse one model response. Never raises (see module doc)."""
    try:
        return parse_response_strict(text, allowed_tools)
    except Exception as err:
        return ParsedResponse(violations=[Violation(INVALID_JSON, f"unparseable response ({type(err).__name__})")])


def parse_response_strict(text: str, allowed_tools: tuple[str, ...] = TOOL_NAMES) -> ParsedResponse:
    """The parser itself, without the safety net (tests call this to see real failures)."""
    result = ParsedResponse()
    if not isinstance(text, str):
        result.violations.append(Violation(NO_ACTION, f"expected text, got {type(text).__name__}"))
        return result
    thoughts: list[str] = []
    answers: list[str] = []
    outside: list[str] = []
    saw_tool_block = False
    for tag, body, closed in _blocks(text, outside):
        if not closed:
            result.violations.append(Violation(TRUNCATED, f"<{tag}> is never closed"))
        if tag == "think":
            thoughts.append(body.strip())
        elif tag == "answer":
            answers.append(body.strip())
        else:
            saw_tool_block = True
            _parse_tool_block(body, allowed_tools, result)
    stray = " ".join(s.strip() for s in outside if s.strip())
    if stray:
        result.violations.append(Violation(TEXT_OUTSIDE_TAGS, f"text outside tags: {stray[:80]!r}"))
    result.thought = "\n".join(thoughts) if thoughts else None
    if answers:
        result.answer = answers[0]
        if len(answers) > 1:
            result.violations.append(Violation(MULTIPLE_ANSWERS, f"{len(answers)} <answer> blocks; the first is used"))
    if saw_tool_block and answers:
        result.violations.append(
            Violation(TOOL_CALL_AND_ANSWER, "a response holds either tool calls or an answer, not both")
        )
    if not saw_tool_block and not answers:
        result.violations.append(Violation(NO_ACTION, "no <tool_call> and no <answer>"))
    return result


def _blocks(text: str, outside: list[str]):
    """Yield ``(tag, body, closed)`` for each top-level block; collect the text between blocks."""
    position = 0
    while True:
        match = _OPEN_TAG.search(text, position)
        if match is None:
            outside.append(text[position:])
            return
        outside.append(text[position : match.start()])
        tag = match.group(1)
        close = text.find(f"</{tag}>", match.end())
        if close == -1:
            yield tag, text[match.end() :], False
            return
        yield tag, text[match.end() : close], True
        position = close + len(f"</{tag}>")


def _parse_tool_block(body: str, allowed_tools: tuple[str, ...], result: ParsedResponse) -> None:
    values, problem = decode_json_values(body)
    if problem is not None:
        result.violations.append(problem)
    elif all(value == [] for value in values):
        result.violations.append(Violation(NO_ACTION, "the <tool_call> block holds no tool call"))
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                result.violations.append(
                    Violation(NON_OBJECT_CALL, f"a tool call must be an object, got {_preview(item)}")
                )
                continue
            call = _call_from_object(item, allowed_tools, result)
            result.tool_calls.append(call)
            if call.error is not None:
                kind = UNKNOWN_TOOL if call.error.startswith("unknown tool") else BAD_ARGUMENTS
                result.violations.append(Violation(kind, call.error))


def _call_from_object(item: dict[str, Any], allowed_tools: tuple[str, ...], result: ParsedResponse) -> ToolCall:
    arguments = item.get("arguments", {})
    if isinstance(arguments, str):  # some models JSON-encode the arguments
        decoded, problem = decode_json_values(arguments)
        if len(decoded) == 1 and isinstance(decoded[0], dict):
            arguments = decoded[0]
            if problem is not None:
                result.violations.append(problem)
        elif not arguments.strip():
            arguments = {}
        # otherwise the string goes on as is: make_call checks the tool name first, then rejects it
    return make_call(item.get("name"), arguments, allowed_tools)


def decode_json_values(text: str) -> tuple[list[Any], Violation | None]:
    """Decode consecutive JSON values (separated by whitespace or commas).

    Returns the values decoded and the problem that stopped decoding, if any. A value cut
    off at the end is recovered (see :func:`recover_truncated_json`) and reported as TRUNCATED.
    """
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    text = text.strip()
    if not text:
        return values, Violation(INVALID_JSON, "empty <tool_call> block")
    if nesting_depth(text) > MAX_JSON_DEPTH:
        # Deep values decode, then blow the recursion limit in whatever walks them next (validation, repr).
        return values, Violation(INVALID_JSON, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    while position < len(text):
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text):
            break
        try:
            value, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError) as err:
            recovered = recover_truncated_json(text[position:])
            if recovered is not None:
                values.append(recovered)
                return values, Violation(TRUNCATED, "JSON was cut off; recovered by closing its brackets")
            return values, Violation(INVALID_JSON, f"invalid JSON in <tool_call>: {_short_error(err)}")
        values.append(value)
    return values, None


def _brackets_outside_strings(text: str) -> tuple[str, bool]:
    """The bracket characters of ``text`` that lie outside JSON strings, and whether it ends inside one."""
    brackets: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[]{}":
            brackets.append(char)
    return "".join(brackets), in_string


def nesting_depth(text: str) -> int:
    """Deepest bracket nesting outside JSON strings."""
    depth = deepest = 0
    for char in _brackets_outside_strings(text)[0]:
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def recover_truncated_json(text: str) -> Any | None:
    """Close the brackets left open at the end of ``text`` if that alone makes valid JSON.

    Returns None when the cut is ambiguous: inside a string, right after a digit, after a
    key with no value, with mismatched brackets, or when nothing was left open. A trailing
    comma or an opener with nothing inside (``[{``) is dropped before closing.
    """
    brackets, in_string = _brackets_outside_strings(text)
    stack: list[str] = []
    for char in brackets:
        if char in "[{":
            stack.append(char)
        elif not stack or "[{"["]}".index(char)] != stack.pop():
            return None  # mismatched bracket: not a simple truncation
    if in_string or not stack or text[-1:].isdigit():  # a number at the cut may have had more digits
        return None
    candidate = text.rstrip()
    while candidate and candidate[-1] in ",[{":  # drop a separator or an opener with nothing generated inside
        if candidate[-1] != ",":
            stack.pop()
        candidate = candidate[:-1].rstrip()
    if not stack or candidate.endswith(":"):
        return None
    closers = "".join("]" if opener == "[" else "}" for opener in reversed(stack))
    try:
        return json.loads(candidate + closers)
    except (ValueError, RecursionError):
        return None


def _short_error(err: Exception) -> str:
    return str(err).split(":")[0] if isinstance(err, ValueError) else type(err).__name__


def _preview(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text[:60]

"""System prompts that teach the agent its memory tools and the response format."""

from __future__ import annotations

from typing import Any, Literal

from agemem.tools import TOOL_NAMES, schemas_json, tool_schemas

ToolFormat = Literal["agemem", "native"]

_MEMORY_GUIDE = """\
You are an assistant with two kinds of memory.

Long-term memory is a store that outlives this conversation. Save facts that may matter later \
with Add_memory, correct them with Update_memory, remove wrong or stale ones with Delete_memory, \
and bring relevant ones back into view with Retrieve_memory.

Short-term memory is this conversation itself, and it has a limited size. When it fills up with \
material you no longer need, compress it with Summary_context or remove off-topic messages with \
Filter_context. The system message and the question you are answering are never removed.

Each reply has this shape:
<think>your private reasoning</think>
followed by exactly one of
<tool_call>[{"name": "<tool name>", "arguments": {...}}, ...]</tool_call>
to use one or more tools (their results come back in the next message), or
<answer>your final answer</answer>
when you are ready to answer. Never put a tool call and an answer in the same reply, and write \
nothing outside the tags. When a message only gives you information, store what is worth keeping \
and reply with <answer>OK</answer>."""

_AGEMEM_TOOLS = """

Available tools (JSON schemas):
{tools}"""

_NATIVE_TOOLS = """

Your tools are listed below. You may put each call in its own <tool_call> block."""


def system_prompt(tool_format: ToolFormat = "agemem", override: str = "", tools: tuple[str, ...] = TOOL_NAMES) -> str:
    """The system message. In ``agemem`` format it embeds the tool schemas (as the paper does).

    ``override`` replaces the built-in text; a ``{tools}`` placeholder in it is filled with the schemas.
    """
    if override:
        return override.replace("{tools}", schemas_json(tools))
    if tool_format == "agemem":
        return _MEMORY_GUIDE + _AGEMEM_TOOLS.format(tools=schemas_json(tools))
    return _MEMORY_GUIDE + _NATIVE_TOOLS


def template_tools(tool_format: ToolFormat, tools: tuple[str, ...] = TOOL_NAMES) -> list[dict[str, Any]] | None:
    """What goes into the chat template's ``tools=``: the schemas in ``native`` format, else nothing."""
    return tool_schemas(tools) if tool_format == "native" else None

"""System prompts that teach the agent its memory tools and the response format."""

from __future__ import annotations

from typing import Any, Literal

from agemem.core.tools import TOOL_NAMES, schemas_json, tool_schemas

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

# Pieces of the guide for a reduced tool set (evaluation variants); the full set uses _MEMORY_GUIDE as it is.
_LTM_USES = {
    "Add_memory": "save facts that may matter later with Add_memory",
    "Update_memory": "correct them with Update_memory",
    "Delete_memory": "remove wrong or stale ones with Delete_memory",
    "Retrieve_memory": "bring relevant ones back into view with Retrieve_memory",
}
_RETRIEVE_ALONE = "bring relevant memories back into view with Retrieve_memory"  # no Add_memory sentence for "ones"
_STM_USES = {
    "Summary_context": "compress it with Summary_context",
    "Filter_context": "remove off-topic messages with Filter_context",
}
_AUTO_RETRIEVAL = (
    "Before each of your replies, the memories most related to the latest message are retrieved for you and "
    "shown as a tool message."
)
_TOOL_REPLY = """Each reply has this shape:
<think>your private reasoning</think>
followed by exactly one of
<tool_call>[{"name": "<tool name>", "arguments": {...}}, ...]</tool_call>
to use one or more tools (their results come back in the next message), or
<answer>your final answer</answer>
when you are ready to answer. Never put a tool call and an answer in the same reply, and write \
nothing outside the tags. When a message only gives you information, {info} and reply with <answer>OK</answer>."""
_ANSWER_REPLY = """Each reply has this shape:
<think>your private reasoning</think>
<answer>your final answer</answer>
Write nothing outside the tags. When a message only gives you information, reply with <answer>OK</answer>."""


def _listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + ", and " + parts[-1]


def reduced_guide(tools: tuple[str, ...], auto_retrieval: bool = False) -> str:
    """The memory guide for a subset of the tools: only the paragraphs and verbs of the tools offered."""
    paragraphs = []
    ltm = [use for name, use in _LTM_USES.items() if name in tools]
    if ltm and "Add_memory" not in tools and "Retrieve_memory" in tools:
        ltm[-1] = _RETRIEVE_ALONE
    if ltm or auto_retrieval:
        text = "Long-term memory is a store that outlives this conversation."
        if ltm:
            text += " " + _listing(ltm)[0].upper() + _listing(ltm)[1:] + "."
        paragraphs.append(text + (" " + _AUTO_RETRIEVAL if auto_retrieval else ""))
    stm = [use for name, use in _STM_USES.items() if name in tools]
    if stm:
        paragraphs.append(
            "Short-term memory is this conversation itself, and it has a limited size. When it fills up with "
            f"material you no longer need, {' or '.join(stm)}. The system message and the question you are "
            "answering are never removed."
        )
    kinds = {1: "a long-term memory" if ltm or auto_retrieval else "a short-term memory", 2: "two kinds of memory"}
    intro = f"You are an assistant with {kinds[len(paragraphs)]}." if paragraphs else "You are a helpful assistant."
    if "Add_memory" in tools:
        reply = _TOOL_REPLY.replace("{info}", "store what is worth keeping")
    elif tools:
        reply = _TOOL_REPLY.replace(" {info} and", "")
    else:
        reply = _ANSWER_REPLY
    return "\n\n".join([intro, *paragraphs, reply])


def stage_note(tools: tuple[str, ...]) -> str:
    """The sentence a per-stage system prompt adds (``rollout.stage_tools=paper``): the tools change during the
    conversation, and these are the ones available now (earlier turns may show calls to others)."""
    if not tools:
        return "The tools you may use change as the conversation goes on; at this point none are available."
    names = tools[0] if len(tools) == 1 else ", ".join(tools[:-1]) + " and " + tools[-1]
    return f"The tools you may use change as the conversation goes on; at this point they are {names}, and no others."


def system_prompt(
    tool_format: ToolFormat = "agemem",
    override: str = "",
    tools: tuple[str, ...] = TOOL_NAMES,
    auto_retrieval: bool = False,
    staged: bool = False,
) -> str:
    """The system message. In ``agemem`` format it embeds the tool schemas (as the paper does).

    ``override`` replaces the built-in text; a ``{tools}`` placeholder in it is filled with the schemas.
    ``tools``: the tools offered (a subset gets a guide that mentions only those); ``auto_retrieval``:
    memories are shown before every reply (the -RAG ablation), which the guide then says; ``staged``: ``tools``
    are one stage's set (``rollout.stage_tools=paper``), which the built-in text then says (:func:`stage_note`).
    """
    if override:
        return override.replace("{tools}", schemas_json(tools))
    full = set(tools) == set(TOOL_NAMES) and not auto_retrieval and not staged
    guide = _MEMORY_GUIDE if full else reduced_guide(tuple(tools), auto_retrieval)
    if staged:
        guide += "\n\n" + stage_note(tuple(tools))
    if not tools:
        return guide
    if tool_format == "agemem":
        return guide + _AGEMEM_TOOLS.format(tools=schemas_json(tuple(tools)))
    return guide + _NATIVE_TOOLS


def template_tools(tool_format: ToolFormat, tools: tuple[str, ...] = TOOL_NAMES) -> list[dict[str, Any]] | None:
    """What goes into the chat template's ``tools=``: the schemas in ``native`` format, else nothing."""
    return tool_schemas(tools) if tool_format == "native" and tools else None

"""A scripted chat policy that uses memory the way a trained AgeMem agent should: "Remember: X" is stored
with Add_memory, a question is answered from Retrieve_memory, anything after a tool result is answered."""

from __future__ import annotations

import json
from typing import Any

from agemem.rollouts.engines.chat import ChatReply


def scripted_reply(messages: list[dict[str, Any]]) -> str:
    last = messages[-1]
    users = [m["content"] for m in messages if m["role"] == "user" and not m["content"].startswith("<tool_response>")]
    if users and users[-1] == "garble":  # keeps failing, whatever the feedback says
        return "<tool_call>[{not json"
    if last["role"] == "tool" or last["content"].startswith("<tool_response>"):
        payload = json.loads(last["content"].removeprefix("<tool_response>").removesuffix("</tool_response>"))
        if payload.get("tool") == "Retrieve_memory":
            found = [m["content"] for m in payload.get("memories", [])]
            return f"<think>Found it.</think><answer>{found[0] if found else 'I do not know.'}</answer>"
        return "<think>Stored.</think><answer>I will remember that.</answer>"
    text = last["content"]
    if text.startswith("Remember:"):
        fact = text.removeprefix("Remember:").strip()
        call = [{"name": "Add_memory", "arguments": {"content": fact}}]
        return f"<think>Worth keeping.</think><tool_call>{json.dumps(call)}</tool_call>"
    if text.endswith("?"):
        call = [{"name": "Retrieve_memory", "arguments": {"query": text, "top_k": 1}}]
        return f"<think>Check memory.</think><tool_call>{json.dumps(call)}</tool_call>"
    return "<think>Chat.</think><answer>OK</answer>"


class ScriptedMemoryPolicy:
    """:class:`~agemem.rollouts.engines.chat.ChatModel` over :func:`scripted_reply`; records what it saw."""

    def __init__(self, error: str | None = None):
        self.calls: list[list[dict[str, Any]]] = []
        self.error = error

    def __call__(self, messages, tools, seed) -> ChatReply:
        self.calls.append([dict(m) for m in messages])
        if self.error is not None:
            return ChatReply("", error=self.error)
        return ChatReply(scripted_reply(messages))

"""Scripted agents for evaluation tests: an engine that answers each request from its chat messages
(the driver passes them beside the token ids), and a HotpotQA agent that stores supporting facts
and answers with the gold answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agemem.rollouts.engines.base import Completion, SamplingParams

Policy = Callable[[list[dict[str, Any]]], str]


@dataclass
class MessagesEngine:
    """Replies with ``policy(messages)``; records every request's messages."""

    tokenizer: Any
    policy: Policy
    name: str = "scripted"
    seen: list[list[dict[str, Any]]] = field(default_factory=list)

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        assert messages is not None and len(messages) == len(prompts)
        out = []
        for conversation in messages:
            self.seen.append(conversation)
            text = self.policy(conversation)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append(Completion(ids, None, "stop", text=text))
        return out


def call(*calls: tuple[str, dict[str, Any]]) -> str:
    body = json.dumps([{"name": name, "arguments": arguments} for name, arguments in calls])
    return f"<think>scripted</think><tool_call>{body}</tool_call>"


def answer(text: str) -> str:
    return f"<think>scripted</think><answer>{text}</answer>"


class HotpotAgent:
    """Stage 1: store supporting-fact sentences found in each message (``store``: ``all``, ``first`` (only each
    question's first fact) or ``none``), then acknowledge. Stage 3: Retrieve_memory with the question, then
    answer with ``answers[question]`` (default: the gold answer)."""

    def __init__(self, tasks, *, store: str = "all", answers: dict[str, str] | None = None):
        self.questions = {t.question: t for t in tasks}
        facts = [(t, i, f.text) for t in tasks for i, f in enumerate(t.supporting_facts) if f.text]
        self.facts = [text for _, i, text in facts if store == "all" or (store == "first" and i == 0)]
        self.answers = answers or {t.question: t.answer for t in tasks}

    def __call__(self, conversation: list[dict[str, Any]]) -> str:
        index = max(i for i, m in enumerate(conversation) if m["role"] == "user")
        message = conversation[index]["content"]
        acted = any(m["role"] == "assistant" for m in conversation[index + 1 :])
        if message in self.questions:
            return answer(self.answers[message]) if acted else call(("Retrieve_memory", {"query": message}))
        found = [fact for fact in self.facts if fact in message]
        if acted or not found:
            return answer("OK")
        return call(*(("Add_memory", {"content": fact}) for fact in found))

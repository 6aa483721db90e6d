"""Hand-made streams for rule tests: a task adapter over items written in the test, a solver whose outcome
per task is fixed in advance (so which record is retrieved, credited and deleted can be worked out by hand), and a
chat model that plays a script per task (for the play loops themselves)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.stream.agent import ChatReply
from agemem.eval.stream.base import Attempt, Demonstration
from agemem.tasks.stream import StreamItem, qa_execution

QUIET = ["logging.progress=false", "stream.plot=false"]


def stream_config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*QUIET, *overrides])


def item(item_id: str, query: str, answer: str = "yes-answer", key: str | None = None) -> StreamItem:
    return StreamItem(
        id=item_id,
        query=query,
        prompt=f"Question: {query}",
        answer=answer,
        task_key=key,
        ground_truth=qa_execution("known", answer),
    )


@dataclass
class HandTask:
    """A stream adapter over fixed items; strict = the answer equals the gold answer."""

    source: list[StreamItem]
    name: str = "hand"

    def items(self) -> list[StreamItem]:
        return list(self.source)

    def play(self, item, demos, model, tools, seed):  # a model never plays a hand-made stream
        raise AssertionError("hand-made streams are solved by ScriptedSolver")

    def strict(self, item: StreamItem, attempt: Attempt) -> float:
        return 1.0 if attempt.answer == item.answer else 0.0

    def failed_execution(self, item: StreamItem, rng: random.Random) -> str:
        return qa_execution("a failed copy", f"wrong-{rng.randrange(1000)}")


@dataclass
class ScriptedSolver:
    """Succeeds on the items in ``succeed`` (all when None), fails on the rest; remembers what it was shown."""

    succeed: set[str] | None = None
    name: str = "scripted"
    seen: list[tuple[str, list[Demonstration]]] = field(default_factory=list)

    def solve(self, item: StreamItem, demos: Sequence[Demonstration], tools, seed) -> Attempt:
        self.seen.append((item.id, list(demos)))
        ok = self.succeed is None or item.id in self.succeed
        answer = item.answer if ok else "wrong"
        return Attempt(qa_execution(f"solving {item.query}", answer), answer, replies=1)


ScriptedReply = str | Callable[[list[dict[str, Any]]], str]
"""a reply's text, or a function of the messages so far that writes it (to name the memory ids shown)."""


@dataclass
class ScriptedChat:
    """A chat model that plays ``scripts[k]`` on the k-th task it is given: its n-th reply on that task is the
    script's n-th entry. A request of two messages (the system message and the task) starts the next task. Every
    request's messages are kept in ``seen``."""

    scripts: list[list[ScriptedReply]]
    seen: list[list[dict[str, Any]]] = field(default_factory=list)
    task: int = -1

    def __call__(self, messages: list[dict[str, Any]], tools: Any, seed: int | None) -> ChatReply:
        self.seen.append([dict(m) for m in messages])
        if len(messages) == 2:
            self.task += 1
        step = sum(1 for m in messages if m["role"] == "assistant")
        reply = self.scripts[self.task][step]
        return ChatReply(reply(messages) if callable(reply) else reply, prompt_tokens=10)

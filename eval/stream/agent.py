"""The agent side of a stream: a chat model over the project's engines, the demonstrations in its prompt, the
response protocol, and the memory tools of the ``policy`` addition.

* :class:`~agemem.rollouts.engines.chat.EngineChat` (re-exported here): chat messages → one completion through any
  engine. A stream is strictly sequential (task t's memory decides what task t+1 sees), so tasks run one at a time.
* :func:`render_demonstrations`: the retrieved records as in-context demonstrations, each with its memory id.
* :class:`Dialogue`: replies parsed with :func:`agemem.core.protocol.parse_response`; tool calls run, their results
  appended as tool messages; malformed output gets the environment's format feedback, never an exception
  (:meth:`Dialogue.respond`, which ReMem's dialogue replaces with its own bookkeeping of operations).
* :class:`BankTools`: ``Add_memory`` / ``Delete_memory`` executed on the stream's bank by the training executor
  (:func:`agemem.core.tools.execute` over :class:`~agemem.eval.stream.bank.BankMemory`): how a trained AgeMem
  checkpoint manages the experience memory itself.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agemem.core.env import feedback_violations, format_feedback
from agemem.core.memory import DEFAULT_SCOPE
from agemem.core.protocol import ParsedResponse, parse_response
from agemem.core.tools import MemoryEvent, Payload, ToolCall, execute
from agemem.eval.stream.bank import BankMemory, MemoryBank, Record
from agemem.eval.stream.base import Demonstration, MemoryTools
from agemem.rollouts.engines.base import derive_seed
from agemem.rollouts.engines.chat import ChatModel, ChatReply, EngineChat

__all__ = ["BankTools", "ChatModel", "ChatReply", "Dialogue", "EngineChat"]

MEMORY_TOOLS = ("Add_memory", "Delete_memory")
"""the tools of the policy addition."""


# --------------------------------------------------------------------------------------------- prompts

DEMONSTRATIONS_HEADER = (
    "Records of past tasks similar to this one, from your long-term memory (most relevant first). "
    "Use them when they help; they may contain mistakes."
)


def render_demonstrations(demos: Sequence[Demonstration]) -> str:
    """The demonstrations block of a task prompt (empty without demonstrations)."""
    if not demos:
        return ""
    blocks = [
        f"[{i}] memory_id: {d.record_id} (similarity {d.similarity:.2f})\nTask: {d.query}\nExecution: {d.execution}"
        for i, d in enumerate(demos, 1)
    ]
    return DEMONSTRATIONS_HEADER + "\n\n" + "\n\n".join(blocks)


def task_message(prompt: str, demos: Sequence[Demonstration]) -> str:
    """The user message of a task: the demonstrations, then the task."""
    shown = render_demonstrations(demos)
    return f"{shown}\n\nNow your task.\n{prompt}" if shown else prompt


def memory_turn_message(execution: str, outcome: str | None = None) -> str:
    """The policy addition's memory turn, after the task: what the agent did, and the tools to keep or drop it."""
    observed = f"\n{outcome}" if outcome else ""
    return (
        f"The task is over. Your execution was:\n{execution}{observed}\n\n"
        "Decide what your long-term memory should keep for later tasks. If this experience will help with similar "
        "tasks, store it with Add_memory: its content is what a later similar task will be shown as this task's "
        "execution. Remove records shown above that are wrong or misleading with Delete_memory (their memory_id). "
        "Then reply with <answer>OK</answer>."
    )


# --------------------------------------------------------------------------------------------- memory tools


@dataclass
class BankTools:
    """The memory tools on the stream's bank during one task: a :class:`~agemem.core.tools.ToolSession`.

    ``write(content, metadata)`` stores a record of the current task whose execution is ``content`` (the runner
    adds the noisy copies of a noisy-write stress; None where Add_memory is not offered, as in ReMem's Refine);
    ``Delete_memory`` removes a record by id when ``confirmation`` is true. Execution is the training
    environment's (same handlers, same messages); only what the agent is shown of a success is the stream's own
    (see :meth:`settle`).
    """

    bank: MemoryBank
    write: Callable[[str, dict[str, Any]], Record] | None = None
    offered: tuple[str, ...] = MEMORY_TOOLS
    scope: str = DEFAULT_SCOPE
    default_top_k: int = 3
    memory: BankMemory = field(init=False)

    def __post_init__(self) -> None:
        self.memory = BankMemory(self.bank, self.write)

    @property
    def added(self) -> list[Record]:
        """Records the agent's Add_memory calls wrote (one per call; a noisy write's copies are the runner's)."""
        return self.memory.written

    @property
    def deleted(self) -> list[Record]:
        """Records the agent's Delete_memory calls removed."""
        return self.memory.removed

    def run(self, call: ToolCall) -> dict[str, Any]:
        result = execute(self, call)
        assert not inspect.isgenerator(result), "no tool the bank offers waits for text"
        return result.payload

    def metadata_for(self, tool: str, metadata: dict[str, Any] | None, memory_type: str | None = None) -> Payload:
        """The agent's metadata as it gave it; ``memory_type`` joins it when set (a record has no stage)."""
        stored = dict(metadata or {})
        if memory_type:
            stored["memory_type"] = memory_type
        return stored

    def settle(self, event: MemoryEvent) -> Payload:
        """The stream's results, unchanged since before the executor was shared (logged transcripts and the
        policies evaluated on them saw these): a stored record without metadata, a deletion without the record."""
        result = event.result
        payload: Payload = {"ok": result.ok, "message": result.message}
        if result.ok and result.op != "delete":
            payload["memories"] = [{"memory_id": e.id, "content": e.content} for e in result.entries]
        return payload


# --------------------------------------------------------------------------------------------- the dialogue


def format_details(parsed: ParsedResponse) -> list[str]:
    """The details of :func:`agemem.core.env.feedback_violations`: what the agent is told about its reply."""
    return [v.detail for v in feedback_violations(parsed)]


@dataclass
class Dialogue:
    """A conversation with the model on one task; every call samples under its own derived seed."""

    model: ChatModel
    messages: list[dict[str, Any]]
    offered: tuple[str, ...]
    tools: MemoryTools | None
    schemas: list[dict[str, Any]] | None
    seed: int | None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    error: str | None = None
    last_text: str = ""

    def reply(self) -> ParsedResponse | None:
        """One model reply, parsed; its tool calls run. None when the engine failed (the dialogue is over)."""
        seed = None if self.seed is None else derive_seed(self.seed, self.calls)
        reply = self.model(self.messages, self.schemas, seed)
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        if reply.error is not None:
            self.error = reply.error
            return None
        self.last_text = reply.text
        parsed = parse_response(reply.text, self.offered)
        self.messages.append({"role": "assistant", "content": reply.text})
        results = []
        for call in parsed.tool_calls:
            payload = self.tools.run(call) if self.tools is not None else {"ok": False, "message": call.error}
            results.append({"name": call.name, "arguments": call.arguments, **payload})
            self.messages.append({"role": "tool", "content": json.dumps({"tool": call.name, **payload})})
        entry = {
            "reply": reply.text,
            "tool_calls": results,
            "violations": parsed.violation_kinds(),
            "answer": parsed.answer,
        }
        self.transcript.append({**entry, **self.respond(parsed)})
        return parsed

    def respond(self, parsed: ParsedResponse) -> dict[str, Any]:
        """What the agent is told after a reply besides its tool results: the format feedback when the reply broke
        the format and gave no answer. Returns fields for the reply's transcript entry (none here)."""
        feedback = format_details(parsed)
        if feedback and parsed.answer is None:
            self.messages.append({"role": "tool", "content": format_feedback(feedback)})
        return {}

    def until_answer(self, max_replies: int) -> ParsedResponse | None:
        """Replies until one gives an ``<answer>`` (returned), ``max_replies`` run out or the engine fails (None)."""
        for _ in range(max_replies):
            parsed = self.reply()
            if parsed is None:
                return None
            if parsed.answer is not None:
                return parsed
        return None

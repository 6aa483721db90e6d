"""Short-term memory: the live, ordered message context and the two operations that edit it.

A *round* is the AgeMem unit of one exchange: a user message and the assistant and tool
messages that answer it. Messages before the first user message (after the system prompt)
form round 0.

Protected messages (the system prompt and the live task question) are never removed by
``filter`` or absorbed by ``summarize``. Neither is anything from the *in-flight* step:
the assistant message whose tool calls are executing and the results already appended
for it (otherwise ``Filter_context(criteria)`` would always delete the very message that
asked for it, since that message contains the criteria).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agemem.core.encoders import Encoder

Role = Literal["system", "user", "assistant", "tool"]
SUMMARY_PREFIX = "[Summary of earlier conversation]\n"
COSINE_TOLERANCE = 1e-6


@dataclass(eq=False)  # identity semantics: two messages with equal text are still two messages
class Message:
    role: Role
    content: str
    round: int = 0
    """the exchange this message belongs to (see module doc)."""
    stage: int = 0
    """AgeMem stage (1, 2 or 3) the message was added in; 0 outside an episode."""
    kind: str = "chat"
    """what produced it: chat, fact, distractor, question, summary, tool_result, format_error, system."""
    protected: bool = False
    """never removed by Filter_context nor absorbed by Summary_context."""
    name: str | None = None
    """tool name, for tool messages."""

    def to_chat(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}


class Summarizer(Protocol):
    """Writes the text of one summary message for a span of context messages."""

    def summarize(self, messages: list[Message]) -> str: ...


class ShortTermContext:
    def __init__(self, system_prompt: str):
        self.messages: list[Message] = [Message("system", system_prompt, kind="system", protected=True)]
        self._round = 0
        self._in_flight: Message | None = None

    # ------------------------------------------------------------- building
    def append(
        self,
        role: Role,
        content: str,
        *,
        stage: int = 0,
        kind: str = "chat",
        protected: bool = False,
        name: str | None = None,
    ) -> Message:
        if role == "system":
            raise ValueError("only the first message is a system message; add context as a user message")
        if role == "user":
            self._round += 1
        message = Message(role, content, self._round, stage, kind, protected, name)
        self.messages.append(message)
        return message

    def begin_step(self, assistant_message: Message) -> None:
        """Mark the message whose tool calls are about to run; it and what follows are off limits."""
        self._in_flight = assistant_message

    def end_step(self) -> None:
        self._in_flight = None

    def reset(self) -> None:
        """Clear everything but the system prompt (between Stage 1 and Stage 2)."""
        self.messages = self.messages[:1]
        self._round = 0
        self._in_flight = None

    def drop_oldest_round(self, *, keep_newest: bool = True) -> list[Message]:
        """Remove the eligible messages of the oldest round; with ``keep_newest`` never those of the newest round
        (what just arrived). Returns what was removed (nothing when no such round is left)."""
        candidates = self.eligible()
        rounds = sorted({m.round for m in candidates if not keep_newest or m.round < self._round})
        if not rounds:
            return []
        doomed = {id(m) for m in candidates if m.round == rounds[0]}
        removed = [m for m in self.messages if id(m) in doomed]
        self.messages = [m for m in self.messages if id(m) not in doomed]
        return removed

    # ---------------------------------------------------------- snapshots
    def to_json(self) -> dict[str, Any]:
        """Every message (system prompt included) and the round counter: what :meth:`from_json` rebuilds (a long
        conversation fed session by session resumes with the context it had)."""
        fields = ("role", "content", "round", "stage", "kind", "protected", "name")
        return {"round": self._round, "messages": [{f: getattr(m, f) for f in fields} for m in self.messages]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShortTermContext:
        context = cls("")
        context.messages = [Message(**record) for record in data["messages"]]
        context._round = int(data["round"])
        return context

    # -------------------------------------------------------------- reading
    @property
    def system_prompt(self) -> str:
        return self.messages[0].content

    def as_chat(self) -> list[dict[str, Any]]:
        return [m.to_chat() for m in self.messages]

    def eligible(self) -> list[Message]:
        """Messages Filter and Summary may touch: unprotected, and older than the in-flight step."""
        stop = len(self.messages)
        if self._in_flight is not None:
            stop = next(i for i, m in enumerate(self.messages) if m is self._in_flight)
        return [m for m in self.messages[:stop] if not m.protected]

    def select_span(self, span: str) -> list[Message]:
        """``"all"``: every eligible message; ``"N"``: the eligible messages of the last N rounds."""
        candidates = self.eligible()
        if span == "all":
            return candidates
        n_rounds = int(span)
        if n_rounds < 1:
            raise ValueError(f"span must be 'all' or a positive number of rounds, got {span!r}")
        last_rounds = sorted({m.round for m in candidates})[-n_rounds:]
        return [m for m in candidates if m.round in set(last_rounds)]

    # ------------------------------------------------------------- editing
    def summarize(self, span: str, summarizer: Summarizer) -> tuple[Message, list[Message]] | None:
        """Replace the span's messages with one summary message at the place of the first.

        Returns ``(summary message, replaced messages)``, or None when the span is empty.
        Raises whatever the summarizer raises, leaving the context untouched.
        """
        selected = self.select_span(span)
        if not selected:
            return None
        summary = self.replace_with_summary(selected, summarizer.summarize(selected))
        return summary, selected

    def replace_with_summary(self, selected: list[Message], text: str) -> Message:
        """Swap ``selected`` (from :meth:`select_span`) for one summary message at the first one's place."""
        first = selected[0]
        summary = Message("user", SUMMARY_PREFIX + text.strip(), first.round, first.stage, "summary")
        doomed = {id(m) for m in selected}
        position = next(i for i, m in enumerate(self.messages) if m is first)
        kept = [m for m in self.messages if id(m) not in doomed]
        kept.insert(sum(1 for m in self.messages[:position] if id(m) not in doomed), summary)
        self.messages = kept
        return summary

    def filter(self, criteria: str, encoder: Encoder, threshold: float) -> list[tuple[Message, float]]:
        """Remove every eligible message whose cosine similarity to ``criteria`` is >= ``threshold``."""
        candidates = self.eligible()
        if not candidates:
            return []
        vectors_ND = encoder.encode([criteria] + [m.content for m in candidates])
        similarity_N = vectors_ND[1:] @ vectors_ND[0]
        # float32 cosines carry ~1e-7 error: a similarity that is exactly θ must still count as >= θ.
        removed = [(m, float(s)) for m, s in zip(candidates, similarity_N) if s >= threshold - COSINE_TOLERANCE]
        doomed = {id(m) for m, _ in removed}
        self.messages = [m for m in self.messages if id(m) not in doomed]
        return removed

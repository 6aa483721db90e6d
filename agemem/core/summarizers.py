"""Summary_context backends.

* :class:`LLMSummarizer` asks a chat model (any ``ChatGenerate`` callable) to summarise: the
  policy itself by default (the rollout driver passes its generate function), or an
  OpenAI-compatible endpoint through :class:`OpenAIChatClient`.
* :class:`ExtractiveSummarizer` keeps the lead sentence of each message: no model, for
  offline demos and as a cheap baseline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agemem.core.config import SummarizerConfig
from agemem.core.configlib import ConfigError
from agemem.core.context import Message, Summarizer
from agemem.core.httpclient import ChatClient, HTTPRequestError
from agemem.core.protocol import parse_response
from agemem.core.text import strip_thinking

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

ChatGenerate = Callable[[list[dict[str, str]]], str]
"""messages in chat format -> the assistant's reply text."""

SUMMARY_INSTRUCTIONS = (
    "You compress conversation history for an assistant whose context window is limited. "
    "Rewrite the transcript below as a short, factual summary that keeps every name, number, "
    "date, place and decision that could matter later, and drops small talk and repetition. "
    "Write plain sentences; do not add facts that are not in the transcript."
)


class SummarizerError(RuntimeError):
    """The summary backend failed; the agent sees this as a tool error."""


def transcript(messages: list[Message]) -> str:
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


class LLMSummarizer:
    """A chat model writes the summary. ``prompt`` and ``finish`` are public so the rollout
    driver can route the generation through its batched engine instead of ``generate``."""

    def __init__(self, generate: ChatGenerate, instructions: str = SUMMARY_INSTRUCTIONS):
        self.generate = generate
        self.instructions = instructions

    def prompt(self, messages: list[Message]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": f"Transcript:\n{transcript(messages)}\n\nSummary:"},
        ]

    def finish(self, text: str) -> str:
        """The summary from the model's reply: a leading <think> block dropped, whitespace stripped."""
        text = strip_thinking(text)
        if not text:
            raise SummarizerError("the summary model returned an empty summary")
        return text

    def summarize(self, messages: list[Message]) -> str:
        try:
            text = self.generate(self.prompt(messages))
        except SummarizerError:
            raise
        except Exception as err:  # any backend failure is a tool error the agent sees
            raise SummarizerError(f"the summary model failed: {type(err).__name__}: {err}") from err
        return self.finish(text)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class ExtractiveSummarizer:
    """One line per message: its lead sentence (tool results: their message and memories)."""

    def __init__(self, max_chars: int = 2000, max_line_chars: int = 240):
        self.max_chars = max_chars
        self.max_line_chars = max_line_chars

    def summarize(self, messages: list[Message]) -> str:
        lines = []
        for m in messages:
            lead = _lead_text(m)
            if lead:
                lines.append(f"- {m.role}: {lead[: self.max_line_chars]}")
        text = "\n".join(lines) or "- (nothing of note)"
        return text if len(text) <= self.max_chars else text[: self.max_chars - 3] + "..."


def _lead_text(message: Message) -> str:
    content = message.content.strip()
    if message.role == "tool":
        try:
            payload = json.loads(content)
        except json.JSONDecodeError:
            payload = None
        if isinstance(payload, dict):
            memories = [m.get("content", "") for m in payload.get("memories", []) if isinstance(m, dict)]
            content = "; ".join([str(payload.get("message", "")), *memories])
    elif message.role == "assistant":
        parsed = parse_response(content)
        called = ", ".join(c.name for c in parsed.tool_calls)
        content = parsed.answer or (f"(used {called})" if called else "")
    content = re.sub(r"\s+", " ", content).strip()
    return _SENTENCE_END.split(content, maxsplit=1)[0]


class OpenAIChatClient(ChatClient):
    """:class:`~agemem.core.httpclient.ChatClient` whose failures are :class:`SummarizerError` (a tool error)."""

    def __call__(self, messages: list[dict[str, str]]) -> str:
        try:
            return super().__call__(messages)
        except HTTPRequestError as err:
            raise SummarizerError(f"summary endpoint {err}") from err


class TransformersChatGenerator:
    """``ChatGenerate`` from a local transformers model (the policy, when summarising with it)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature

    def __call__(self, messages: list[dict[str, str]]) -> str:
        import torch

        from agemem.core.chat import encode_chat

        prompt_ids = encode_chat(self.tokenizer, messages)
        input_ids = torch.tensor([prompt_ids], device=self.model.device)
        sampling: dict[str, Any] = {"do_sample": self.temperature > 0}
        if self.temperature > 0:
            sampling["temperature"] = self.temperature
        with torch.no_grad():
            output = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                **sampling,
            )
        return self.tokenizer.decode(output[0, len(prompt_ids) :], skip_special_tokens=True)


def build_summarizer(config: SummarizerConfig, policy_generate: ChatGenerate | None = None) -> Summarizer:
    if config.backend == "extractive":
        return ExtractiveSummarizer(config.max_summary_chars)
    if config.backend == "openai":
        return LLMSummarizer(OpenAIChatClient.from_settings(config))
    if policy_generate is None:
        raise ConfigError(
            "summarizer.backend=policy needs the policy's generate function (the rollout driver passes it); "
            "standalone, set summarizer.backend=openai (with model=...) or summarizer.backend=extractive"
        )
    return LLMSummarizer(policy_generate)

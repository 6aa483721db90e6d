"""Chat messages in, one reply out, through any :class:`~agemem.rollouts.engines.base.Engine`.

:class:`EngineChat` renders the messages with the policy's chat template (so a local model sees prompts
exactly as in training), generates one completion with the call's own seed, and decodes it; an endpoint's
chat API returns its own text. Used where replies come one at a time: the streaming benchmarks and
:class:`agemem.entrypoints.agent.MemoryAgent`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agemem.core.chat import encode_chat, end_of_turn_ids
from agemem.rollouts.engines.base import Engine, SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    """the engine failed for this request (the reply text is then empty)."""
    finish_reason: str = "stop"
    """the engine's: stop (an end-of-turn token), length (the budget ran out) or error."""


class ChatModel(Protocol):
    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int | None
    ) -> ChatReply: ...


class EngineChat:
    """One chat completion per call on ``engine``, sampled as ``sampling`` says with the call's own seed."""

    def __init__(self, engine: Engine, tokenizer: PreTrainedTokenizerBase, sampling: SamplingParams):
        self.engine = engine
        self.tokenizer = tokenizer
        stop = tuple(sampling.stop_token_ids or end_of_turn_ids(tokenizer))
        self.sampling = dataclasses.replace(sampling, stop_token_ids=stop)

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int | None
    ) -> ChatReply:
        return self.complete(encode_chat(self.tokenizer, messages, tools), messages, seed)

    def complete(self, prompt_ids: list[int], messages: list[dict[str, Any]], seed: int | None) -> ChatReply:
        """The reply to ``messages`` already rendered as ``prompt_ids`` with this model's tokenizer (an episode
        renders every prompt itself: :class:`agemem.rollouts.chat_driver.ChatDriver` hands its ids over)."""
        sampling = dataclasses.replace(self.sampling, seed=seed)
        snapshot = [dict(message) for message in messages]  # the dialogue goes on appending to its own list
        (completion,) = self.engine.generate([prompt_ids], sampling, messages=[snapshot])
        if completion.finish_reason == "error":
            return ChatReply("", len(prompt_ids), 0, completion.error or "the engine returned an error")
        if completion.text is not None:  # chat endpoints: their own text is the truth
            text = completion.text
        else:
            ids = list(completion.token_ids)
            if ids and ids[-1] in self.sampling.stop_token_ids:
                ids = ids[:-1]
            text = self.tokenizer.decode(ids)
        return ChatReply(text, len(prompt_ids), len(completion.token_ids), finish_reason=completion.finish_reason)

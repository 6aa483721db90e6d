"""Chat-template rendering and token counting with the policy's own tokenizer.

Context size is always measured by rendering the messages through the tokenizer's chat
template and counting the ids, the way the policy will see them (never characters / 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agemem.config import BUNDLED_TOKENIZER
from agemem.configlib import ConfigError
from agemem.resources import resolve

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ChatMessages = list[dict[str, Any]]


def load_tokenizer(name: str = BUNDLED_TOKENIZER) -> PreTrainedTokenizerBase:
    """Load a tokenizer with a chat template: ``bundled:qwen2.5-instruct``, a local dir or a hub id."""
    from transformers import AutoTokenizer

    path = resolve(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"tokenizer {name!r} could not be loaded ({err}); give a local directory with tokenizer files, "
            f"a hub id in the local cache, or {BUNDLED_TOKENIZER!r}"
        ) from err
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"tokenizer {name!r} has no chat_template; use an instruct/chat model's tokenizer")
    return tokenizer


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: ChatMessages,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def encode_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: ChatMessages,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
) -> list[int]:
    """Prompt token ids exactly as the policy sees them.

    Rendered to text first and then encoded without extra specials: across transformers
    versions ``apply_chat_template(tokenize=True)`` returns either a list or a BatchEncoding.
    """
    text = render_chat(tokenizer, messages, tools, add_generation_prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class TokenCounter(Protocol):
    def count(self, messages: ChatMessages, tools: list[dict[str, Any]] | None = None) -> int: ...


class ChatTemplateTokenCounter:
    """Counts the prompt tokens of a message list, generation prompt included."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self.tokenizer = tokenizer

    def count(self, messages: ChatMessages, tools: list[dict[str, Any]] | None = None) -> int:
        return len(encode_chat(self.tokenizer, messages, tools, add_generation_prompt=True))

"""Chat-template rendering and token counting with the policy's own tokenizer.

Context size is always measured by rendering the messages through the tokenizer's chat
template and counting the ids, the way the policy will see them (never characters / 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agemem.core.config import BUNDLED_TOKENIZER
from agemem.core.configlib import ConfigError
from agemem.core.resources import require_local_folder, resolve

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ChatMessages = list[dict[str, Any]]


def load_tokenizer(name: str = BUNDLED_TOKENIZER) -> PreTrainedTokenizerBase:
    """Load a tokenizer with a chat template: ``bundled:qwen2.5-instruct``, a local dir or a hub id."""
    from transformers import AutoTokenizer

    require_local_folder(name, "tokenizer", f"a hub id (namespace/name) or {BUNDLED_TOKENIZER!r}")
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


_TURN_MARKER = "\u2063AGEMEM_TURN_END\u2063"


def end_of_turn_ids(tokenizer: PreTrainedTokenizerBase) -> tuple[int, ...]:
    """Token ids that end an assistant turn: the one the chat template writes after the reply
    (``<|im_end|>`` for Qwen), then the tokenizer's eos if different.

    Found by rendering a one-turn conversation, so it works for any chat template.
    """
    rendered = render_chat(
        tokenizer,
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _TURN_MARKER}],
        add_generation_prompt=False,
    )
    ids: list[int] = []
    if _TURN_MARKER in rendered:
        tail = tokenizer(rendered.split(_TURN_MARKER, 1)[1], add_special_tokens=False)["input_ids"]
        special = set(tokenizer.all_special_ids) | {
            i for i, t in tokenizer.added_tokens_decoder.items() if getattr(t, "special", False)
        }
        ids.extend(tail[:1] if tail and tail[0] in special else [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the tokenizer has no end-of-turn token in its chat template and no eos token")
    return tuple(ids)

"""A small tokenizer trained on a task's own text, with a ChatML chat template in Qwen's tool format.

The real Qwen vocabulary (151k ids) makes the embedding and LM head of a tiny model dominate its
cost, and spends several ids on every invented name. A byte-level BPE trained on the text the
agent will actually see (facts, questions, tool calls, tool responses) keeps sequences short and
the model small enough to train on a laptop CPU, while every string still round-trips (bytes are
the fallback), so any text the model samples decodes and any tool output encodes.

The chat template renders conversations exactly as Qwen2.5's does (``<|im_start|>role ...
<|im_end|>``, tool results as ``<tool_response>`` blocks in a user turn, native ``tools=`` in the
system turn), minus Qwen's default system prompt, so the agent's protocol is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, IM_END)
# The protocol's tags, one id each (as in Qwen's vocabulary, where <tool_call> is an added token):
# the model emits a tag in one decision instead of spelling it out byte by byte.
TAG_TOKENS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "<tool_response>",
    "</tool_response>",
)

CHATML_TOOLS_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": '
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + tool_call.name + \'", "arguments": \' }}'
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Qwen2.5's conversation format (same bytes for the same messages), without its default system prompt."""


def train_task_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> PreTrainedTokenizerFast:
    """A byte-level BPE of ``vocab_size`` ids (specials and tags included) trained on ``texts``.

    Deterministic for the same texts in the same order. The result has the ChatML template,
    ``<|im_end|>`` as eos (the end of an assistant turn) and ``<|endoftext|>`` as pad.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    reserved = len(SPECIAL_TOKENS) + len(TAG_TOKENS)
    if vocab_size < 256 + reserved + 1:
        raise ValueError(f"vocab_size={vocab_size} must exceed the 256 byte ids plus {reserved} special/tag tokens")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TAG_TOKENS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte has an id: nothing is ever unknown
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START, IM_END],
        clean_up_tokenization_spaces=False,
        model_max_length=32_768,
    )
    tokenizer.add_tokens(list(TAG_TOKENS))
    tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
    return tokenizer


def save_task_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: str | Path) -> Path:
    """Write the tokenizer (with its chat template) so ``AutoTokenizer.from_pretrained(directory)`` loads it."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    return path

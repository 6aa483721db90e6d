"""The small task tokenizer: Qwen's conversation bytes, one id per protocol tag, lossless round trips."""

from __future__ import annotations

import pytest

from agemem.core.chat import encode_chat, end_of_turn_ids, load_tokenizer, render_chat
from agemem.core.tools import tool_schemas
from agemem.recipes.learn.task_tokenizer import TAG_TOKENS, save_task_tokenizer, train_task_tokenizer
from agemem.tasks.synthetic import generate_synthetic_tasks

CONVERSATION = [
    {"role": "system", "content": "Manage your memory."},
    {"role": "user", "content": "Velora Quint plays the cello."},
    {"role": "assistant", "content": '<think>Keep.</think><tool_call>[{"name": "Add_memory"}]</tool_call>'},
    {"role": "tool", "content": '{"ok": true}'},
    {"role": "tool", "content": '{"ok": false}'},
    {"role": "assistant", "content": "<think>Done.</think><answer>OK</answer>"},
]


@pytest.fixture(scope="module")
def task_tokenizer(tmp_path_factory):
    tasks = generate_synthetic_tasks(200, seed=1)
    texts = sorted({text for t in tasks for text in (t.question, *t.distractors, *(p.text for p in t.contexts))})
    directory = save_task_tokenizer(train_task_tokenizer(texts, vocab_size=600), tmp_path_factory.mktemp("tok"))
    return load_tokenizer(str(directory))  # through the same loader as a policy's tokenizer


def test_renders_conversations_byte_for_byte_like_qwen(task_tokenizer, qwen_tokenizer):
    for tools in (None, tool_schemas()):
        assert render_chat(task_tokenizer, CONVERSATION, tools) == render_chat(qwen_tokenizer, CONVERSATION, tools)


def test_vocabulary_size_tags_and_end_of_turn(task_tokenizer):
    assert len(task_tokenizer) == 600
    for tag in TAG_TOKENS:
        assert len(task_tokenizer.tokenize(tag)) == 1
    assert task_tokenizer.convert_ids_to_tokens(list(end_of_turn_ids(task_tokenizer))) == ["<|im_end|>"]
    assert task_tokenizer.pad_token == "<|endoftext|>"


def test_any_text_round_trips_and_unseen_names_still_encode(task_tokenizer):
    rendered = render_chat(task_tokenizer, CONVERSATION)
    ids = encode_chat(task_tokenizer, CONVERSATION)
    assert task_tokenizer.decode(ids) == rendered
    for text in ("Zqxj Wvvk lives in Ürümqi ✓", "tabs\tand\nnewlines", '{"a": [1, 2]}'):
        assert task_tokenizer.decode(task_tokenizer(text, add_special_tokens=False)["input_ids"]) == text


def test_is_compact_on_task_text(task_tokenizer, qwen_tokenizer):
    held_out = generate_synthetic_tasks(20, seed=77)
    text = " ".join(p.text for t in held_out for p in t.contexts)
    small, qwen = len(task_tokenizer(text)["input_ids"]), len(qwen_tokenizer(text)["input_ids"])
    # within 1.5x of Qwen's 151k-id vocabulary with 600 ids (measured 1.23x: 2.5 bytes an id, Qwen 3.1)
    assert small < 1.5 * qwen
    assert len(text.encode()) > 2 * small


def test_rejects_a_vocabulary_too_small_for_bytes_and_specials():
    with pytest.raises(ValueError, match="vocab_size=200"):
        train_task_tokenizer(["text"], vocab_size=200)

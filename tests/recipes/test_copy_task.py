"""Copy-task data: the repeat is where the mask says, no special token is ever used, and a model learns it."""

from __future__ import annotations

import itertools
import math

import torch

from agemem.recipes.learn.copy_task import (
    CopySettings,
    copy_batch,
    copy_rows,
    copy_sequence,
    copyable_token_ids,
    induction_warmup,
    word_span,
)
from agemem.recipes.learn.task_tokenizer import TAG_TOKENS, train_task_tokenizer
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import tiny_qwen2_config


def _tokenizer():
    texts = [f"Velora Quint{i} plays the cello and lives in Oslo number {i}." for i in range(40)]
    return train_task_tokenizer(texts, vocab_size=320)


def test_copy_sequence_repeats_the_span_and_masks_all_but_its_first_token():
    vocabulary_V = torch.arange(100, 200)
    ids, mask = copy_sequence(vocabulary_V, length=20, span=5, gap=3, generator=torch.Generator().manual_seed(0))
    # layout: prefix (20 - 2*5 - 3 = 7) | S (5) | middle (3) | S (5)
    assert len(ids) == len(mask) == 20
    assert ids[15:20] == ids[7:12]
    assert mask == [0] * 16 + [1] * 4
    assert all(100 <= i < 200 for i in ids)


def test_word_spans_recur_inside_themselves_and_are_copied_whole():
    vocabulary_V = torch.arange(1000, 9000)  # 8,000 ids: unique random spans would almost never repeat a token
    generator = torch.Generator().manual_seed(1)
    spans = [word_span(vocabulary_V, 24, generator) for _ in range(200)]
    assert all(len(span) == 24 and all(1000 <= t < 9000 for t in span) for span in spans)
    repeated = [sum(span.count(t) > 1 for t in span) / 24 for span in spans]
    assert sum(repeated) / len(repeated) > 0.5  # most positions hold a token that occurs elsewhere in the span

    # ... so the token before a position often does not identify it: some token has two different successors
    def ambiguous(span):
        successors = {}
        for token, following in itertools.pairwise(span):
            successors.setdefault(token, set()).add(following)
        return any(len(options) > 1 for options in successors.values())

    assert sum(map(ambiguous, spans)) / len(spans) > 0.5
    ids, mask = copy_sequence(vocabulary_V, 40, 10, 4, torch.Generator().manual_seed(2), words=True)
    assert ids[30:40] == ids[16:26] and mask == [0] * 31 + [1] * 9


def test_copy_rows_use_only_ordinary_tokens_and_fit_their_lengths():
    tokenizer = _tokenizer()
    ordinary = set(copyable_token_ids(tokenizer))
    specials = {tokenizer.convert_tokens_to_ids(t) for t in (*TAG_TOKENS, "<|im_end|>", "<|im_start|>")}
    assert not ordinary & specials
    rows = copy_rows(tokenizer, 50, lengths=(16, 60), seed=3)
    for ids, mask in zip(rows["input_ids"], rows["completion_mask"], strict=True):
        assert 16 <= len(ids) <= 60 and len(mask) == len(ids)
        assert set(ids) <= ordinary
        span = sum(mask) + 1  # the masked repeat, plus its unmasked first token
        assert mask[-span:] == [0] + [1] * (span - 1) and not any(mask[:-span])
        # the repeated span occurs earlier in the sequence
        assert any(ids[i : i + span] == ids[-span:] for i in range(len(ids) - 2 * span + 1))


def test_copy_batch_labels_only_the_repeat():
    settings = CopySettings(batch_size=3, span=(6, 6), gap=(2, 2))
    input_ids_BT, labels_BT = copy_batch(torch.arange(10, 50), settings, torch.Generator().manual_seed(0))
    assert input_ids_BT.shape == (3, 14)  # 2 x 6 + 2
    assert torch.equal(input_ids_BT[:, 8:], input_ids_BT[:, :6])
    assert (labels_BT[:, :9] == -100).all()
    assert torch.equal(labels_BT[:, 9:], input_ids_BT[:, 9:])


def test_induction_warmup_teaches_a_small_model_to_copy():
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    model_config = tiny_qwen2_config(PolicyConfig(tiny_hidden_size=64, tiny_layers=1), len(tokenizer))
    from transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM(model_config)
    # a fixed span and gap: copying is a fixed-offset lookup one layer learns in 150 steps (measured 5.4 -> 0.13)
    settings = CopySettings(
        steps=150, learning_rate=5e-3, batch_size=16, span=(6, 6), gap=(0, 0), word_share=0.0, progress=False
    )
    metrics = induction_warmup(model, tokenizer, settings)
    chance = math.log(len(copyable_token_ids(tokenizer)))
    assert abs(metrics["copy_first_loss"] - chance) < 0.5  # a random model: ln(|ordinary vocabulary|) nats
    assert metrics["copy_final_loss"] < 0.1 * chance
    assert len(metrics["copy_curve"]) == 3  # every 50 steps

"""The loss and the sampler use one distribution: with top-k / top-p the trainer's log-probs are those of the
truncated distribution the engine draws from, and the engine reports the same numbers."""

from __future__ import annotations

import math

import pytest
import torch

from agemem.core.chat import end_of_turn_ids, load_tokenizer
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.engines.base import SamplingParams
from agemem.rollouts.engines.transformers_engine import TransformersEngine
from agemem.rollouts.policy import load_policy
from agemem.train.policy import TokenLogprobs, chosen_token_logprobs

LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
# softmax(LOGITS) = [0.6439, 0.2369, 0.0871, 0.0321]; the mass ranked above each token: [0, 0.644, 0.881, 0.968]


def test_without_truncation_it_is_the_plain_log_softmax():
    targets = torch.tensor([1])
    expected = torch.log_softmax(LOGITS / 0.5, dim=1)[0, 1]
    assert chosen_token_logprobs(LOGITS, targets, 0.5).item() == pytest.approx(expected.item(), abs=1e-6)


@pytest.mark.parametrize(("top_k", "top_p"), [(2, 1.0), (0, 0.8), (3, 0.8)])
def test_a_kept_token_is_normalised_over_the_kept_set(top_k, top_p):
    # top-k 2, top-p 0.8 (the third token has 0.881 ranked above it) and both together keep tokens 0 and 1:
    # log pi(0) = 2 - log(e^2 + e^1) = -log(1 + e^-1) = -0.31326
    value = chosen_token_logprobs(LOGITS, torch.tensor([0]), 1.0, top_k, top_p).item()
    assert value == pytest.approx(-math.log(1 + math.exp(-1)), abs=1e-6)
    # log pi(1) = 1 - log(e^2 + e^1) = -log(1 + e) = -1.31326
    value = chosen_token_logprobs(LOGITS, torch.tensor([1]), 1.0, top_k, top_p).item()
    assert value == pytest.approx(-math.log(1 + math.e), abs=1e-6)


def test_a_token_outside_the_kept_set_gets_a_finite_log_prob_and_gradient():
    # token 3 is outside {0, 1}: it joins the normaliser, log pi(3) = -1 - log(e^2 + e^1 + e^-1) = -3.35917
    logits = LOGITS.clone().requires_grad_(True)
    value = chosen_token_logprobs(logits, torch.tensor([3]), 1.0, 2, 1.0)
    assert value.item() == pytest.approx(-1 - math.log(math.exp(2) + math.exp(1) + math.exp(-1)), abs=1e-6)
    value.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, 2].item() == 0.0  # a dropped token has no say


def test_the_engine_reports_the_log_probs_the_trainer_computes():
    tokenizer = load_tokenizer()
    lm, _ = load_policy(PolicyConfig(model="tiny-random-qwen2", device="cpu", dtype="float32"))
    engine = TransformersEngine(lm, tokenizer, batch_size=2)
    prompts = [tokenizer("Remember the date.", add_special_tokens=False)["input_ids"], [tokenizer.eos_token_id] * 3]
    sampling = SamplingParams(
        temperature=0.8, top_p=0.7, top_k=50, max_tokens=12, seed=3, stop_token_ids=tuple(end_of_turn_ids(tokenizer))
    )
    completions = engine.generate(prompts, sampling)
    trainer = TokenLogprobs(lm, temperature=0.8, top_k=50, top_p=0.7)
    untruncated = TokenLogprobs(lm, temperature=0.8)
    differs = 0
    for prompt, completion in zip(prompts, completions):
        ids = torch.tensor([list(prompt) + list(completion.token_ids)])
        cols = torch.arange(len(prompt), ids.shape[1])
        rows = torch.zeros_like(cols)
        with torch.no_grad():
            ours = trainer(ids, torch.ones_like(ids), rows, cols)
            plain = untruncated(ids, torch.ones_like(ids), rows, cols)
        assert ours.tolist() == pytest.approx(completion.logprobs, abs=1e-4)
        assert (ours >= plain - 1e-6).all()  # renormalising over fewer tokens never lowers a kept token's log-prob
        differs += int((ours - plain).abs().max() > 1e-3)
    assert differs == len(prompts)  # the truncation is real on this model: the two distributions differ

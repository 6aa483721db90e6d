"""Parity with TRL: our GRPO loss equals ``trl.GRPOTrainer``'s on identical single-turn inputs.

TRL's own loss code is run, not a re-implementation of it: a real ``GRPOTrainer`` is built offline on
CPU around the embedded tiny random Qwen2 model (saved to a temporary directory and passed by path, so
that TRL builds its reference model from it as it does with ``beta > 0``) and its ``compute_loss`` is
called on an ``inputs`` dict of the form ``_generate_and_score_completions`` produces (prompt/completion
ids and masks, advantages, old and reference per-token log-probs, ``num_items_in_batch``). No generation,
reward function or optimizer step runs. The same sequences go through our side: ``TrainSample`` ->
``collate`` with the ``token_weights`` of the aggregation rule -> ``TokenLogprobs`` on the *same* model
object -> ``grpo_token_loss`` -> ``Σ w_t·ℓ_t``, with the same old/reference log-probs and advantages.

Correspondence (one sequence = one LLM step here, so steps and sequences coincide):

* our ``"sequence_mean"`` (1 / (n_i · num_steps)) == TRL ``loss_type="grpo"`` (mean over sequences of each
  sequence's token mean); also under gradient accumulation, where TRL divides each micro-batch's mean
  by the number of accumulation steps (equal-sized micro-batches);
* our ``"token_mean"`` (1 / total completion tokens) == TRL ``loss_type="dapo"`` (token sum divided by
  ``num_items_in_batch``, the completion tokens of the whole generation batch), also under gradient
  accumulation; == TRL ``"bnpo"`` only for a single micro-batch: under accumulation ``"bnpo"`` takes
  each micro-batch's own token mean, which differs when micro-batches hold different token counts.

The old log-probs are perturbed away from the current ones so that the ratio differs from 1 and the
clip is active on some tokens (both the ``1 - ε_low`` side with A < 0 and the ``1 + ε_high`` side with
A > 0), ``beta > 0`` with reference log-probs that differ from the current ones, and a sampling
temperature != 1 on both sides. Losses and gradients w.r.t. every model parameter are compared.

TRL settings the parity needs (TRL 1.16 defaults differ): ``bf16=False`` (TRL turns on bf16 autocast by
default, on CPU too, which moves log-probs by ~1e-3), ``use_bias_correction_kl=False`` (TRL weights
the k3 term by the differentiable ratio by default: same loss value on-policy, different gradient; see
the last test), and prompts of equal length (TRL left-pads prompts without passing position ids, our
``collate`` right-pads rows).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the tiny model is built from a config

import pytest
import torch

pytest.importorskip("trl")

from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import load_policy
from agemem.train.loss import grpo_token_loss
from agemem.train.policy import TokenLogprobs
from agemem.train.samples import TrainSample
from agemem.train.update import collate, token_weights

TEMPERATURE = 0.7
BETA = 0.1
EPS_LOW, EPS_HIGH = 0.2, 0.28
PROMPT_LEN = 5
COMPLETION_LENS = [6, 2, 8, 3]  # unequal, so token-mean and sequence-mean weights differ
ADVANTAGES = [1.0, -1.0, 0.7, -0.4]  # two groups of two generations, both signs


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    """The tiny random Qwen2 policy saved once; every trainer loads the same weights from it."""
    model, tokenizer = load_policy(PolicyConfig(device="cpu"))
    path = tmp_path_factory.mktemp("tiny_policy")
    model.save_pretrained(path)
    return path, tokenizer


def make_trainer(policy_dir, tmp_path, loss_type: str, micro_batches: int, use_bias_correction_kl: bool = False):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    path, tokenizer = policy_dir
    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        report_to="none",
        use_cpu=True,
        bf16=False,  # TRL defaults to bf16 autocast (also on CPU); both sides in fp32 here
        per_device_train_batch_size=len(COMPLETION_LENS) // micro_batches,
        gradient_accumulation_steps=micro_batches,  # steps_per_generation defaults to the same
        num_generations=2,
        max_completion_length=max(COMPLETION_LENS),
        temperature=TEMPERATURE,
        beta=BETA,
        epsilon=EPS_LOW,
        epsilon_high=EPS_HIGH,
        loss_type=loss_type,
        # TRL 1.16 multiplies the KL term by the (differentiable) ratio by default; ours is the plain k3 term
        use_bias_correction_kl=use_bias_correction_kl,
        logging_strategy="no",
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=str(path),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),  # never called
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["unused"] * 4}),
        processing_class=tokenizer,
    )
    assert trainer.ref_model is not None and trainer.beta == BETA
    assert trainer.accelerator.num_processes == 1
    # what Trainer's training loop sets before each accumulation window
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = micro_batches
    return trainer


def make_samples() -> list[TrainSample]:
    gen = torch.Generator().manual_seed(0)
    samples = []
    for n, advantage in zip(COMPLETION_LENS, ADVANTAGES):
        ids = torch.randint(10, 20_000, (PROMPT_LEN + n,), generator=gen).tolist()
        samples.append(
            TrainSample(
                input_ids_T=ids,
                completion_mask_T=[0] * PROMPT_LEN + [1] * n,
                engine_logprobs_T=[0.0] * (PROMPT_LEN + n),
                segment_lengths=[n],
                advantage=advantage,
            )
        )
    return samples


def old_and_ref_logprobs(policy: TokenLogprobs, samples, pad_id: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per sample: the current log-probs perturbed, as old log-probs (the policy moved since sampling)
    and as reference log-probs (the policy moved away from the reference)."""
    indices = list(range(len(samples)))
    batch = collate(samples, indices, {i: [0.0] * samples[i].completion_tokens for i in indices}, pad_id, "cpu")
    with torch.no_grad():
        current_N = policy(batch.input_ids_BT, batch.attention_mask_BT, batch.rows_N, batch.cols_N)
    gen = torch.Generator().manual_seed(1)
    old_N = current_N + 0.4 * torch.randn(current_N.shape, generator=gen)
    ref_N = current_N + 0.5 * torch.randn(current_N.shape, generator=gen)
    old = [old_N[start:end] for _, start, end in batch.sample_slices]
    ref = [ref_N[start:end] for _, start, end in batch.sample_slices]
    return old, ref


def trl_inputs(samples, indices, old, ref, pad_id: int) -> dict[str, torch.Tensor]:
    """The dict ``GRPOTrainer._compute_loss`` reads: equal-length prompts (no left padding, so TRL's and
    our position ids agree), right-padded completions. ``old=None``: on-policy, TRL then uses the detached
    log-probs of its own forward, as in its training loop with one iteration per generation."""
    width = max(samples[i].completion_tokens for i in indices)
    completion_ids = torch.full((len(indices), width), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((len(indices), width), dtype=torch.long)
    old_BC = torch.zeros((len(indices), width))
    ref_BC = torch.zeros((len(indices), width))
    for row, i in enumerate(indices):
        n = samples[i].completion_tokens
        completion_ids[row, :n] = torch.tensor(samples[i].input_ids_T[PROMPT_LEN:])
        completion_mask[row, :n] = 1
        ref_BC[row, :n] = ref[i]
        if old is not None:
            old_BC[row, :n] = old[i]
    inputs = {
        "prompt_ids": torch.tensor([samples[i].input_ids_T[:PROMPT_LEN] for i in indices]),
        "prompt_mask": torch.ones((len(indices), PROMPT_LEN), dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.tensor([samples[i].advantage for i in indices]),
        "ref_per_token_logps": ref_BC,
        # completion tokens of the whole generation batch (all micro-batches), as TRL computes it
        "num_items_in_batch": torch.tensor(sum(s.completion_tokens for s in samples)),
    }
    if old is not None:
        inputs["old_per_token_logps"] = old_BC
    return inputs


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def run_trl(trainer, samples, splits, old, ref, pad_id, backward=True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Sum of TRL's micro-batch losses (each already scaled for accumulation) and the accumulated gradient."""
    trainer.model.zero_grad(set_to_none=True)
    total = torch.zeros(())
    for indices in splits:
        with torch.set_grad_enabled(backward):
            loss = trainer.compute_loss(trainer.model, trl_inputs(samples, indices, old, ref, pad_id))
        if backward:
            loss.backward()
        total = total + loss.detach()
    return total, gradients(trainer.model)


def run_ours(model, samples, splits, rule, old, ref, pad_id, backward=True):
    """The loss path of ``agemem.train.update.policy_update``: weights fixed over the whole batch, then ``Σ w·ℓ``
    per micro-batch, gradients accumulated. ``old=None``: logp_old is the detached logp of the same forward
    (``policy_update`` with one epoch and one mini-batch)."""
    policy = TokenLogprobs(model, temperature=TEMPERATURE)
    weights = token_weights(samples, list(range(len(samples))), rule, None)
    model.zero_grad(set_to_none=True)
    total, clipped, advantage = torch.zeros(()), [], []
    for indices in splits:
        batch = collate(samples, indices, weights, pad_id, "cpu")
        with torch.set_grad_enabled(backward):
            logp_N = policy(batch.input_ids_BT, batch.attention_mask_BT, batch.rows_N, batch.cols_N)
            loss_N, parts = grpo_token_loss(
                logp_N,
                logp_N.detach() if old is None else torch.cat([old[i] for i in indices]),
                batch.advantage_N,
                eps_low=EPS_LOW,
                eps_high=EPS_HIGH,
                beta=BETA,
                ref_logp_N=torch.cat([ref[i] for i in indices]),
            )
            loss = (loss_N * batch.weight_N).sum()
        if backward:
            loss.backward()
        total = total + loss.detach()
        clipped.append(parts["clipped"])
        advantage.append(batch.advantage_N)
    return total, gradients(model), torch.cat(clipped), torch.cat(advantage)


def relative_gradient_error(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> float:
    """``‖g_ours − g_trl‖ / ‖g_trl‖`` over all parameters."""
    assert ours.keys() == theirs.keys() and len(ours) > 0
    diff = torch.sqrt(sum(((ours[k] - theirs[k]) ** 2).sum() for k in ours))
    return float(diff / torch.sqrt(sum((g**2).sum() for g in theirs.values())))


def setup(policy_dir, tmp_path, loss_type: str, splits, use_bias_correction_kl: bool = False):
    trainer = make_trainer(policy_dir, tmp_path, loss_type, len(splits), use_bias_correction_kl)
    pad_id = trainer.processing_class.pad_token_id
    samples = make_samples()
    old, ref = old_and_ref_logprobs(TokenLogprobs(trainer.model, temperature=TEMPERATURE), samples, pad_id)
    return trainer, pad_id, samples, old, ref


def test_per_token_logprobs_match_trl(policy_dir, tmp_path):
    """TRL's fused, chunked LM-head log-probs and ``TokenLogprobs`` agree token by token."""
    trainer, pad_id, samples, old, ref = setup(policy_dir, tmp_path, "dapo", [[0, 1, 2, 3]])
    inputs = trl_inputs(samples, [0, 1, 2, 3], old, ref, pad_id)
    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    batch = collate(
        samples, [0, 1, 2, 3], {i: [0.0] * s.completion_tokens for i, s in enumerate(samples)}, pad_id, "cpu"
    )
    with torch.no_grad():
        trl_logp_BC, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, attention_mask, inputs["completion_ids"].size(1)
        )
        our_logp_N = TokenLogprobs(trainer.model, temperature=TEMPERATURE)(
            batch.input_ids_BT, batch.attention_mask_BT, batch.rows_N, batch.cols_N
        )
    assert torch.equal(batch.input_ids_BT, input_ids)
    torch.testing.assert_close(our_logp_N, trl_logp_BC[inputs["completion_mask"].bool()], rtol=0, atol=1e-5)


def assert_parity(policy_dir, tmp_path, loss_type: str, rule: str, splits: list[list[int]]) -> None:
    trainer, pad_id, samples, old, ref = setup(policy_dir, tmp_path, loss_type, splits)

    trl_loss, trl_grads = run_trl(trainer, samples, splits, old, ref, pad_id)
    our_loss, our_grads, clipped_N, advantage_N = run_ours(trainer.model, samples, splits, rule, old, ref, pad_id)

    # the inputs exercise the clip on both sides (A > 0 above 1 + ε_high, A < 0 below 1 − ε_low), and
    # leave some tokens unclipped
    assert 0 < clipped_N.sum() < len(clipped_N)
    assert clipped_N[advantage_N > 0].sum() > 0 and clipped_N[advantage_N < 0].sum() > 0

    torch.testing.assert_close(our_loss, trl_loss, rtol=1e-5, atol=1e-8)
    # fp32 summation order differs (TRL's chunked LM-head kernel vs autograd through full logits): ~1e-6
    assert relative_gradient_error(our_grads, trl_grads) < 2e-5
    for name, grad in trl_grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=1e-4, atol=2e-5 * float(grad.abs().max()))


@pytest.mark.parametrize(
    ("loss_type", "rule"),
    [("grpo", "sequence_mean"), ("dapo", "token_mean"), ("bnpo", "token_mean")],
)
def test_single_batch_loss_and_gradients_match_trl(policy_dir, tmp_path, loss_type, rule):
    assert_parity(policy_dir, tmp_path, loss_type, rule, splits=[[0, 1, 2, 3]])


@pytest.mark.parametrize(("loss_type", "rule"), [("grpo", "sequence_mean"), ("dapo", "token_mean")])
def test_gradient_accumulation_matches_trl(policy_dir, tmp_path, loss_type, rule):
    # two micro-batches of two sequences with 8 and 11 completion tokens
    assert_parity(policy_dir, tmp_path, loss_type, rule, splits=[[0, 1], [2, 3]])


def test_bnpo_under_accumulation_is_not_a_global_token_mean(policy_dir, tmp_path):
    """Why ``token_mean`` maps to ``"dapo"``: with unequal micro-batch token counts (8 and 11), TRL's
    ``"bnpo"`` averages per micro-batch and departs from the global token mean."""
    splits = [[0, 1], [2, 3]]
    trainer, pad_id, samples, old, ref = setup(policy_dir, tmp_path, "bnpo", splits)
    trl_loss, _ = run_trl(trainer, samples, splits, old, ref, pad_id, backward=False)
    our_loss, *_ = run_ours(trainer.model, samples, splits, "token_mean", old, ref, pad_id, backward=False)
    assert not torch.allclose(our_loss, trl_loss, rtol=1e-3)


def test_trl_default_kl_bias_correction_changes_the_gradient_even_on_policy(policy_dir, tmp_path):
    """TRL's default ``use_bias_correction_kl=True`` weights the k3 term by the differentiable ratio
    ``ρ = exp(logp − logp_old)``: on-policy its value is 1, so the loss values agree, but the KL gradient
    gains ``k3·∇logp`` (the reverse-KL score term), which our plain ``β·k3`` lacks. Parity with TRL's
    gradients therefore needs ``use_bias_correction_kl=False``."""
    splits = [[0, 1, 2, 3]]
    trainer, pad_id, samples, _, ref = setup(policy_dir, tmp_path, "dapo", splits, use_bias_correction_kl=True)
    trl_loss, trl_grads = run_trl(trainer, samples, splits, None, ref, pad_id)
    our_loss, our_grads, *_ = run_ours(trainer.model, samples, splits, "token_mean", None, ref, pad_id)
    torch.testing.assert_close(our_loss, trl_loss, rtol=1e-5, atol=1e-8)
    assert relative_gradient_error(our_grads, trl_grads) > 1e-2

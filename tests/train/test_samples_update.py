"""Training samples (step merging, micro-batches) and the update: merged = unmerged, micro-batching
and accumulation leave the gradient unchanged."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from agemem.core.env import EpisodeStats
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.records import Step, Trajectory
from agemem.train.config import GRPOConfig, TrainConfig
from agemem.train.samples import build_samples, micro_batches, split_evenly


def make_step(prompt, completion, stage=1, logprobs=None):
    return Step(
        stage=stage,
        kind="action",
        turn=0,
        prompt_ids=list(prompt),
        completion_ids=list(completion),
        logprobs=list(logprobs) if logprobs is not None else [-1.0] * len(completion),
        finish_reason="stop",
        prompt_text="",
        completion_text="",
    )


def make_trajectory(seed: int = 0) -> Trajectory:
    """Four LLM steps: 1 -> 2 extend each other (tool result in between), 3 starts over (the context
    was rewritten), 4 extends 3."""
    rng = random.Random(seed)

    def ids(n):
        return [rng.randrange(10, 900) for _ in range(n)]

    p1, c1, env12, c2 = ids(12), ids(5), ids(4), ids(3)
    p3, c3, env34, c4 = ids(9), ids(6), ids(2), ids(4)
    steps = [
        make_step(p1, c1, logprobs=[-0.5] * 5),
        make_step(p1 + c1 + env12, c2, logprobs=[-0.25] * 3),
        make_step(p3, c3, stage=2),
        make_step(p3 + c3 + env34, c4, stage=3),
    ]
    return Trajectory("t", 0, "q", "a", steps, None, "round_limit", EpisodeStats())


def test_consecutive_prefix_steps_merge_into_one_sample():
    trajectory = make_trajectory()
    samples, stats = build_samples([trajectory], [0.7])
    assert len(samples) == 2 and stats.merged_steps == 2 and stats.llm_steps == 4
    first = samples[0]
    s2 = trajectory.steps[1]
    assert first.input_ids_T == s2.prompt_ids + s2.completion_ids
    # 12 prompt tokens masked, 5 completion, 4 environment tokens masked, 3 completion
    assert first.completion_mask_T == [0] * 12 + [1] * 5 + [0] * 4 + [1] * 3
    assert first.engine_logprobs_T == [0.0] * 12 + [-0.5] * 5 + [0.0] * 4 + [-0.25] * 3
    assert first.segment_lengths == [5, 3] and first.advantage == 0.7
    # forwarded: 24 + 21 = 45 tokens instead of (17 + 24) + (15 + 21) = 77
    assert stats.tokens_forwarded == 45 and stats.tokens_unmerged == 77 and stats.completion_tokens == 18
    unmerged, unmerged_stats = build_samples([trajectory], [0.7], merge=False)
    assert len(unmerged) == 4 and unmerged_stats.tokens_forwarded == 77


def test_a_rewritten_prompt_is_not_merged_and_empty_steps_are_skipped():
    trajectory = make_trajectory()
    trajectory.steps[1].prompt_ids[3] += 1  # one token differs: not a prefix any more
    trajectory.steps.append(make_step([1, 2, 3], []))
    samples, stats = build_samples([trajectory], [1.0])
    assert len(samples) == 3 and stats.merged_steps == 1 and stats.steps_without_completion == 1


def test_micro_batches_respect_the_token_budget():
    trajectory = make_trajectory()
    samples, _ = build_samples([trajectory, make_trajectory(1)], [1.0, -1.0], merge=False)
    lengths = [len(s) for s in samples]
    for budget in (30, 60, 1000):
        batches = micro_batches(samples, budget)
        assert sorted(i for b in batches for i in b) == list(range(len(samples)))
        for batch in batches:  # padded size fits, unless one sample alone is longer
            assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= budget
    assert len(micro_batches(samples, 1000)) == 1
    assert split_evenly(list(range(5)), 2) == [[0, 1, 2], [3, 4]]


# ------------------------------------------------------------------ the update on the tiny model


@pytest.fixture(scope="module")
def accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True)


def sgd_update(accelerator, samples, *, micro_batch_tokens=100_000, aggregation="token_mean", beta=0.1, tis_cap=None):
    """One policy_update with SGD(lr=1): the weight change is minus the gradient, exactly."""
    from agemem.rollouts.policy import load_policy
    from agemem.train.policy import Reference, TokenLogprobs
    from agemem.train.update import policy_update

    lm, _ = load_policy(PolicyConfig(device="cpu"))
    lm.to(torch.float64)  # float64: merged and unmerged sum the same terms in another order
    policy = TokenLogprobs(lm, temperature=0.7, chunk=7)  # small chunks: the chunked head is exercised
    reference = Reference.frozen_copy(copy.deepcopy(policy)) if beta > 0 else None
    with torch.no_grad():  # move the policy off the reference so the KL and its gradient are not zero
        for p in policy.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    prepared, optimizer = accelerator.prepare(policy, optimizer)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    grpo = GRPOConfig(beta=beta, loss_aggregation=aggregation, tis_cap=tis_cap)
    train = TrainConfig(micro_batch_tokens=micro_batch_tokens, max_grad_norm=0.0)
    metrics = policy_update(accelerator, prepared, optimizer, scheduler, reference, samples, grpo, train, pad_id=0)
    delta = {k: before[k] - v for k, v in policy.state_dict().items()}
    return metrics, delta


def assert_same_gradients(a, b):
    assert a.keys() == b.keys()
    changed = 0
    for key in a:
        # summation order differs (other batch shapes), so compare at 1e-6 of each tensor's scale: a wrong
        # weight or a mis-masked token moves gradients by whole percents
        scale = float(a[key].abs().max())
        torch.testing.assert_close(a[key], b[key], atol=1e-6 * scale + 1e-15, rtol=0)
        changed += bool(a[key].abs().max() > 0)
    assert changed > 0  # the update did something


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean"])
def test_merged_and_unmerged_give_the_same_loss_and_gradients(accelerator, aggregation):
    trajectories = [make_trajectory(0), make_trajectory(1)]
    merged, _ = build_samples(trajectories, [1.0, -0.5])
    unmerged, _ = build_samples(trajectories, [1.0, -0.5], merge=False)
    assert len(merged) < len(unmerged)
    m_metrics, m_delta = sgd_update(accelerator, merged, aggregation=aggregation)
    u_metrics, u_delta = sgd_update(accelerator, unmerged, aggregation=aggregation)
    assert m_metrics["loss"] == pytest.approx(u_metrics["loss"], rel=1e-5)
    assert m_metrics["kl"] == pytest.approx(u_metrics["kl"], rel=1e-5) and m_metrics["kl"] > 0
    assert_same_gradients(m_delta, u_delta)


def test_micro_batching_and_accumulation_leave_the_gradient_unchanged(accelerator):
    samples, _ = build_samples([make_trajectory(0), make_trajectory(1), make_trajectory(2)], [1.0, -0.5, 0.2])
    full_metrics, full = sgd_update(accelerator, samples, micro_batch_tokens=100_000)
    split_metrics, split = sgd_update(accelerator, samples, micro_batch_tokens=30)  # one sample per micro-batch
    assert len(micro_batches(samples, 30)) == len(samples) > 1
    assert full_metrics["loss"] == pytest.approx(split_metrics["loss"], rel=1e-5)
    assert_same_gradients(full, split)


def test_update_loss_matches_the_hand_formula(accelerator):
    """With one update, rho = 1 and the surrogate is -A per token; the token mean over 18 tokens of
    one trajectory with A = 0.5 is -0.5, plus beta x mean KL."""
    samples, _ = build_samples([make_trajectory(0)], [0.5])
    metrics, _ = sgd_update(accelerator, samples)
    assert metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["clip_fraction"] == 0.0
    assert metrics["loss"] == pytest.approx(-0.5 + 0.1 * metrics["kl"], rel=1e-5)
    # the engine said -0.5 / -0.25 / -1.0 per token; the tiny model's log-probs at T = 0.7 are near -ln(151k)/0.7
    assert metrics["mismatch_abs_logp"] > 5


def without_engine_logprobs(trajectory: Trajectory, indices: set[int]) -> Trajectory:
    for index in indices:
        trajectory.steps[index].logprobs = None
    return trajectory


def test_a_merged_step_without_log_probs_keeps_the_other_steps_log_probs():
    """Steps 1 and 2 merge; step 2 came without engine log-probs. Before, the whole merged sample lost them."""
    (first, second), _ = build_samples([without_engine_logprobs(make_trajectory(0), {1, 2})], [1.0])
    # sample 1 = step 1 (5 tokens, -0.5 each) + step 2 (3 tokens, unknown); sample 2 = step 3 (unknown) + step 4
    known = [lp for lp, k in zip(first.engine_logprobs_T, first.engine_known_T) if k]
    assert known == [-0.5] * 5 and sum(first.engine_known_T) == 5 and first.completion_tokens == 8
    assert sum(second.engine_known_T) == 4 and second.completion_tokens == 10


def test_tokens_without_engine_log_probs_leave_the_corrected_loss_instead_of_weighing_one(accelerator):
    """With grpo.tis_cap, a sample whose tokens have no engine log-prob adds nothing to the policy term: with
    beta = 0 and token-mean weights 1/T over all T tokens, the update on A + B_unknown is the update on A alone
    scaled by T_A / (T_A + T_B). Before, B's tokens were reweighted by 1 as if sampled by the trainer."""
    a, _ = build_samples([make_trajectory(0)], [1.0])
    b, _ = build_samples([without_engine_logprobs(make_trajectory(1), {0, 1, 2, 3})], [-0.5])
    tokens_a, tokens_b = (sum(s.completion_tokens for s in group) for group in (a, b))
    both_metrics, both = sgd_update(accelerator, a + b, beta=0.0, tis_cap=100.0)
    _, alone = sgd_update(accelerator, a, beta=0.0, tis_cap=100.0)
    assert both_metrics["tis_excluded_fraction"] == pytest.approx(tokens_b / (tokens_a + tokens_b))
    assert_same_gradients(both, {k: v * tokens_a / (tokens_a + tokens_b) for k, v in alone.items()})

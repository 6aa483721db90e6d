"""Advantages and the GRPO loss pieces, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from agemem.train.advantages import batch_std_advantages, compute_advantages, group_std_advantages, unscaled_advantages
from agemem.train.loss import clipped_surrogate, grpo_token_loss, k3_kl, sequence_mean_weights, token_mean_weights


def test_group_std_advantages_by_hand():
    # group 1: R = 1, 0, 0, 1 -> mean 0.5, sample std sqrt((4 x 0.25) / 3) = 0.57735 -> A = +-0.5 / 0.57735 = +-0.86603
    # group 2: all equal -> zero variance, A = 0
    result = group_std_advantages([[1.0, 0.0, 0.0, 1.0], [0.3, 0.3, 0.3, 0.3]], eps=0.0)
    assert result.values[0] == pytest.approx([0.86603, -0.86603, -0.86603, 0.86603], abs=1e-5)
    assert result.values[1] == [0.0] * 4 and result.zero_variance_groups == 1
    single = group_std_advantages([[2.0]], eps=1e-6)  # a group of one carries no comparison
    assert single.values == [[0.0]] and single.zero_variance_groups == 1


def test_batch_std_and_unscaled_advantages_by_hand():
    groups = [[1.0, 3.0], [0.0, 0.0]]
    # batch: all rewards 1, 3, 0, 0 -> mean 1, sample std sqrt((0 + 4 + 1 + 1) / 3) = sqrt(2) = 1.41421
    # group 1 centred: -1, +1 -> -0.70711, +0.70711; group 2 flat -> 0
    batch = batch_std_advantages(groups, eps=0.0)
    assert batch.values[0] == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)])
    assert batch.values[1] == [0.0, 0.0] and batch.zero_variance_groups == 1
    assert unscaled_advantages(groups, eps=0.0).values == [[-1.0, 1.0], [0.0, 0.0]]
    assert compute_advantages(groups, "none", 1e-6).values == [[-1.0, 1.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="advantage_scale='bogus'"):
        compute_advantages(groups, "bogus", 1e-6)


def test_clipped_surrogate_by_hand():
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 0.7]))  # with logp_old = 0: rho = 1.5, 0.5, 1.1, 0.7
    old = torch.zeros(4)
    adv = torch.tensor([1.0, 1.0, -2.0, -2.0])
    loss, clipped = clipped_surrogate(logp, old, adv, 0.2, 0.2)
    # token 1: A>0, rho 1.5 -> min(1.5, 1.2) = 1.2 -> loss -1.2 (clipped)
    # token 2: A>0, rho 0.5 -> min(0.5, 0.8) = 0.5 -> loss -0.5 (not clipped: the pessimistic side)
    # token 3: A<0, rho 1.1 -> min(-2.2, -2.2) -> loss 2.2 (inside the range)
    # token 4: A<0, rho 0.7 -> min(-1.4, 0.8 x -2 = -1.6) = -1.6 -> loss 1.6 (clipped)
    torch.testing.assert_close(loss, torch.tensor([-1.2, -0.5, 2.2, 1.6]))
    assert clipped.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_k3_kl_by_hand():
    logp = torch.tensor([0.0, math.log(0.5)])
    ref = torch.tensor([0.0, 0.0])
    # token 1: delta 0 -> e^0 - 0 - 1 = 0; token 2: delta = ln 2 -> 2 - 0.69315 - 1 = 0.30685
    torch.testing.assert_close(k3_kl(logp, ref), torch.tensor([0.0, 2 - math.log(2) - 1]))


def test_grpo_token_loss_with_kl_and_is_weight():
    logp = torch.tensor([math.log(0.5)])
    loss, parts = grpo_token_loss(
        logp, logp.clone(), torch.tensor([2.0]), eps_low=0.2, eps_high=0.2, beta=0.1, ref_logp_N=torch.tensor([0.0])
    )
    # rho = 1: surrogate -2; KL = 0.30685 (above); loss = -2 + 0.1 x 0.30685 = -1.969315
    torch.testing.assert_close(loss, torch.tensor([-2 + 0.1 * (1 - math.log(2))]))
    assert parts["clipped"].tolist() == [0.0]
    weighted, _ = grpo_token_loss(
        logp, logp.clone(), torch.tensor([2.0]), eps_low=0.2, eps_high=0.2, beta=0.0, is_weight_N=torch.tensor([0.5])
    )
    torch.testing.assert_close(weighted, torch.tensor([-1.0]))  # -2 x IS weight 0.5
    with pytest.raises(ValueError, match="reference"):
        grpo_token_loss(logp, logp, torch.tensor([1.0]), eps_low=0.2, eps_high=0.2, beta=0.1)


def test_aggregation_weights():
    # steps of 2 and 1 tokens here, 8 tokens and 4 steps in the global batch
    assert token_mean_weights([2, 1], 8, 4) == [1 / 8] * 3
    # sequence mean: each step weighs 1/4, split over its own tokens: 1/(2x4), 1/(2x4), 1/(1x4)
    assert sequence_mean_weights([2, 1], 8, 4) == [1 / 8, 1 / 8, 1 / 4]


def test_std_floor_keeps_a_hair_of_difference_small():
    # rewards 1.00 and 1.02: mean 1.01, sample std 0.01414; Eq. 5 scales the 0.01 deviations to +-0.7071
    hair = [[1.0, 1.02]]
    assert group_std_advantages(hair, eps=0.0).values[0] == pytest.approx([-0.70711, 0.70711], abs=1e-5)
    # floor 0.1: the denominator is max(0.01414, 0.1) = 0.1, so A = +-0.01 / 0.1 = +-0.1
    assert group_std_advantages(hair, eps=0.0, std_floor=0.1).values[0] == pytest.approx([-0.1, 0.1])
    # a group spread wider than the floor is untouched: [0, 1] has std 0.7071 > 0.1, A = +-0.5 / 0.7071
    assert group_std_advantages([[0.0, 1.0]], 0.0, 0.1).values[0] == pytest.approx([-0.70711, 0.70711], abs=1e-5)
    # batch scaling floors the batch std the same way; compute_advantages passes the floor through
    assert batch_std_advantages(hair, 0.0, 0.1).values[0] == pytest.approx([-0.1, 0.1])
    assert compute_advantages(hair, "group", 0.0, 0.1).values[0] == pytest.approx([-0.1, 0.1])

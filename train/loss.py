"""The step-wise GRPO objective (AgeMem §3.4, Eq. 6), one small pure function per piece.

Per completion token ``t`` of an LLM step with trajectory advantage ``A``::

    ρ_t      = exp(logp_t − logp_old_t)
    ℓ_t      = −min(ρ_t·A, clip(ρ_t, 1 − ε_low, 1 + ε_high)·A) + β·KL_t
    KL_t     = exp(ref_t − logp_t) − (ref_t − logp_t) − 1          (k3 estimator)

and the batch loss is ``Σ_t w_t·ℓ_t``, the weights ``w_t`` fixed by the aggregation rule over the
*global* batch before any micro-batching: summing micro-batch losses (and averaging gradients
over ranks, times the world size) gives exactly the full-batch loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def clipped_surrogate(
    logp_N: torch.Tensor, logp_old_N: torch.Tensor, advantage_N: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``−min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A)`` per token, with ``ρ = exp(logp − logp_old)`` (Eq. 6).

    Returns the per-token loss and a 0/1 mask of tokens where the clipped term was the smaller
    one and differed (no gradient flows through them: the clip fraction).
    """
    ratio_N = torch.exp(logp_N - logp_old_N)
    unclipped_N = ratio_N * advantage_N
    clipped_N = torch.clamp(ratio_N, 1.0 - eps_low, 1.0 + eps_high) * advantage_N
    was_clipped_N = (clipped_N < unclipped_N).float()
    return -torch.minimum(unclipped_N, clipped_N), was_clipped_N


def k3_kl(logp_N: torch.Tensor, ref_logp_N: torch.Tensor) -> torch.Tensor:
    """``exp(ref − logp) − (ref − logp) − 1`` per token, non-negative (Schulman's k3).

    Unbiased for KL(π_θ ‖ π_ref) only when the tokens are sampled from π_θ and π_ref covers π_θ's support: the
    bias is ``1 − E_θ[π_ref/π_θ]``, zero then. With top-k / top-p sampling the two are distributions truncated to
    different supports, E_θ[π_ref/π_θ] < 1 (measured 0.95, 0.85 and 0.37 at growing drift, issue 37), and k3
    underestimates; read ``train/kl`` as a penalty that grows with the drift, not as the KL itself."""
    delta_N = ref_logp_N - logp_N
    return torch.exp(delta_N) - delta_N - 1.0


def truncated_is_weight(logp_old_N: torch.Tensor, engine_logp_N: torch.Tensor, cap: float) -> torch.Tensor:
    """``min(exp(logp_old − logp_engine), cap)``, detached: corrects for sampling with an engine whose
    numerics differ from the trainer's (truncated importance sampling)."""
    return torch.clamp(torch.exp(logp_old_N - engine_logp_N), max=cap).detach()


def token_mean_weights(segment_lengths: Sequence[int], total_tokens: int, total_segments: int) -> list[float]:
    """Every completion token of the global batch weighs ``1 / total_tokens`` (default)."""
    del total_segments
    return [1.0 / total_tokens] * sum(segment_lengths)


def sequence_mean_weights(segment_lengths: Sequence[int], total_tokens: int, total_segments: int) -> list[float]:
    """A token of an LLM step with ``n`` completion tokens weighs ``1 / (n · total_segments)``: the mean
    over steps of each step's token mean (GRPO's original normalisation, per step)."""
    del total_tokens
    return [1.0 / (n * total_segments) for n in segment_lengths for _ in range(n)]


AGGREGATIONS: dict[str, Callable[[Sequence[int], int, int], list[float]]] = {
    "token_mean": token_mean_weights,
    "sequence_mean": sequence_mean_weights,
}


def grpo_token_loss(
    logp_N: torch.Tensor,
    logp_old_N: torch.Tensor,
    advantage_N: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    beta: float,
    ref_logp_N: torch.Tensor | None = None,
    is_weight_N: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``ℓ_t`` for every token (before the aggregation weights) and per-token diagnostics."""
    loss_N, was_clipped_N = clipped_surrogate(logp_N, logp_old_N, advantage_N, eps_low, eps_high)
    if is_weight_N is not None:
        loss_N = loss_N * is_weight_N
    parts = {"clipped": was_clipped_N}
    if beta > 0:
        if ref_logp_N is None:
            raise ValueError("beta > 0 needs the reference log-probs")
        kl_N = k3_kl(logp_N, ref_logp_N)
        loss_N = loss_N + beta * kl_N
        parts["kl"] = kl_N.detach()
    return loss_N, parts

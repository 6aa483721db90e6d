"""Group-relative advantages (AgeMem §3.4, Eq. 5), one per trajectory, broadcast to its steps.

Rewards arrive as groups: the K trajectories of one task. Each rule is a small pure function of
the grouped rewards; :func:`compute_advantages` picks one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import mean, stdev

Groups = Sequence[Sequence[float]]
"""rewards grouped by task: ``groups[g][k]`` is the reward of rollout k of task g."""


@dataclass(frozen=True)
class Advantages:
    values: list[list[float]]
    """``values[g][k]``: the advantage of rollout k of task g."""
    zero_variance_groups: int
    """groups whose rewards were all equal (their advantages are 0: no learning signal)."""


def _is_flat(group: Sequence[float]) -> bool:
    return len(group) < 2 or max(group) - min(group) == 0.0


def group_std_advantages(groups: Groups, eps: float, std_floor: float = 0.0) -> Advantages:
    """``A_k = (R_k − mean(R)) / (max(std(R), f) + eps)`` within each group, std the sample std (ddof 1) (Eq. 5
    with ``f = 0``).

    A group of one, or of equal rewards, gets ``A = 0``. The floor ``f`` (``grpo.advantage_std_floor``) keeps a
    group that differs only by a hair (a few context tokens of compression) from being blown up to ``A = ±1``: its
    advantages stay about ``spread / f``.
    """
    values = [
        [0.0] * len(g) if _is_flat(g) else [(r - mean(g)) / (max(stdev(g), std_floor) + eps) for r in g] for g in groups
    ]
    return Advantages(values, sum(_is_flat(g) for g in groups))


def batch_std_advantages(groups: Groups, eps: float, std_floor: float = 0.0) -> Advantages:
    """``A_k = (R_k − mean(group)) / (max(std(all rewards of the batch), f) + eps)`` (sample std over the batch).

    Centred per group like Eq. 5, scaled by one batch-wide std, so groups with a small spread
    are not blown up; flat groups still get 0.
    """
    everything = [r for g in groups for r in g]
    scale = max(stdev(everything) if len(everything) > 1 else 0.0, std_floor) + eps
    values = [[0.0] * len(g) if _is_flat(g) else [(r - mean(g)) / scale for r in g] for g in groups]
    return Advantages(values, sum(_is_flat(g) for g in groups))


def unscaled_advantages(groups: Groups, eps: float, std_floor: float = 0.0) -> Advantages:
    """``A_k = R_k − mean(R)`` within each group (Dr. GRPO style: no std division; ``eps`` and the floor unused)."""
    values = [[0.0] * len(g) if _is_flat(g) else [r - mean(g) for r in g] for g in groups]
    return Advantages(values, sum(_is_flat(g) for g in groups))


ADVANTAGE_RULES: dict[str, Callable[[Groups, float, float], Advantages]] = {
    "group": group_std_advantages,
    "batch": batch_std_advantages,
    "none": unscaled_advantages,
}


def compute_advantages(groups: Groups, scale: str, eps: float, std_floor: float = 0.0) -> Advantages:
    """The rule named by ``grpo.advantage_scale``, with ``grpo.advantage_eps`` and ``grpo.advantage_std_floor``."""
    try:
        rule = ADVANTAGE_RULES[scale]
    except KeyError:
        raise ValueError(f"advantage_scale={scale!r}; choose one of {sorted(ADVANTAGE_RULES)}") from None
    return rule(groups, eps, std_floor)

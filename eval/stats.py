"""Small statistics for comparing evaluation runs: binomial confidence intervals and paired tests.

* :func:`wilson_interval`: the Wilson score interval of a success proportion (what TraceRetain reports);
* :func:`sign_test`: the exact two-sided sign test of two strategies run on the same tasks in the same order
  (a task counts for the first when it succeeded there and failed in the other, for the second the other way
  round; ties are dropped);
* :func:`bootstrap_interval`: the percentile bootstrap interval of any statistic of a run's items (what
  ``agemem compare`` reports beside each headline number).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from scipy.stats import binomtest

Item = TypeVar("Item")


def bootstrap_interval(
    items: Sequence[Item],
    statistic: Callable[[list[Item]], float | None],
    *,
    samples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of ``statistic`` over ``items`` (Efron & Tibshirani 1993, ch. 13).

    Draw ``samples`` resamples of ``n = len(items)`` items with replacement (NumPy's PCG64 seeded with ``seed``, so
    the interval is the same on every call); ``θ*_b = statistic(resample_b)``; the interval is the
    ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the ``θ*_b`` (linear interpolation). The
    statistic is the benchmark's own aggregate, so the interval is of exactly the number the table shows. None when
    there are fewer than two items or no resample gives a number.
    """
    if len(items) < 2 or samples < 1:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(items), size=(samples, len(items)))
    values = [statistic([items[i] for i in row]) for row in draws]
    numbers = np.array([v for v in values if v is not None], dtype=float)
    if not len(numbers):
        return None
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(numbers, [tail, 1.0 - tail])
    return float(low), float(high)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of the proportion ``successes / n`` (no continuity correction).

    With ``p = successes / n`` and ``z`` the ``(1 + confidence) / 2`` normal quantile (1.96 for 95%):

        centre = (p + z² / 2n) / (1 + z² / n)
        half   = z / (1 + z² / n) · sqrt(p (1 − p) / n + z² / 4n²)

    and the interval is ``[centre − half, centre + half]`` clipped to [0, 1] (39 of 50 at 95%: [0.648, 0.872]),
    as computed by ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``. ``n = 0`` gives ``(0, 1)``:
    nothing is known.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must be in (0, 1)")
    if n == 0:
        return 0.0, 1.0
    interval = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


@dataclass(frozen=True)
class SignTest:
    wins: int
    """tasks the first strategy solved and the second did not."""
    losses: int
    """tasks the second strategy solved and the first did not."""
    ties: int
    """tasks both solved or both failed (not part of the test)."""
    p_value: float
    """exact two-sided binomial p-value of ``wins`` among ``wins + losses`` under p = 1/2 (1.0 with no
    discordant task)."""

    def to_json(self) -> dict[str, float | int]:
        return {"wins": self.wins, "losses": self.losses, "ties": self.ties, "p_value": self.p_value}


def sign_test_counts(wins: int, losses: int, ties: int = 0) -> SignTest:
    """The exact two-sided sign test from its counts: ``P = binomtest(wins, wins + losses, 1/2)`` two-sided,
    i.e. ``min(1, 2 · P(X ≤ min(wins, losses)))`` for ``X ~ Binomial(wins + losses, 1/2)`` (11 wins, 0 losses:
    2 / 2¹¹ ≈ 0.00098)."""
    if min(wins, losses, ties) < 0:
        raise ValueError(f"counts must be >= 0, got wins={wins}, losses={losses}, ties={ties}")
    discordant = wins + losses
    p_value = 1.0 if discordant == 0 else float(binomtest(wins, discordant, 0.5, alternative="two-sided").pvalue)
    return SignTest(wins, losses, ties, p_value)


def sign_test(first: Sequence[bool | float], second: Sequence[bool | float]) -> SignTest:
    """The paired sign test of two strategies' per-task outcomes (same tasks, same order; a value counts as a
    success when it is truthy, e.g. 1.0)."""
    if len(first) != len(second):
        raise ValueError(f"paired outcomes must have the same length, got {len(first)} and {len(second)}")
    wins = sum(1 for a, b in zip(first, second) if bool(a) and not bool(b))
    losses = sum(1 for a, b in zip(first, second) if bool(b) and not bool(a))
    return sign_test_counts(wins, losses, len(first) - wins - losses)

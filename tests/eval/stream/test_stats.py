"""Wilson intervals and the exact sign test against known values."""

from __future__ import annotations

import pytest

from agemem.eval.stats import sign_test, sign_test_counts, wilson_interval


def test_wilson_interval_of_39_of_50():
    low, high = wilson_interval(39, 50)
    assert (round(low, 3), round(high, 3)) == (0.648, 0.872)


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)  # 95% upper bound with no success
    low, high = wilson_interval(10, 10)
    assert high == pytest.approx(1.0) and low == pytest.approx(0.7225, abs=1e-4)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_sign_test_11_wins_0_losses():
    result = sign_test_counts(11, 0)
    assert result.p_value == pytest.approx(2 / 2**11)  # 0.00098
    assert round(result.p_value, 3) == 0.001


def test_sign_test_pairs_outcomes_and_drops_ties():
    first = [1, 1, 1, 0, 0, 1, 0]
    second = [0, 0, 1, 0, 1, 1, 0]
    result = sign_test(first, second)
    assert (result.wins, result.losses, result.ties) == (2, 1, 4)
    assert result.p_value == pytest.approx(1.0)  # 2 vs 1 of 3: P = 2 * P(X <= 1) = 2 * 4/8 > 1 → 1
    assert sign_test([1, 0], [1, 0]).p_value == 1.0  # no discordant task
    assert sign_test_counts(8, 2).p_value == pytest.approx(2 * (1 + 10 + 45) / 1024)
    with pytest.raises(ValueError, match="same length"):
        sign_test([1], [1, 0])

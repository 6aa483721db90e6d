"""Held-out evaluation statistics and per-episode scores, checked by hand."""

from __future__ import annotations

import math

import pytest

from agemem.recipes.learn.evaluate import EpisodeScore, mean_ci, mean_scores, paired_differences


def _score(task_id: str, em: float, reward: float = 0.0) -> EpisodeScore:
    return EpisodeScore(task_id, em, reward, 0.0, 0.0, 0.0, 0.0, 10.0, 5.0, 3.0, 0.0, None)


def test_mean_ci_is_the_student_t_interval():
    # values 1, 2, 3, 4: mean 2.5, sample sd sqrt(5/3) = 1.29099, se = 0.645497;
    # t_{0.975, 3} = 3.182446, half width 2.054255
    mean, low, high = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert low == pytest.approx(2.5 - 2.054255, abs=1e-5)
    assert high == pytest.approx(2.5 + 2.054255, abs=1e-5)
    # three seeds improving by 0.2, 0.3, 0.25: sd 0.05, se 0.028868, t_{0.975, 2} = 4.302653 -> +-0.124207
    mean, low, high = mean_ci([0.2, 0.3, 0.25])
    assert (mean, low, high) == pytest.approx((0.25, 0.125793, 0.374207), abs=1e-5)
    assert all(math.isnan(v) for v in mean_ci([0.4])[1:])
    with pytest.raises(ValueError):
        mean_ci([])


def test_paired_differences_match_tasks_by_id_not_position():
    before = [_score("a", 0.0), _score("b", 1.0), _score("c", 0.0)]
    after = [_score("c", 1.0), _score("a", 1.0), _score("b", 1.0)]
    assert paired_differences(before, after, "em") == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="same tasks"):
        paired_differences(before, [_score("z", 1.0), *after[1:]], "em")


def test_mean_scores_averages_every_metric():
    means = mean_scores([_score("a", 1.0, 0.5), _score("b", 0.0, -0.5)])
    assert means["em"] == 0.5
    assert means["reward"] == 0.0
    assert means["context_tokens"] == 10.0

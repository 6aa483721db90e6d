"""The order in which a stream's tasks arrive: as given, shuffled, or under distribution shift.

Distribution shift follows Xiong et al.: the query embeddings are clustered with a Gaussian mixture (3
diagonal-covariance components, seed 0 by default) and the clusters are played one after another, so the
agent meets one kind of task for a while, then another. The mixture is fitted here with EM in numpy
(:func:`fit_diagonal_gmm`), so the order needs no extra dependency and is the same on every machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

T = TypeVar("T")
_VAR_FLOOR = 1e-4  # keeps a component from collapsing onto one point (and its likelihood from diverging)


class Ordering(Protocol):
    """Puts a stream's tasks in the order they arrive; ``embed`` gives their query embeddings when needed."""

    name: str

    def order(self, queries: Sequence[str], embed: EmbedFn) -> list[int]: ...


class EmbedFn(Protocol):
    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


class GivenOrder:
    """The tasks as loaded."""

    name = "given"

    def order(self, queries: Sequence[str], embed: EmbedFn) -> list[int]:
        return list(range(len(queries)))


@dataclass
class ShuffledOrder:
    """A uniform permutation drawn with ``numpy.random.default_rng(seed)``."""

    seed: int
    name: str = "shuffled"

    def order(self, queries: Sequence[str], embed: EmbedFn) -> list[int]:
        return [int(i) for i in np.random.default_rng(self.seed).permutation(len(queries))]


@dataclass
class ShiftOrder:
    """Distribution shift: clusters of a diagonal Gaussian mixture over the query embeddings, one after another.

    Each task goes to the component of highest responsibility; clusters are played in the order of their first
    task in the given order, and tasks keep their given order inside a cluster.
    """

    clusters: int = 3
    seed: int = 0
    name: str = "shift"

    def order(self, queries: Sequence[str], embed: EmbedFn) -> list[int]:
        if not queries:
            return []
        labels = fit_diagonal_gmm(np.asarray(embed(list(queries)), dtype=np.float64), self.clusters, self.seed).labels
        return cluster_order(labels)


def cluster_order(labels: Sequence[int]) -> list[int]:
    """Positions grouped by label: labels in the order they first appear, positions in their order inside a label."""
    first: dict[int, int] = {}
    for position, label in enumerate(labels):
        first.setdefault(int(label), position)
    rank = {label: r for r, label in enumerate(sorted(first, key=first.__getitem__))}
    return sorted(range(len(labels)), key=lambda position: (rank[int(labels[position])], position))


@dataclass
class Mixture:
    weights_K: np.ndarray
    means_KD: np.ndarray
    variances_KD: np.ndarray
    labels: list[int]
    """the component of highest responsibility for each point."""
    log_likelihood: float
    iterations: int


def fit_diagonal_gmm(
    points_ND: np.ndarray, components: int, seed: int = 0, *, max_iterations: int = 200, tolerance: float = 1e-6
) -> Mixture:
    """Fit a diagonal-covariance Gaussian mixture by EM.

    Initialisation: k-means++ seeding of the means with ``default_rng(seed)``, every variance the data's
    per-dimension variance (floored), equal weights. E-step: responsibilities ``γ_nk ∝ π_k N(x_n; μ_k, diag σ²_k)``
    in log space; M-step: ``N_k = Σ_n γ_nk``, ``π_k = N_k / N``, ``μ_k = Σ_n γ_nk x_n / N_k``,
    ``σ²_k = Σ_n γ_nk (x_n − μ_k)² / N_k + floor``. Stops when the mean log-likelihood improves by less than
    ``tolerance``. More components than distinct points is cut to the number of points.
    """
    points_ND = np.asarray(points_ND, dtype=np.float64)
    n = len(points_ND)
    if n == 0:
        raise ValueError("cannot fit a mixture to no points")
    k = max(1, min(components, n))
    rng = np.random.default_rng(seed)
    means_KD = _kmeans_plus_plus(points_ND, k, rng)
    variances_KD = np.tile(points_ND.var(axis=0) + _VAR_FLOOR, (k, 1))
    weights_K = np.full(k, 1.0 / k)
    previous = -np.inf
    log_resp_NK = np.zeros((n, k))
    mean_ll = previous
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 - the count is reported
        log_joint_NK = _log_gaussians(points_ND, means_KD, variances_KD) + np.log(weights_K)[None, :]
        log_norm_N = np.logaddexp.reduce(log_joint_NK, axis=1)
        log_resp_NK = log_joint_NK - log_norm_N[:, None]
        mean_ll = float(log_norm_N.mean())
        if mean_ll - previous < tolerance:
            break
        previous = mean_ll
        resp_NK = np.exp(log_resp_NK)
        counts_K = resp_NK.sum(axis=0) + 1e-12
        weights_K = counts_K / n
        means_KD = (resp_NK.T @ points_ND) / counts_K[:, None]
        squares_KD = (resp_NK.T @ points_ND**2) / counts_K[:, None]
        variances_KD = np.maximum(squares_KD - means_KD**2, 0.0) + _VAR_FLOOR
    labels = [int(label) for label in np.argmax(log_resp_NK, axis=1)]
    return Mixture(weights_K, means_KD, variances_KD, labels, mean_ll * n, iterations)


def _log_gaussians(points_ND: np.ndarray, means_KD: np.ndarray, variances_KD: np.ndarray) -> np.ndarray:
    """``[N, K]`` log N(x_n; μ_k, diag σ²_k)."""
    log_det_K = np.log(variances_KD).sum(axis=1)
    inverse_KD = 1.0 / variances_KD
    # Σ_d (x − μ)² / σ² = Σ x²/σ² − 2 Σ x μ/σ² + Σ μ²/σ²
    mahalanobis_NK = (
        (points_ND**2) @ inverse_KD.T
        - 2.0 * points_ND @ (means_KD * inverse_KD).T
        + (means_KD**2 * inverse_KD).sum(axis=1)[None, :]
    )
    dim = points_ND.shape[1]
    return -0.5 * (dim * np.log(2 * np.pi) + log_det_K[None, :] + mahalanobis_NK)


def _kmeans_plus_plus(points_ND: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeds: the first uniformly, each next with probability proportional to its squared distance."""
    chosen = [int(rng.integers(len(points_ND)))]
    distances_N = ((points_ND - points_ND[chosen[0]]) ** 2).sum(axis=1)
    while len(chosen) < k:
        total = distances_N.sum()
        if total <= 0:  # every point coincides with a seed: take the next unused position
            candidate = next(i for i in range(len(points_ND)) if i not in chosen)
        else:
            candidate = int(rng.choice(len(points_ND), p=distances_N / total))
        chosen.append(candidate)
        distances_N = np.minimum(distances_N, ((points_ND - points_ND[candidate]) ** 2).sum(axis=1))
    return points_ND[chosen].copy()


def build_ordering(order: str, *, seed: int, clusters: int) -> Ordering:
    """The ordering named by ``stream.order``."""
    if order == "given":
        return GivenOrder()
    if order == "shuffled":
        return ShuffledOrder(seed)
    if order == "shift":
        return ShiftOrder(clusters, seed)
    raise ValueError(f"unknown order {order!r}; choose given, shuffled or shift")


def apply_order(items: Sequence[T], positions: Sequence[int]) -> list[T]:
    if sorted(positions) != list(range(len(items))):
        raise ValueError("an order must be a permutation of the items' positions")
    return [items[i] for i in positions]

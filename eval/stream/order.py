"""The order in which a stream's tasks arrive: as given, shuffled, or under distribution shift.

Distribution shift follows Xiong et al.: the query embeddings are clustered with a Gaussian mixture (3
diagonal-covariance components, seed 0 by default) and the clusters are played one after another, so the
agent meets one kind of task for a while, then another. The mixture is scikit-learn's
``GaussianMixture(covariance_type="diag")`` with a fixed ``random_state`` (:func:`fit_diagonal_gmm`), so the
order is the same on every run.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

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
    """Fit a diagonal-covariance Gaussian mixture by EM (scikit-learn's ``GaussianMixture``).

    Initialisation: k-means++ seeding with ``random_state=seed``; every variance gets ``_VAR_FLOOR`` added
    (``reg_covar``). EM stops when the mean log-likelihood improves by less than ``tolerance`` or after
    ``max_iterations``. More components than points is cut to the number of points.
    """
    points_ND = np.asarray(points_ND, dtype=np.float64)
    n = len(points_ND)
    if n == 0:
        raise ValueError("cannot fit a mixture to no points")
    if n == 1:  # scikit-learn needs two points; one point is a component of its own
        dim = points_ND.shape[1]
        log_likelihood = -0.5 * dim * float(np.log(2 * np.pi * _VAR_FLOOR))
        return Mixture(np.ones(1), points_ND.copy(), np.full((1, dim), _VAR_FLOOR), [0], log_likelihood, 0)
    mixture = GaussianMixture(
        n_components=max(1, min(components, n)),
        covariance_type="diag",
        tol=tolerance,
        reg_covar=_VAR_FLOOR,
        max_iter=max_iterations,
        init_params="k-means++",
        random_state=seed,
    )
    with warnings.catch_warnings():  # stopping at max_iterations is fine for an order
        warnings.simplefilter("ignore", ConvergenceWarning)
        labels = mixture.fit_predict(points_ND)
    return Mixture(
        mixture.weights_,
        mixture.means_,
        mixture.covariances_,
        [int(label) for label in labels],
        float(mixture.score(points_ND)) * n,
        int(mixture.n_iter_),
    )


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

"""Bounded retention: a bank of at most K records, and which record goes when it is full.

After each task (after the addition and deletion rules), while the bank holds more than ``capacity`` records the
record with the lowest retention score is evicted (ties: the older record, then the earlier inserted), and the
scores are recomputed. Policies:

| policy | score of record r at step t (lowest evicted) | after |
|---|---|---|
| ``utility`` | ``ū_r``, the mean downstream utility (``prior`` when never retrieved) | Xiong et al., capacity mode |
| ``fifo`` | ``c_r``, the step it was written | TraceRetain |
| ``lru`` | ``ℓ_r``, the last step that retrieved it (``c_r`` when never) | TraceRetain |
| ``lfu`` | ``n_r``, how often it was retrieved | TraceRetain |
| ``random`` | a uniform draw from ``default_rng(seed, t)`` | TraceRetain |
| ``ebbinghaus`` | retention ``R = exp(−(t − ℓ_r) / S_r)``, strength ``S_r = S0 · (1 + n_r)`` | TraceRetain |
| ``linear`` | ``Σ_f w_f · f(r, t)`` over the features below | TraceRetain |

Features of the linear score (TraceRetain's interpretable features; each is one function below, in [0, 1]):

| feature | formula |
|---|---|
| ``success`` | ``s_r``: the evaluator's score of r's execution when it was written (ground-truth label if none) |
| ``age`` | ``1 − exp(−(t − c_r) / τ)`` |
| ``recency`` | ``exp(−(t − ℓ_r) / τ)`` |
| ``frequency`` | ``n_r / max(1, t − c_r)``: retrievals per task since it was written |
| ``redundancy`` | ``max_{r' ≠ r} clip(cos(q_r, q_r'), 0, 1)``: its nearest neighbour in the bank (0 alone) |
| ``specificity`` | ``1 − mean_{r' ≠ r} clip(cos(q_r, q_r'), 0, 1)``: how far it is from the rest (1 alone) |
| ``utility`` | ``ū_r``: mean downstream utility (``prior`` when never retrieved) |
| ``utility_count`` | ``m_r / (m_r + 1)``, ``m_r`` the utilities observed |
| ``similarity`` | mean cosine similarity of the queries that retrieved r to r's query (0 when never retrieved) |

``τ`` is ``stream.decay_tau``; ``q_r`` the record's query embedding. Hand weights are :data:`HAND_WEIGHTS`;
:func:`cem_search` finds weights by the cross-entropy method on a tuning stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.config import RETENTION_FEATURES, StreamConfig

HAND_WEIGHTS: dict[str, float] = {
    "success": 1.0,
    "age": -0.5,
    "recency": 0.5,
    "frequency": 0.5,
    "redundancy": -0.5,
    "specificity": 0.25,
    "utility": 1.0,
    "utility_count": 0.25,
    "similarity": 0.25,
}
"""hand-set weights: keep what worked and what is used, drop old near-duplicates."""
assert tuple(HAND_WEIGHTS) == RETENTION_FEATURES


# --------------------------------------------------------------------------------------------- features


@dataclass(frozen=True)
class FeatureContext:
    """What the features of one record need besides the record: the step, τ, the utility prior, and the record's
    clipped cosine similarities to every other record in the bank."""

    step: int
    tau: float
    prior: float
    neighbour_similarities: np.ndarray
    """``clip(cos(q_r, q_r'), 0, 1)`` for every other record r' (empty when r is alone)."""


def success_feature(record: Record, context: FeatureContext) -> float:
    """``s_r``: the evaluator's score when written; the ground-truth label when no score was kept; 0 if neither."""
    value = record.score if record.score is not None else record.success
    return float(value or 0.0)


def age_feature(record: Record, context: FeatureContext) -> float:
    """``1 − exp(−(t − c_r) / τ)``."""
    return 1.0 - math.exp(-max(0, context.step - record.created_at) / context.tau)


def recency_feature(record: Record, context: FeatureContext) -> float:
    """``exp(−(t − ℓ_r) / τ)``, ``ℓ_r`` the last retrieving step (``c_r`` when never retrieved)."""
    return math.exp(-max(0, context.step - record.last_access) / context.tau)


def frequency_feature(record: Record, context: FeatureContext) -> float:
    """``n_r / max(1, t − c_r)``: retrievals per task since it was written."""
    return len(record.retrieved_at) / max(1, context.step - record.created_at)


def redundancy_feature(record: Record, context: FeatureContext) -> float:
    """``max_{r' ≠ r} clip(cos(q_r, q_r'), 0, 1)``; 0 when r is alone in the bank."""
    sims = context.neighbour_similarities
    return float(sims.max()) if sims.size else 0.0


def specificity_feature(record: Record, context: FeatureContext) -> float:
    """``1 − mean_{r' ≠ r} clip(cos(q_r, q_r'), 0, 1)``; 1 when r is alone in the bank."""
    sims = context.neighbour_similarities
    return 1.0 - float(sims.mean()) if sims.size else 1.0


def utility_feature(record: Record, context: FeatureContext) -> float:
    """``ū_r``, the mean downstream utility; the prior when no task retrieved r yet."""
    return record.mean_utility(context.prior)


def utility_count_feature(record: Record, context: FeatureContext) -> float:
    """``m_r / (m_r + 1)``, ``m_r`` the number of downstream utilities observed."""
    m = len(record.utilities)
    return m / (m + 1)


def similarity_feature(record: Record, context: FeatureContext) -> float:
    """Mean cosine similarity of the retrieving queries to r's query; 0 when never retrieved."""
    return sum(record.similarities) / len(record.similarities) if record.similarities else 0.0


FEATURES: dict[str, Callable[[Record, FeatureContext], float]] = {
    "success": success_feature,
    "age": age_feature,
    "recency": recency_feature,
    "frequency": frequency_feature,
    "redundancy": redundancy_feature,
    "specificity": specificity_feature,
    "utility": utility_feature,
    "utility_count": utility_count_feature,
    "similarity": similarity_feature,
}
assert tuple(FEATURES) == RETENTION_FEATURES


def feature_contexts(bank: MemoryBank, step: int, tau: float, prior: float) -> dict[str, FeatureContext]:
    """One :class:`FeatureContext` per record (one ``[N, N]`` similarity matrix for the whole bank)."""
    ids = bank.ids()
    matrix_ND = bank.matrix()
    sims_NN = np.clip(matrix_ND @ matrix_ND.T, 0.0, 1.0) if ids else np.zeros((0, 0))
    contexts = {}
    for i, record_id in enumerate(ids):
        others = np.delete(sims_NN[i], i) if len(ids) > 1 else np.zeros(0)
        contexts[record_id] = FeatureContext(step, tau, prior, others)
    return contexts


def feature_vector(record: Record, context: FeatureContext) -> dict[str, float]:
    return {name: fn(record, context) for name, fn in FEATURES.items()}


def linear_score(features: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """``Σ_f w_f · f``."""
    return sum(weights.get(name, 0.0) * value for name, value in features.items())


# --------------------------------------------------------------------------------------------- policies


class RetentionPolicy(Protocol):
    """Scores every record of the bank; the lowest is evicted first."""

    name: str

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]: ...


@dataclass
class UtilityRetention:
    prior: float
    name: str = "utility"

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        return {r.id: r.mean_utility(self.prior) for r in bank}


class FIFORetention:
    name = "fifo"

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        return {r.id: float(r.created_at) for r in bank}


class LRURetention:
    name = "lru"

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        return {r.id: float(r.last_access) for r in bank}


class LFURetention:
    name = "lfu"

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        return {r.id: float(len(r.retrieved_at)) for r in bank}


@dataclass
class RandomRetention:
    """A fresh uniform draw per record and eviction round, from ``default_rng([seed, step, round])``."""

    seed: int
    name: str = "random"
    _rounds: dict[int, int] = field(default_factory=dict)

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        round_index = self._rounds.get(step, 0)
        self._rounds = {step: round_index + 1}
        rng = np.random.default_rng([self.seed, step + 1, round_index])
        return {record_id: float(x) for record_id, x in zip(bank.ids(), rng.random(len(bank)))}


@dataclass
class EbbinghausRetention:
    """``R = exp(−(t − ℓ_r) / S_r)`` with ``S_r = S0 · (1 + n_r)``: each retrieval makes the memory last longer."""

    strength: float
    name: str = "ebbinghaus"

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        return {r.id: ebbinghaus_retention(r, step, self.strength) for r in bank}


def ebbinghaus_retention(record: Record, step: int, strength: float) -> float:
    """``exp(−(t − ℓ_r) / (S0 · (1 + n_r)))``."""
    return math.exp(-max(0, step - record.last_access) / (strength * (1 + len(record.retrieved_at))))


@dataclass
class LinearRetention:
    """``Σ_f w_f · f(r, t)`` (see the module table)."""

    weights: dict[str, float]
    tau: float
    prior: float
    name: str = "linear"

    def scores(self, bank: MemoryBank, step: int) -> dict[str, float]:
        contexts = feature_contexts(bank, step, self.tau, self.prior)
        return {r.id: linear_score(feature_vector(r, contexts[r.id]), self.weights) for r in bank}


@dataclass(frozen=True)
class Eviction:
    record_id: str
    reason: str


def evict(bank: MemoryBank, capacity: int, policy: RetentionPolicy, step: int) -> list[Eviction]:
    """Evict the lowest-scoring record (ties: older, then earlier inserted) while the bank exceeds ``capacity``."""
    evicted = []
    while len(bank) > capacity:
        scores = policy.scores(bank, step)
        position = {record_id: i for i, record_id in enumerate(bank.ids())}
        victim = min(bank, key=lambda r: (scores[r.id], r.created_at, position[r.id]))
        bank.delete(victim.id)
        reason = f"capacity: {policy.name} score {scores[victim.id]:.4g} lowest of {len(bank) + 1} > K={capacity}"
        evicted.append(Eviction(victim.id, reason))
    return evicted


def load_weights(path: str) -> dict[str, float]:
    """Weights from a JSON file: ``{"weights": {feature: w}}`` (what the CEM search writes) or ``{feature: w}``."""
    import json
    from pathlib import Path

    from agemem.core.configlib import ConfigError

    file = Path(path)
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"stream.retention_weights_file={path!r} is not a readable JSON file ({err})") from err
    weights = data.get("weights", data) if isinstance(data, dict) else None
    if not isinstance(weights, dict) or not all(isinstance(v, (int, float)) for v in weights.values()):
        raise ConfigError(f"stream.retention_weights_file={path!r} must hold {{feature: number}} (or under 'weights')")
    unknown = [name for name in weights if name not in RETENTION_FEATURES]
    if unknown:
        raise ConfigError(f"{path}: unknown feature {unknown[0]!r}; features: {', '.join(RETENTION_FEATURES)}")
    return {name: float(value) for name, value in weights.items()}


def linear_weights(config: StreamConfig) -> dict[str, float]:
    """The hand weights, replaced per feature by ``retention_weights`` or the file's weights."""
    given = load_weights(config.retention_weights_file) if config.retention_weights_file else config.retention_weights
    return {**HAND_WEIGHTS, **given}


def build_retention(config: StreamConfig) -> RetentionPolicy | None:
    """The policy named by ``stream.retention``; None for an unbounded bank."""
    if config.retention == "none":
        return None
    if config.retention == "linear":
        return LinearRetention(linear_weights(config), config.decay_tau, config.utility_prior)
    policies: dict[str, Callable[[], RetentionPolicy]] = {
        "utility": lambda: UtilityRetention(config.utility_prior),
        "fifo": FIFORetention,
        "lru": LRURetention,
        "lfu": LFURetention,
        "random": lambda: RandomRetention(config.seed),
        "ebbinghaus": lambda: EbbinghausRetention(config.ebbinghaus_strength),
    }
    return policies[config.retention]()


# --------------------------------------------------------------------------------------------- CEM search


@dataclass
class CEMResult:
    weights: dict[str, float]
    """the best weights any evaluation found."""
    objective: float
    history: list[dict[str, Any]]
    """per iteration: the sampling mean and std, every candidate's weights and objective, the best so far."""


def cem_search(
    objective: Callable[[dict[str, float], str], float],
    *,
    initial: Mapping[str, float] = HAND_WEIGHTS,
    iterations: int = 5,
    population: int = 8,
    elite: float = 0.25,
    std: float = 0.5,
    seed: int = 0,
) -> CEMResult:
    """Cross-entropy-method search of the linear retention weights (maximising ``objective``).

    Each iteration samples ``population`` weight vectors from ``N(μ, diag σ²)`` (``default_rng(seed)``; the first
    iteration's first candidate is ``μ`` itself, the hand weights), scores each with ``objective(weights, name)``
    (``name`` = ``i{iteration}_c{candidate}``, e.g. a run directory), keeps the best ``ceil(elite · population)``
    and sets ``μ, σ`` to their mean and standard deviation (σ floored at 0.01 so the search keeps exploring).
    Returns the best candidate seen.
    """
    if iterations < 1 or population < 1 or not 0 < elite <= 1 or std <= 0:
        raise ValueError("need iterations >= 1, population >= 1, 0 < elite <= 1 and std > 0")
    names = list(RETENTION_FEATURES)
    rng = np.random.default_rng(seed)
    mean_F = np.array([initial.get(name, 0.0) for name in names], dtype=np.float64)
    std_F = np.full(len(names), std)
    n_elite = max(1, math.ceil(elite * population))
    best: tuple[float, dict[str, float]] | None = None
    history = []
    for iteration in range(iterations):
        samples_PF = rng.normal(mean_F, std_F, size=(population, len(names)))
        if iteration == 0:
            samples_PF[0] = mean_F
        candidates = []
        for c, row in enumerate(samples_PF):
            weights = {name: float(w) for name, w in zip(names, row)}
            value = float(objective(weights, f"i{iteration}_c{c}"))
            candidates.append({"weights": weights, "objective": value})
            if best is None or value > best[0]:
                best = (value, weights)
        order = sorted(range(population), key=lambda i: -candidates[i]["objective"])[:n_elite]
        elite_EF = samples_PF[order]
        history.append(
            {
                "iteration": iteration,
                "mean": dict(zip(names, mean_F.tolist())),
                "std": dict(zip(names, std_F.tolist())),
                "candidates": candidates,
                "best_objective": best[0],
            }
        )
        mean_F = elite_EF.mean(axis=0)
        std_F = np.maximum(elite_EF.std(axis=0), 0.01)
    assert best is not None
    return CEMResult(best[1], best[0], history)

"""Reward terms from outside the paper's composite: a registered term is logged for every trajectory and, with a
weight in ``reward.term_weights``, paid.

R = R_composite (or R_answer_only) + Σ_k w_k · t_k(τ), where t_k is a registered :class:`RewardTerm` (a pure
function of the finished trajectory and its task's supporting-fact sentences) and w_k its weight
(``reward.term_weights``; a term without a weight is logged as ``extra/<name>`` and pays nothing). With no term
registered the reward is the paper's, unchanged. A plugin registers terms (``--plugin`` or the
``agemem.reward_terms`` entry point, :mod:`agemem.core.plugins`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agemem.core.configlib import ConfigError
from agemem.rollouts.records import Trajectory


@dataclass(frozen=True)
class RewardTerm:
    """One extra reward term: ``t(trajectory, facts) -> float``."""

    name: str
    """the weight's key (``reward.term_weights.<name>``) and the breakdown's (``extra/<name>``)."""
    compute: Callable[[Trajectory, Sequence[str]], float]
    """the term's value for a finished trajectory and its task's supporting-fact sentences."""
    doc: str = ""
    """its formula, for the docs and the log."""


_TERMS: dict[str, RewardTerm] = {}


def register_reward_term(term: RewardTerm, *, replace: bool = False) -> RewardTerm:
    """Log ``term`` with every reward breakdown (and pay it where ``reward.term_weights`` weights it)."""
    known = _TERMS.get(term.name)
    if known is not None and known != term and not replace:
        raise ValueError(f"a reward term named {term.name!r} is registered already; pass replace=True to swap it")
    _TERMS[term.name] = term
    return term


def unregister_reward_term(name: str) -> None:
    _TERMS.pop(name, None)


def reward_term_names() -> list[str]:
    return list(_TERMS)


def check_term_weights(weights: Mapping[str, float]) -> None:
    """Every weighted term is registered; else a :class:`ConfigError` naming the registered ones."""
    unknown = sorted(set(weights) - set(_TERMS))
    if unknown:
        known = ", ".join(_TERMS) or "none"
        raise ConfigError(
            f"reward.term_weights names {', '.join(map(repr, unknown))}, which no reward term registers (registered: "
            f"{known}); load the plugin that registers it (--plugin), or drop the weight"
        )


def extra_terms(
    trajectory: Trajectory, facts: Sequence[str], weights: Mapping[str, float]
) -> tuple[dict[str, float], float]:
    """``({"extra/<name>": t_k}, Σ_k w_k · t_k)`` over the registered terms; a non-finite value is an error naming the
    term (it would poison the group's advantages)."""
    values: dict[str, float] = {}
    paid = 0.0
    for name, term in _TERMS.items():
        value = float(term.compute(trajectory, facts))
        if not math.isfinite(value):
            raise ValueError(
                f"reward term {name!r} gave {value} for trajectory {trajectory.task_id!r}; it must be finite"
            )
        values[f"extra/{name}"] = value
        paid += weights.get(name, 0.0) * value
    return values, paid

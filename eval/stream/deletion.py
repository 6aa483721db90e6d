"""Deletion rules of the stream (Xiong et al., "How Memory Management Impacts LLM Agents", §memory deletion).

After each task (once the task's retrievals are noted and the addition rule has run), a rule picks records to
delete and says why. Each criterion is a small pure function of one record's usage history:

* :func:`periodic_reason` (periodic deletion, retrieval frequency): with ``c_r`` the step after which record r
  was written (−1 for the initial bank) and ``t`` the current step, r is deleted when ``t − c_r ≥ W`` (records
  younger than the window are protected) and ``|{s ∈ retrieved_at(r) : t − W < s ≤ t}| ≤ α``;
* :func:`history_reason` (history-based deletion, downstream utility): with ``u_r`` the evaluator's scores of the
  tasks that retrieved r, r is deleted when ``|u_r| ≥ n`` and ``mean(u_r) ≤ β``;
* combined: deleted when either deletes it (the reasons are joined).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.config import StreamConfig


@dataclass(frozen=True)
class Deletion:
    record_id: str
    reason: str
    """the rule and the numbers that made it fire, e.g. ``periodic: retrieved 0 <= alpha=0 times in steps 10..29``."""


def periodic_reason(record: Record, step: int, window: int, alpha: int) -> str | None:
    """Why periodic deletion removes ``record`` after ``step``, or None when it stays (see the module docstring)."""
    age = step - record.created_at
    if age < window:
        return None
    first = step - window + 1
    count = sum(1 for s in record.retrieved_at if first <= s <= step)
    if count > alpha:
        return None
    return f"periodic: retrieved {count} <= alpha={alpha} times in steps {first}..{step} (W={window})"


def history_reason(record: Record, min_retrievals: int, beta: float) -> str | None:
    """Why history-based deletion removes ``record``, or None when it stays (see the module docstring)."""
    n = len(record.utilities)
    if n < min_retrievals:
        return None
    mean = sum(record.utilities) / n
    if mean > beta:
        return None
    return f"history: mean utility {mean:.3f} <= beta={beta} over {n} >= n={min_retrievals} retrievals"


class DeletionRule(Protocol):
    name: str

    def select(self, bank: MemoryBank, step: int) -> list[Deletion]:
        """The records to delete after ``step``, in bank order."""
        ...


class NoDeletion:
    name = "none"

    def select(self, bank: MemoryBank, step: int) -> list[Deletion]:
        return []


@dataclass
class PeriodicDeletion:
    """:func:`periodic_reason`, checked after every ``every``-th task (``(step + 1) % every == 0``)."""

    window: int
    alpha: int
    every: int = 1
    name: str = "periodic"

    def select(self, bank: MemoryBank, step: int) -> list[Deletion]:
        if (step + 1) % self.every:
            return []
        found = ((r.id, periodic_reason(r, step, self.window, self.alpha)) for r in bank)
        return [Deletion(record_id, reason) for record_id, reason in found if reason is not None]


@dataclass
class HistoryDeletion:
    """:func:`history_reason`, checked after every task."""

    min_retrievals: int
    beta: float
    name: str = "history"

    def select(self, bank: MemoryBank, step: int) -> list[Deletion]:
        found = ((r.id, history_reason(r, self.min_retrievals, self.beta)) for r in bank)
        return [Deletion(record_id, reason) for record_id, reason in found if reason is not None]


@dataclass
class CombinedDeletion:
    """Deletes what any of ``rules`` deletes; a record several rules pick gets their reasons joined by ``; ``."""

    rules: Sequence[DeletionRule]
    name: str = "combined"

    def select(self, bank: MemoryBank, step: int) -> list[Deletion]:
        reasons: dict[str, list[str]] = {}
        for rule in self.rules:
            for deletion in rule.select(bank, step):
                reasons.setdefault(deletion.record_id, []).append(deletion.reason)
        order = {record_id: i for i, record_id in enumerate(bank.ids())}
        return [Deletion(i, "; ".join(reasons[i])) for i in sorted(reasons, key=order.__getitem__)]


def build_deletion(config: StreamConfig) -> DeletionRule:
    """The rule named by ``stream.deletion``."""
    periodic = PeriodicDeletion(config.window, config.alpha, config.periodic_every)
    history = HistoryDeletion(config.history_min_retrievals, config.history_beta)
    rules: dict[str, DeletionRule] = {
        "none": NoDeletion(),
        "periodic": periodic,
        "history": history,
        "combined": CombinedDeletion([periodic, history]),
    }
    return rules[config.deletion]

"""Where a task's demonstrations come from (a small protocol, one class per source).

* :class:`SimilarRetrieval`: the records whose query is most similar to the task's (ExpRAG, Xiong et al.);
* :class:`RecentRetrieval`: the most recently written records (ExpRecent, after Evo-Memory);
* :class:`NoRetrieval`: nothing (the no-memory baseline);
* :class:`ReplayRetrieval`: error-free replay: the records a reference run retrieved at the same step, shown
  with the ground-truth execution of their task where it has one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from agemem.core.configlib import ConfigError
from agemem.eval.stream.bank import MemoryBank, Record, Retrieved
from agemem.tasks.stream import StreamItem, ground_truth_of


class Retrieval(Protocol):
    name: str

    def retrieve(self, step: int, item: StreamItem, query_D: np.ndarray, k: int) -> list[Retrieved]:
        """Up to ``k`` records for the task at ``step``, in the order they are shown."""
        ...

    def shown_execution(self, record: Record) -> str:
        """The execution the agent is shown for ``record``."""
        ...


@dataclass
class SimilarRetrieval:
    bank: MemoryBank
    name: str = "similar"

    def retrieve(self, step: int, item: StreamItem, query_D: np.ndarray, k: int) -> list[Retrieved]:
        return self.bank.similar(query_D, k)

    def shown_execution(self, record: Record) -> str:
        return record.execution


@dataclass
class RecentRetrieval:
    bank: MemoryBank
    name: str = "recent"

    def retrieve(self, step: int, item: StreamItem, query_D: np.ndarray, k: int) -> list[Retrieved]:
        return self.bank.recent(query_D, k)

    def shown_execution(self, record: Record) -> str:
        return record.execution


class NoRetrieval:
    name = "none"

    def retrieve(self, step: int, item: StreamItem, query_D: np.ndarray, k: int) -> list[Retrieved]:
        return []

    def shown_execution(self, record: Record) -> str:
        return record.execution


class ReplayRetrieval:
    """The retrievals of a finished run (its ``steps.jsonl``), with executions replaced by ground truth."""

    name = "replay"

    def __init__(self, run_dir: str | Path, items: dict[str, StreamItem] | None = None):
        self.run_dir = Path(run_dir)
        self.items = items or {}
        path = self.run_dir / "steps.jsonl"
        if not path.is_file():
            raise ConfigError(
                f"stream.replay_of={str(run_dir)!r} holds no steps.jsonl; give the directory of a finished stream run"
            )
        self.records: dict[str, Record] = {}
        self.steps: dict[int, dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            for data in entry.get("additions", []):
                self.records[data["id"]] = Record.from_json(data)
            if entry["step"] >= 0:
                self.steps[entry["step"]] = entry

    def __len__(self) -> int:
        return len(self.steps)

    def bank_size(self, step: int) -> int:
        return int(self.steps[step]["bank_size"])

    def retrieve(self, step: int, item: StreamItem, query_D: np.ndarray, k: int) -> list[Retrieved]:
        entry = self.steps.get(step)
        if entry is None:
            raise ConfigError(f"the replayed run {self.run_dir} has no step {step}; replay at most {len(self)} tasks")
        if entry["task_id"] != item.id:
            raise ConfigError(
                f"step {step} is task {item.id!r} here but {entry['task_id']!r} in the replayed run {self.run_dir}; "
                "replay with the same task, data, order and initial bank"
            )
        return [Retrieved(self.records[r["id"]], float(r["similarity"])) for r in entry["retrieved"][:k]]

    def shown_execution(self, record: Record) -> str:
        """The ground truth of the record's task (computed now when costly, e.g. an ALFWorld expert plan), else
        the one stored with the record, else its own execution."""
        item = self.items.get(record.task_id)
        truth = ground_truth_of(item) if item is not None else None
        truth = truth if truth is not None else record.ground_truth
        return truth if truth is not None else record.execution

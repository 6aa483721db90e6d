"""A deterministic simulated agent for stream tests (a test double, not a model).

``SimilarityCopyingSimulatedAgent`` reproduces the experience-following behaviour Xiong et al. measure in LLM
agents, with two knobs:

* it copies the execution of the most similar record it is shown with probability
  ``p_copy(s) = clip((s − s0) / (s1 − s0), 0, 1) ** power`` (``s`` that record's input similarity, ``s0`` =
  ``copy_floor``, ``s1`` = ``copy_ceiling``): the closer a past task, the likelier its execution is replayed,
  errors included;
* otherwise it solves the task itself, correctly (its ground-truth execution);
* either way, with probability ``error_rate`` it then makes a mistake of its own (the answer replaced by a wrong
  one).

Randomness comes from ``random.Random(seed)`` with the seed the runner derives from the run's sampling seed and
the task's position: two strategies on the same stream draw the same numbers for the same task (paired runs).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from agemem.eval.stream.base import Attempt, Demonstration
from agemem.eval.stream.tasks import answer_of
from agemem.tasks.stream import StreamItem, qa_execution


def copy_probability(similarity: float, floor: float, ceiling: float = 1.0, power: float = 1.0) -> float:
    """``clip((s − s0) / (s1 − s0), 0, 1) ** power``: 0 up to the floor s0, 1 from the ceiling s1."""
    return min(1.0, max(0.0, (similarity - floor) / (ceiling - floor))) ** power


@dataclass
class SimilarityCopyingSimulatedAgent:
    error_rate: float = 0.15
    copy_floor: float = 0.5
    copy_ceiling: float = 1.0
    power: float = 1.0
    name: str = "simulated-copier"

    def solve(self, item: StreamItem, demos: Sequence[Demonstration], tools, seed: int | None) -> Attempt:
        rng = random.Random(seed)
        draw_copy, draw_error = rng.random(), rng.random()
        top = max(demos, key=lambda d: d.similarity, default=None)
        copied = top is not None and draw_copy < copy_probability(
            top.similarity, self.copy_floor, self.copy_ceiling, self.power
        )
        execution = top.execution if copied else (item.ground_truth or "")
        if draw_error < self.error_rate:
            wrong = f"not {answer_of(execution) or item.answer}"
            execution = qa_execution("A slip of my own.", wrong)
        return Attempt(execution, answer_of(execution), replies=1, transcript=[{"copied": copied}])

"""What a stream run measured, computed from its step log alone.

Per task (``steps.jsonl``): success (ground truth), input similarity (the task's query vs the query of the most
similar record it was shown), output similarity (its execution vs that record's shown execution), Precision@k.

Per run (:func:`summarize`):

* ``accuracy``: mean success, with its Wilson 95% interval ``accuracy_ci``;
* ``final_bank_size``, ``mean_bank_size``; ``input_similarity``, ``output_similarity`` (means over the tasks that
  were shown a record); ``precision`` (mean Precision@k over tasks with a task key);
* ``curves``: cumulative averages over the stream of success, input and output similarity, Precision@k, and the
  bank size after each task;
* ``additions`` and ``deletions`` by kind (the rule that fired; ``remem``: ReMem's Refine);
* ``mean_replies``: model replies per task (the agent's steps);
* ``records``: deleted vs retained records (:func:`deletion_analysis`);
* ``remem``: ReMem's operations (:func:`remem_summary`), None for the standard agent.

Between strategies (:func:`paired_comparison`): the exact two-sided sign test on per-task success.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from agemem.eval.stats import sign_test, wilson_interval


def cumulative_mean(values: Sequence[float | None]) -> list[float | None]:
    """``c_t = mean(v_0..v_t)`` over the values that are not None (None until the first one)."""
    out: list[float | None] = []
    total, count = 0.0, 0
    for value in values:
        if value is not None:
            total += value
            count += 1
        out.append(total / count if count else None)
    return out


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def reason_kind(reason: str) -> str:
    """The rule named at the start of a deletion reason (``periodic``, ``history``, ``capacity``, ``policy``)."""
    return reason.split(":", 1)[0].split(";", 1)[0].strip()


def deletion_analysis(steps: Sequence[dict[str, Any]], initial: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Deleted vs retained records (Xiong et al.'s analysis of what deletion removes).

    A record is *deleted* when any rule, the agent or an eviction removed it, *retained* when it is in the bank
    at the end. Per group: ``records``; ``correct``, the share whose execution was correct by ground truth;
    ``retrievals``; and over the tasks that retrieved them, the mean ``input_similarity`` (task query vs record
    query), ``output_similarity`` (task execution vs record execution) and ``task_success``.
    """
    records: dict[str, dict[str, Any]] = {r["id"]: r for r in initial}
    deleted: set[str] = set()
    usage: dict[str, list[tuple[float, float, float]]] = {}
    for step in steps:
        for record in step["additions"]:
            records[record["id"]] = record
        for retrieved in step["retrieved"]:
            usage.setdefault(retrieved["id"], []).append(
                (retrieved["similarity"], retrieved["output_similarity"], step["success"])
            )
        deleted.update(d["id"] for d in step["deletions"])
    groups = {"deleted": sorted(deleted), "retained": sorted(set(records) - deleted)}
    report = {}
    for name, ids in groups.items():
        uses = [u for i in ids for u in usage.get(i, [])]
        report[name] = {
            "records": len(ids),
            "correct": _mean(records[i].get("success") for i in ids),
            "retrievals": len(uses),
            "input_similarity": _mean(u[0] for u in uses),
            "output_similarity": _mean(u[1] for u in uses),
            "task_success": _mean(u[2] for u in uses),
        }
    return report


def remem_summary(steps: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """ReMem's operations over the tasks it played (None when it played none): totals of Think (taken and
    refused), Refine calls run by kind (retrieve, add, update, merge, delete), failed and refused, the steps in
    which Refine ran, malformed replies, and the records Refine deleted and rewrote; ``think_per_task`` and
    ``refine_per_task`` are means over those tasks."""
    counts = [s["remem"] for s in steps if s.get("remem")]
    if not counts:
        return None
    refine: Counter[str] = Counter()
    for task in counts:
        refine.update(task["refine"])

    def total(key: str) -> int:
        return sum(task[key] for task in counts)

    return {
        "tasks": len(counts),
        "think": total("think"),
        "think_per_task": total("think") / len(counts),
        "think_refused": total("think_refused"),
        "refine": dict(refine),
        "refine_ops": total("refine_ops"),
        "refine_per_task": total("refine_ops") / len(counts),
        "refine_failed": total("refine_failed"),
        "refine_refused": total("refine_refused"),
        "refine_steps": sum(task.get("refine_steps", 0) for task in counts),  # absent from logs before per-step caps
        "malformed": total("malformed"),
        "records_deleted": sum(len(task["deleted"]) for task in counts),
        "records_updated": sum(len(task["updated"]) for task in counts),
    }


def summarize(steps: Sequence[dict[str, Any]], initial: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The run's measures (see the module docstring)."""
    successes = [s["success"] for s in steps]
    wins = int(sum(1 for s in successes if s >= 1.0))
    low, high = wilson_interval(wins, len(steps))
    bank = [s["bank_size"] for s in steps]
    additions = Counter(r["source"] for s in steps for r in s["additions"])
    deletions = Counter(reason_kind(d["reason"]) for s in steps for d in s["deletions"])
    return {
        "tasks": len(steps),
        "successes": wins,
        "accuracy": wins / len(steps) if steps else None,
        "accuracy_ci": [low, high],
        "initial_bank_size": len(initial),
        "final_bank_size": bank[-1] if bank else len(initial),
        "mean_bank_size": _mean(bank),
        "max_bank_size": max(bank) if bank else len(initial),
        "input_similarity": _mean(s["input_similarity"] for s in steps),
        "output_similarity": _mean(s["output_similarity"] for s in steps),
        "precision": _mean(s["precision"] for s in steps),
        "utility": _mean(s["utility"] for s in steps),
        "answered": _mean(float(s["answer"] is not None or s["won"] is not None) for s in steps),
        "mean_replies": _mean(s["replies"] for s in steps),
        "additions": dict(additions),
        "deletions": dict(deletions),
        "records": deletion_analysis(steps, initial),
        "remem": remem_summary(steps),
        "curves": {
            "success": cumulative_mean(successes),
            "input_similarity": cumulative_mean([s["input_similarity"] for s in steps]),
            "output_similarity": cumulative_mean([s["output_similarity"] for s in steps]),
            "precision": cumulative_mean([s["precision"] for s in steps]),
            "bank_size": bank,
        },
        "outcomes": [1 if s >= 1.0 else 0 for s in successes],
        "task_ids": [s["task_id"] for s in steps],
    }


def segment_accuracy(outcomes: Sequence[int], parts: int = 3) -> list[float]:
    """Success rate in ``parts`` consecutive, near-equal segments of the stream (early → late)."""
    n = len(outcomes)
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [sum(outcomes[a:b]) / (b - a) if b > a else 0.0 for a, b in itertools.pairwise(bounds)]


def paired_comparison(results: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any] | None:
    """The sign test of ``results`` against ``reference`` on the same tasks in the same order; None when the two
    runs did not play the same task sequence."""
    if results["task_ids"] != reference["task_ids"]:
        return None
    return sign_test(results["outcomes"], reference["outcomes"]).to_json()

"""The stream loop: one policy over a long stream of tasks with an experience memory.

For each task t of the stream (Xiong et al.; TraceRetain):

1. retrieve the ``top_k`` records for the task's query (by similarity, recency, none, or a replayed run's);
2. run the agent with them as in-context demonstrations (with ``addition=policy`` it may also call Add_memory /
   Delete_memory on the bank itself; ReMem, ``agent=remem``, thinks and refines the bank between its steps:
   :mod:`agemem.eval.stream.remem`);
3. score it: strict (ground truth) and, when the run uses one, the coarse judge; the evaluator's score is the
   task's utility, credited to every record it retrieved;
4. apply the addition rule (a noisy-write stress adds failed same-task copies after every write);
5. apply the deletion rule, then evict down to the capacity when the bank is bounded.

Every step is one line of ``steps.jsonl``: the retrieved record ids with their input and output similarities,
the execution, the scores, Precision@k, the records added (in full), the records rewritten by ReMem's Refine (as
they stand after the task), the records deleted and why, the bank size, the agent's transcript and ReMem's
counts. Line ``step = -1`` holds the initial bank. A re-run with the same settings rebuilds the bank from the log
(no agent call) and plays only the remaining tasks; every task samples under a seed derived from
``sampling.seed`` and its position, so the resumed run plays what the uninterrupted one would.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from agemem.core.configlib import ConfigError, to_dict
from agemem.eval.report import check_identity, drop_torn_tail
from agemem.eval.stream.addition import Outcome, build_addition, evaluator_name, uses_coarse, utility
from agemem.eval.stream.agent import BankTools
from agemem.eval.stream.bank import INITIAL_STEP, MemoryBank, Record, Retrieved
from agemem.eval.stream.base import Demonstration, Solver, StreamTask
from agemem.eval.stream.config import REMEM_SETTINGS, StreamRunConfig
from agemem.eval.stream.deletion import build_deletion
from agemem.eval.stream.order import apply_order, build_ordering
from agemem.eval.stream.remem import REMEM_PROTOCOL, ReMemBudget, ReMemSession
from agemem.eval.stream.retention import build_retention, evict
from agemem.eval.stream.retrieval import NoRetrieval, RecentRetrieval, ReplayRetrieval, Retrieval, SimilarRetrieval
from agemem.rollouts.engines.base import derive_seed
from agemem.tasks.stream import StreamItem, ground_truth_of

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.eval.stream.addition import CoarseJudge

BENCHMARK = "stream"
STEPS_FILE = "steps.jsonl"
# settings that may change between a run and its continuation
_RESUMABLE_KEYS = ("limit", "plot")


# --------------------------------------------------------------------------------------------- the stream


def stream_items(
    config: StreamRunConfig, task: StreamTask, encoder: Encoder
) -> tuple[list[StreamItem], list[StreamItem]]:
    """``(initial, stream)``: the first ``initial_size`` items seed the bank; of the rest, the first ``limit``
    (all when 0) are the stream, put in ``stream.order``."""
    settings = config.stream
    items = task.items()
    initial, rest = items[: settings.initial_size], items[settings.initial_size :]
    if settings.limit:
        rest = rest[: settings.limit]
    if not rest:
        raise ConfigError(
            f"the {task.name} stream is empty: {len(items)} tasks loaded, stream.initial_size={settings.initial_size} "
            "of them seed the bank; load more tasks or lower stream.initial_size"
        )
    ordering = build_ordering(settings.order, seed=settings.order_seed, clusters=settings.shift_clusters)
    positions = ordering.order([item.query for item in rest], encoder.encode)
    return initial, apply_order(rest, positions)


def initial_records(config: StreamRunConfig, task: StreamTask, items: Sequence[StreamItem]) -> list[Record]:
    """The bank before the stream: each item's ground-truth execution; ``round(initial_noise · n)`` of them, drawn
    with ``random.Random(f"{seed}/initial")``, get a failed execution instead (noisy initial memory)."""
    settings = config.stream
    rng = random.Random(f"{settings.seed}/initial")
    noisy = set(rng.sample(range(len(items)), round(settings.initial_noise * len(items))))
    records = []
    for position, item in enumerate(items):
        truth = ground_truth_of(item)
        if truth is None:
            raise ConfigError(
                f"task {item.id} has no ground-truth execution to seed the initial bank with; set stream.initial_size=0"
            )
        if position in noisy:
            source = "initial_noise"
            execution = task.failed_execution(item, random.Random(f"{settings.seed}/initial/{position}"))
            success = 0.0
        else:
            source, execution, success = "initial", truth, 1.0
        records.append(
            Record(
                id=f"mem_init{position:04d}",
                query=item.query,
                execution=execution,
                task_id=item.id,
                created_at=INITIAL_STEP,
                source=source,  # type: ignore[arg-type]
                success=success,
                score=success,
                task_key=item.task_key,
                ground_truth=item.ground_truth,
            )
        )
    return records


def precision_at_k(retrieved: Sequence[Retrieved], task_key: str | None, k: int) -> float | None:
    """``|{r in the first k retrieved : r succeeded and key(r) = key(task)}| / k`` (TraceRetain, Appendix B);
    None when the task has no key."""
    if task_key is None:
        return None
    relevant = sum(1 for r in retrieved[:k] if r.record.success == 1.0 and r.record.task_key == task_key)
    return relevant / k


# --------------------------------------------------------------------------------------------- state


@dataclass
class StreamState:
    """The bank and the rules of one run; ``step`` plays one task, ``replay`` re-applies a logged one."""

    config: StreamRunConfig
    task: StreamTask
    bank: MemoryBank
    coarse: CoarseJudge | None = None
    replay: ReplayRetrieval | None = None
    retrieval: Retrieval = field(init=False)

    def __post_init__(self) -> None:
        settings = self.config.stream
        self.settings = settings
        self.addition = build_addition(settings)
        self.deletion = build_deletion(settings)
        self.retention = build_retention(settings)
        self.evaluator = evaluator_name(settings)
        if uses_coarse(settings) and self.coarse is None:
            raise ValueError("coarse addition (or stream.evaluator=coarse) needs a coarse judge; pass one")
        if self.replay is not None:
            self.retrieval = self.replay
        else:
            retrievals: dict[str, Retrieval] = {
                "similar": SimilarRetrieval(self.bank),
                "recent": RecentRetrieval(self.bank),
                "none": NoRetrieval(),
            }
            self.retrieval = retrievals[settings.retrieval]
        # (step, records written in it so far, deleted ones included): the next write's position in its step
        self._written: tuple[int, int] = (INITIAL_STEP, 0)

    # ------------------------------------------------------------------ writes
    def write(self, item: StreamItem, step: int, source: str, execution: str, **labels: Any) -> list[Record]:
        """Write a record of ``item`` after ``step``, then ``noisy_writes`` failed same-task copies.

        A record's position (what its id derives from) counts every record written in the step before it, also
        those the agent already deleted again: counting the records still in the bank would give an add after an
        add and a delete the deleted record's id. A resumed run never writes into a logged step, so the count
        starts afresh with each step."""
        written_step, count = self._written
        position = count if written_step == step else 0
        self._written = (step, position + 1 + self.settings.noisy_writes)
        record = Record(
            id=self.bank.unique_id(step, position, item.id, source),
            query=item.query,
            execution=execution,
            task_id=item.id,
            created_at=step,
            source=source,  # type: ignore[arg-type]
            task_key=item.task_key,
            ground_truth=item.ground_truth,
            **labels,
        )
        written = [self.bank.add(record)]
        for copy in range(self.settings.noisy_writes):
            rng = random.Random(f"{self.settings.seed}/noise/{step}/{position}/{copy}")
            noise = Record(
                id=self.bank.unique_id(step, position + copy + 1, item.id, "noise"),
                query=item.query,
                execution=self.task.failed_execution(item, rng),
                task_id=item.id,
                created_at=step,
                source="noise",
                success=0.0,
                score=0.0,
                task_key=item.task_key,
                ground_truth=item.ground_truth,
            )
            written.append(self.bank.add(noise, self.bank.vector(record.id)))
        return written

    # ------------------------------------------------------------------ one task
    def step(self, t: int, item: StreamItem, solver: Solver, seed: int | None) -> dict[str, Any]:
        settings = self.settings
        query_D = self.bank.embed([item.query])[0]
        probe = max(settings.top_k, settings.precision_k)
        # similarities are kept to 6 decimals, as logged, so a resumed run credits exactly what this one did (an
        # embedding recomputed in another batch may differ in the last bits)
        found = [Retrieved(r.record, round(r.similarity, 6)) for r in self.retrieval.retrieve(t, item, query_D, probe)]
        retrieved = found[: settings.top_k]
        with_feedback = settings.show_feedback or settings.agent == "remem"  # Evo-Memory's (input, output, feedback)
        demos = [
            Demonstration(
                r.record.id,
                r.record.query,
                self.retrieval.shown_execution(r.record),
                r.similarity,
                record_feedback(r.record) if with_feedback else None,
            )
            for r in retrieved
        ]
        policy_writes: list[Record] = []
        tools: BankTools | ReMemSession = BankTools(self.bank, offered=())  # the runner manages the memory
        remem = None
        source = "remem" if settings.agent == "remem" else "policy"

        def write(content: str, metadata: dict[str, Any]) -> Record:
            records = self.write(item, t, source, content, metadata=metadata)
            policy_writes.extend(records)
            return records[0]

        if settings.addition == "policy" and self.replay is None:
            tools = BankTools(self.bank, write)
        elif settings.agent == "remem":
            tools = remem = ReMemSession(self.bank, ReMemBudget.from_config(settings), write)
        started = time.perf_counter()
        attempt = solver.solve(item, demos, tools, seed)
        strict = float(self.task.strict(item, attempt))
        coarse = self.coarse.score(item.query, attempt.execution) if self.coarse is not None else None
        outcome = Outcome(strict, coarse)
        task_utility = utility(outcome, self.evaluator)
        for record in policy_writes:  # the agent's own records carry its task's labels
            if record.source in ("policy", "remem"):
                record.success, record.score = strict, task_utility
        self.bank.note_retrieval(retrieved, t, task_utility)

        vectors = self.bank.embed([attempt.execution, *(d.execution for d in demos)])
        output_sims = [float(x) for x in vectors[1:] @ vectors[0]] if demos else []
        top = int(np.argmax([d.similarity for d in demos])) if demos else None

        additions = list(policy_writes)
        if self.replay is None and self.addition.admit(outcome):
            additions += self.write(item, t, "stream", attempt.execution, success=strict, score=task_utility)
        by_agent = "remem: Delete_memory" if remem is not None else "policy: Delete_memory"
        deletions = [{"id": r.id, "reason": by_agent} for r in tools.deleted]
        if self.replay is None:
            for deletion in self.deletion.select(self.bank, t):
                self.bank.delete(deletion.record_id)
                deletions.append({"id": deletion.record_id, "reason": deletion.reason})
            if self.retention is not None:
                for eviction in evict(self.bank, settings.capacity, self.retention, t):
                    deletions.append({"id": eviction.record_id, "reason": eviction.reason})
        bank_size = self.replay.bank_size(t) if self.replay is not None else len(self.bank)
        # a replay shows the reference's records: their precision is in the reference run's log
        measured = not isinstance(self.retrieval, (NoRetrieval, ReplayRetrieval))
        precision = precision_at_k(found, item.task_key, settings.precision_k) if measured else None
        return {
            "step": t,
            "task_id": item.id,
            "query": item.query,
            "retrieved": [
                {
                    "id": r.record.id,
                    "similarity": r.similarity,
                    "output_similarity": round(output_sims[i], 6),
                    "success": r.record.success,
                    "task_key": r.record.task_key,
                }
                for i, r in enumerate(retrieved)
            ],
            "input_similarity": None if top is None else demos[top].similarity,
            "output_similarity": None if top is None else round(output_sims[top], 6),
            "execution": attempt.execution,
            "answer": attempt.answer,
            "gold": item.answer,
            "won": attempt.won,
            "success": strict,
            "coarse": coarse,
            "utility": task_utility,
            "precision": precision,
            "additions": [r.to_json() for r in additions],
            "updates": remem.updates() if remem is not None else [],
            "deletions": deletions,
            "bank_size": bank_size,
            "replies": attempt.replies,
            "prompt_tokens": attempt.prompt_tokens,
            "error": attempt.error,
            "seconds": round(time.perf_counter() - started, 3),
            "transcript": attempt.transcript,
            "remem": remem.to_json() if remem is not None else None,
        }

    # ------------------------------------------------------------------ resume
    def apply_logged(self, entry: dict[str, Any]) -> None:
        """Bring the bank to where it was after a logged step, without running the agent.

        The step's additions go in, in the order they were written, then its deletions. The log does not say how
        the agent interleaved its Add_memory and Delete_memory calls, and need not: ids are never reused in a run,
        so a step adds an id at most once and deletes only what the bank holds, and adding first and deleting
        after leaves the records the live run kept, in the same order. A log written before ids were made unique
        can name one id twice among a step's additions (an add, a delete of it, an add again, which reused the
        deleted record's id); the repeat is replayed as it happened: the deletion logged for that id first,
        then the new record."""
        step = entry["step"]
        records = [Record.from_json(data) for data in entry.get("additions", [])]
        deletions = list(entry.get("deletions", []))
        vectors_ND = self.bank.embed([r.query for r in records]) if records else []
        added: set[str] = set()
        for record, vector_D in zip(records, vectors_ND):
            if record.id in added and record.id in self.bank:
                earlier = next((d for d in deletions if d["id"] == record.id), None)
                if earlier is None:
                    raise ValueError(
                        f"step {step} adds {record.id} twice and never deletes it; {STEPS_FILE} is damaged, "
                        "delete the run directory to start afresh"
                    )
                deletions.remove(earlier)
                self.bank.delete(record.id)
            self.bank.add(record, vector_D)
            added.add(record.id)
        if step == INITIAL_STEP or self.replay is not None:
            return
        for update in entry.get("updates", []):
            record = self.bank.get(update["id"])
            if record is None:
                raise ValueError(f"step {step} rewrites {update['id']}, which is not in the rebuilt bank")
            self.bank.revise(record.id, update["execution"], update["metadata"])
        for deletion in deletions:
            if deletion["id"] not in self.bank:
                raise ValueError(f"step {step} deletes {deletion['id']}, which is not in the rebuilt bank")
            self.bank.delete(deletion["id"])
        kept = [
            Retrieved(self.bank.get(r["id"]), r["similarity"])  # type: ignore[arg-type]
            for r in entry["retrieved"]
            if r["id"] in self.bank
        ]
        self.bank.note_retrieval(kept, entry["step"], entry["utility"])
        if len(self.bank) != entry["bank_size"]:
            raise ValueError(
                f"step {entry['step']}: the rebuilt bank holds {len(self.bank)} records, "
                f"the log says {entry['bank_size']}"
            )


# --------------------------------------------------------------------------------------------- the log


class StepLog:
    """``steps.jsonl``: one line per step, appended and flushed as each step ends; a torn last line is cut."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        drop_torn_tail(self.path)
        entries = []
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        entries.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{self.path}:{number} is not valid JSON ({err}); fix or delete it") from err
        return entries

    def append(self, entry: dict[str, Any]) -> None:
        import os

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def record_feedback(record: Record) -> str | None:
    """What a demonstration says of how its record's task went: ``success`` or ``failure`` by the run's evaluator
    when it was written (the ground truth for the initial bank), the score beside a graded one; None when unknown."""
    score = record.score if record.score is not None else record.success
    if score is None:
        return None
    verdict = "success" if score >= 0.5 else "failure"
    return verdict if score in (0.0, 1.0) else f"{verdict} (score {score:.2f})"


def read_steps(run_dir: str | Path) -> list[dict[str, Any]]:
    """The logged steps of a run (without the initial-bank line)."""
    return [e for e in StepLog(Path(run_dir) / STEPS_FILE).read() if e["step"] >= 0]


# --------------------------------------------------------------------------------------------- one run


def strategy_settings(config: StreamRunConfig) -> dict[str, Any]:
    """The stream settings that define a run (``limit`` and ``plot`` may change on a continuation). The agent and
    ReMem's settings count only for a ReMem run (with how ReMem plays, :data:`REMEM_PROTOCOL`), and
    ``show_feedback`` only when on, so a run of the standard agent written before either existed still resumes."""
    remem = config.stream.agent == "remem"
    ignored = _RESUMABLE_KEYS if remem else (*_RESUMABLE_KEYS, "agent", *REMEM_SETTINGS)
    if not config.stream.show_feedback:
        ignored = (*ignored, "show_feedback")
    settings = {k: v for k, v in to_dict(config.stream).items() if k not in ignored}
    return {**settings, "remem_protocol": REMEM_PROTOCOL} if remem else settings


def run_identity(config: StreamRunConfig, task: StreamTask, model: str) -> dict[str, Any]:
    judge = config.reward.judge
    return {
        "benchmark": BENCHMARK,
        "task": task.name,
        "model": model,
        "data": {
            "source": config.data.source,
            "split": config.data.split,
            "synthetic_seed": config.data.synthetic.seed,
        },
        "stream": strategy_settings(config),
        "sampling": to_dict(config.sampling),
        "judge": {"backend": judge.backend, "model": judge.model}
        if evaluator_name(config.stream) == "coarse"
        else None,
    }


@dataclass
class RunOutcome:
    """What :func:`run_stream` leaves: the logged steps (initial bank excluded) and the final record ids."""

    steps: list[dict[str, Any]]
    initial: list[dict[str, Any]]
    final_ids: list[str]
    played: int
    resumed: int
    wall_s: float


def run_stream(
    config: StreamRunConfig,
    task: StreamTask,
    solver: Solver,
    encoder: Encoder,
    out: str | Path,
    *,
    model: str,
    coarse: CoarseJudge | None = None,
    progress: bool = False,
) -> RunOutcome:
    """Play (or continue) one stream run into ``out`` (see the module docstring)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    check_identity(out / "run.json", run_identity(config, task, model), work=out / STEPS_FILE)
    initial_items, items = stream_items(config, task, encoder)
    replay = None
    if config.stream.replay_of:
        replay = ReplayRetrieval(config.stream.replay_of, {item.id: item for item in [*initial_items, *items]})
    bank = MemoryBank(encoder)
    state = StreamState(config, task, bank, coarse, replay)
    log = StepLog(out / STEPS_FILE)
    logged = log.read()
    if logged:
        for position, entry in enumerate(logged[1:]):
            if position >= len(items) or entry["task_id"] != items[position].id:
                raise ConfigError(
                    f"{out / STEPS_FILE} step {entry['step']} is task {entry['task_id']!r}, but this stream has "
                    f"{items[position].id if position < len(items) else 'no task'!r} there; use another --out"
                )
        for entry in logged:
            state.apply_logged(entry)
    else:
        first = {"step": INITIAL_STEP, "additions": [r.to_json() for r in initial_records(config, task, initial_items)]}
        state.apply_logged(first)
        log.append(first)
        logged = [first]
    done = len(logged) - 1
    started = time.perf_counter()
    base_seed = config.sampling.seed
    bar = tqdm(total=len(items), initial=done, desc=f"stream {task.name}", unit="task", disable=not progress)
    try:
        for t in range(done, len(items)):
            seed = None if base_seed is None else derive_seed(base_seed, t)
            entry = state.step(t, items[t], solver, seed)
            log.append(entry)
            logged.append(entry)
            bar.update(1)
    finally:
        bar.close()
    return RunOutcome(
        steps=logged[1 : len(items) + 1],
        initial=logged[0]["additions"],
        final_ids=bank.ids(),
        played=len(items) - done,
        resumed=done,
        wall_s=round(time.perf_counter() - started, 3),
    )

"""One evaluation runner over a benchmark protocol: what `agemem eval hotpotqa` and `agemem eval alfworld` share.

A benchmark (:class:`Benchmark`) says what its items are, how a chunk of them is played and scored, how the
per-item records aggregate into a run's metrics, and which table columns and plot panels show them. Everything
else is here, once:

* models x variants (:func:`evaluate`, over :func:`agemem.eval.models.evaluate_models`): one folder per pair and a
  side-by-side ``comparison.{json,md,png}`` when there are several;
* one run (:func:`run_benchmark`): ``run.json`` (the run's identity; resuming into another run's folder is
  refused), ``examples.jsonl`` (one line per finished item, appended per chunk), resume (a re-run plays only what
  is not finished), chunking and per-chunk seeds, the progress bar, ``results.{json,md,png}``;
* the sentence encoder and judge, built once per :func:`evaluate` call (:class:`Shared`).

A chunk samples under ``derive_seed(sampling.seed, variant, position of its first item)``, its own base seed: a
resumed run (which restarts at a chunk boundary) samples the remaining chunks as the uninterrupted run would, and
variants sharing an engine do not shift each other's samples.

A new benchmark is one module that defines a :class:`Benchmark` and registers it
(:func:`agemem.eval.benchmarks.register_benchmark`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tqdm.auto import tqdm

from agemem.core.configlib import ConfigError, to_dict
from agemem.core.encoders import build_encoder
from agemem.eval.baselines import BuiltSystem, build_memory_system
from agemem.eval.config import EvalRunConfig
from agemem.eval.memory_systems import memory_system_names, seed_position
from agemem.eval.models import Backend, LazyBackend, ResolvedModel, evaluate_models
from agemem.eval.report import Column, ExampleLog, Panel, check_identity, console_table, write_results
from agemem.rewards.build import build_judge
from agemem.rollouts.build import build_resources
from agemem.rollouts.engines.base import derive_seed

if TYPE_CHECKING:
    from rich.table import Table

    from agemem.core.encoders import Encoder
    from agemem.core.env import EnvResources
    from agemem.rewards.base import Judge


class Item(Protocol):
    """One thing a benchmark plays: a question, a game. Its ``id`` keys ``examples.jsonl``."""

    @property
    def id(self) -> str: ...


class Workload(Protocol):
    """What a benchmark loaded for one run: the items to play, in order, and whatever else playing them needs
    (HotpotQA: the distractor pool)."""

    @property
    def items(self) -> Sequence[Item]: ...


@dataclass
class RunContext:
    """What a benchmark's session gets to play one model under one variant."""

    config: EvalRunConfig
    """the evaluation config set up for this model and variant (:meth:`Benchmark.configure`)."""
    variant: str
    out: Path
    """the run's folder."""
    log: ExampleLog
    """``examples.jsonl`` of the run."""
    backend: Backend
    shared: Shared

    memory_system: BuiltSystem | None = None
    """the memory-system baseline this run built (variants mem0, mem0g, amem, langmem), closed after the run."""

    @property
    def offered(self) -> tuple[str, ...]:
        """the tools this variant offers (TC counts calls of these)."""
        return tuple(self.config.env.tools)

    def env_resources(self) -> EnvResources:
        """The environment's shared parts for this run; a memory-system variant's store replaces AgeMem's
        long-term memory (built once per run, its stores under ``<run folder>/memory_system/``)."""
        resources = build_resources(self.config.env, self.backend.tokenizer, self.shared.get_encoder())
        if self.variant in memory_system_names():
            self.memory_system = build_memory_system(
                self.variant, self.config, self.backend, resources.encoder, self.out / "memory_system"
            )
            resources.ltm = self.memory_system.store
        return resources

    def close(self) -> None:
        if self.memory_system is not None:
            self.memory_system.close()


class PlayProgress(Protocol):
    """Where a session reports progress while it plays a chunk."""

    def advance(self, n: int) -> None:
        """``n`` more items are finished."""

    def status(self, text: str) -> None:
        """What the items in play are doing now (a game's step): shown beside the count, replaced by the next."""


class BarProgress:
    """:class:`PlayProgress` on a tqdm bar: the status is the bar's postfix, redrawn at most every
    ``min_interval_s`` (an engine tick can be far shorter than a terminal wants to redraw)."""

    def __init__(self, bar: Any, min_interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.bar = bar
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._drawn_at = float("-inf")

    def advance(self, n: int) -> None:
        self.bar.update(n)

    def status(self, text: str) -> None:
        now = self.clock()
        redraw = now - self._drawn_at >= self.min_interval_s
        if redraw:
            self._drawn_at = now
        self.bar.set_postfix_str(text, refresh=redraw)


class Session(Protocol):
    """One model under one variant, opened when some item is not finished yet."""

    @property
    def start(self) -> int:
        """how many items of the workload (a prefix) are done before this session plays; the rest of the items not
        in ``examples.jsonl`` are played."""
        ...

    def play(self, chunk: Sequence[Item], seed: int | None, progress: PlayProgress) -> list[dict[str, Any]]:
        """Play and score ``chunk``; one ``examples.jsonl`` record per item, in order, telling ``progress`` as items
        finish (and, for long items, what they are doing)."""
        ...

    def committed(self, done: int) -> None:
        """The records of the first ``done`` items are on disk (a benchmark with state across items, like
        ALFWorld's memory, may drop what it kept to resume from an earlier point)."""
        ...

    def summary(self) -> dict[str, Any]:
        """Fields this session adds to ``results.json`` (HotpotQA: the judge calls it made)."""
        ...


class Benchmark(Protocol):
    """What makes a benchmark: its items, how they are played and scored, and how the results are shown."""

    name: str
    """the ``agemem eval`` subcommand and ``results.json``'s ``benchmark``."""
    unit: str
    """one item on the progress bar (``q``, ``game``)."""
    columns: Sequence[Column]
    panels: Sequence[Panel]
    metrics_note: str
    """the paragraph under the markdown table that defines its columns."""

    def configure(self, config: EvalRunConfig, variant: str) -> EvalRunConfig:
        """A copy of a model's config set up for ``variant`` (:func:`agemem.eval.variants.apply_variant`)."""
        ...

    def load(self, config: EvalRunConfig) -> Workload:
        """The items of this run (a missing data folder or file fails here, before any model loads)."""
        ...

    def identity(self, config: EvalRunConfig) -> dict[str, Any]:
        """The settings that must not change between a run and its resumption (beyond model and variant)."""
        ...

    def open(self, run: RunContext, workload: Workload) -> Session: ...

    def aggregate(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The run's metrics from its per-item records."""
        ...

    def describe(self, config: EvalRunConfig, out: Path) -> dict[str, Any]:
        """Fields of ``results.json`` read from the config or the run's folder (ALFWorld: split, memory size)."""
        ...

    def plot_values(self, results: dict[str, Any]) -> dict[str, float | None]:
        """The numbers :attr:`panels` draw for one run."""
        ...

    def title(self, runs: Sequence[dict[str, Any]]) -> str: ...


@dataclass
class Shared:
    """What every run of one :func:`evaluate` call shares, built when first needed: the sentence encoder and the
    judge (a local judge model is loaded once, not once per model and variant)."""

    config: EvalRunConfig
    encoder: Encoder | None = None
    judge: Judge | None = None

    def get_encoder(self) -> Encoder:
        if self.encoder is None:
            self.encoder = build_encoder(self.config.env.encoder)
        return self.encoder

    def get_judge(self) -> Judge:
        if self.judge is None:
            self.judge = build_judge(self.config.reward.judge, self.get_encoder())
        return self.judge


# --------------------------------------------------------------------------------------------- one run


def chunk_seed(config: EvalRunConfig, variant: str, position: int) -> int | None:
    """The base seed of the chunk whose first item is item ``position`` of the run (None: unseeded)."""
    base = config.sampling.seed
    return None if base is None else derive_seed(base, seed_position(variant), position)


def run_benchmark(
    benchmark: Benchmark,
    resolved: ResolvedModel,
    variant: str,
    out: Path,
    backend: LazyBackend,
    shared: Shared,
    *,
    label: str | None = None,
) -> dict[str, Any]:
    """Evaluate one model under one variant into ``out``; returns the results written to ``results.json``."""
    config = benchmark.configure(resolved.config, variant)
    workload = benchmark.load(config)
    items = list(workload.items)
    if not items:
        raise ConfigError(f"{benchmark.name}: the configured data gave nothing to play (check its source and limit)")
    out.mkdir(parents=True, exist_ok=True)
    identity = {
        "benchmark": benchmark.name,
        "model": resolved.spec,
        "checkpoint": resolved.checkpoint,
        "variant": variant,
        **benchmark.identity(config),
        "retrieval": retrieval_protocol(config),
    }
    check_identity(out / "run.json", identity, work=out / "examples.jsonl")
    log = ExampleLog(out / "examples.jsonl")
    started = time.perf_counter()
    session, played = None, 0
    finished = log.finished()  # read once: a 7,405-question run would otherwise re-read the log per question
    memory_system = None
    if any(item.id not in finished for item in items):
        run = RunContext(config, variant, out, log, backend.get(), shared)
        try:
            session = benchmark.open(run, workload)
            # opening may trim the log to the newest memory snapshot (records past it are replayed): read it again
            played = play(benchmark, run, session, items, desc=label or resolved.label, finished=log.finished())
            memory_system = run.memory_system.describe() if run.memory_system is not None else None
        finally:
            run.close()
        finished = log.finished()
    examples = [finished[item.id] for item in items if item.id in finished]
    results = {
        "benchmark": benchmark.name,
        "model": label or resolved.label,
        "model_spec": resolved.spec,
        "variant": variant,
        **benchmark.describe(config, out),
        **benchmark.aggregate(examples),
        **(session.summary() if session is not None else {}),
        **({"memory_system": memory_system} if memory_system is not None else {}),
        "retrieval": retrieval_protocol(config),
        "played": played,
        "resumed": len(items) - played,
        "wall_s": round(time.perf_counter() - started, 3),
        "wall_s_per_task": round((time.perf_counter() - started) / played, 3) if played else None,
        "resolved": resolved.describe(),
        "config": to_dict(config),
    }
    write_outputs(benchmark, out, "results", [results], plot=config.eval.plot)
    return results


def retrieval_protocol(config: EvalRunConfig) -> dict[str, Any] | None:
    """How memories reach the agent unasked, before every step (variant ``rag`` and the memory systems): how many
    (``eval.rag_top_k``, one k for every memory) and searched with what (``eval.rag_query``); None where the agent
    retrieves only by its own calls (``agemem``, ``ltm_only``) or has no memory."""
    if not config.env.rag_top_k:
        return None
    return {"top_k": config.env.rag_top_k, "query": config.env.rag_query, "when": "before every agent step"}


def play(
    benchmark: Benchmark,
    run: RunContext,
    session: Session,
    items: Sequence[Item],
    *,
    desc: str,
    finished: dict[str, Any] | None = None,
) -> int:
    """Play the items not yet finished in chunks of ``eval.chunk_size``, appending each chunk's records to the log;
    returns how many items were played. ``finished``: the log's records when the caller has just read them."""
    finished = run.log.finished() if finished is None else finished
    pending = [item for item in items[session.start :] if item.id not in finished]
    position = {item.id: i for i, item in enumerate(items)}
    size = run.config.eval.chunk_size
    bar = tqdm(
        total=len(items),
        initial=len(items) - len(pending),
        desc=desc,
        unit=benchmark.unit,
        disable=not run.config.logging.progress,
    )
    try:
        for begin in range(0, len(pending), size):
            chunk = pending[begin : begin + size]
            first = position[chunk[0].id]
            records = session.play(chunk, chunk_seed(run.config, run.variant, first), BarProgress(bar))
            run.log.append(records)
            session.committed(position[chunk[-1].id] + 1)
    finally:
        bar.close()
    return len(pending)


# --------------------------------------------------------------------------------------------- outputs


def write_outputs(benchmark: Benchmark, out: Path, stem: str, runs: Sequence[dict[str, Any]], *, plot: bool) -> None:
    """``<stem>.json`` (one run: its results; several: a list without their configs), ``<stem>.md``, ``<stem>.png``."""
    write_results(
        out,
        stem,
        runs,
        title=benchmark.title(runs),
        columns=benchmark.columns,
        note=benchmark.metrics_note,
        panels=benchmark.panels,
        plot_values=benchmark.plot_values,
        plot=plot,
    )


def results_table(benchmark: Benchmark, runs: Sequence[dict[str, Any]]) -> Table:
    """The runs side by side for a terminal: one row per metric, one column per run."""
    return console_table(benchmark.title(runs), runs, benchmark.columns)


# --------------------------------------------------------------------------------------------- models x variants


def evaluate(
    benchmark: Benchmark,
    config: EvalRunConfig,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every model of ``eval.models`` (default: the configured policy or endpoint) under every
    ``eval.variants`` on ``benchmark``.

    One model and one variant write into ``out`` itself; several write one folder per pair
    (``out/<model>__<variant>/``) and a side-by-side ``out/comparison.{json,md,png}``. ``backends`` maps a model
    spec to a ready engine and tokenizer (tests, or an engine built elsewhere); other models are loaded once each,
    when a run first needs them.
    """
    shared = Shared(config, encoder)

    def run_one(resolved: ResolvedModel, variant: str, folder: Path, backend: LazyBackend, label: str) -> dict:
        return run_benchmark(benchmark, resolved, variant, folder, backend, shared, label=label)

    def comparison(folder: Path, runs: list[dict[str, Any]]) -> None:
        write_outputs(benchmark, folder, "comparison", runs, plot=config.eval.plot)

    return evaluate_models(config, out, run_one, comparison, backends=backends)

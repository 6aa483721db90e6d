"""`agemem eval stream`: one strategy, a sweep of strategies, or a CEM search of retention weights.

One run writes into its directory:

* ``steps.jsonl``: one line per task (the initial bank is step −1): retrieved ids and similarities, execution,
  scores, additions, deletions and why, bank size, transcript; the run resumes from it;
* ``results.json``: the measures of :func:`agemem.eval.stream.analysis.summarize`, the strategy, the model, the config;
* ``results.md``: the one-row table; ``stream.png``: cumulative success, input vs output similarity, bank size;
* ``run.json``: what the run is (task, data, model, strategy, sampling, judge), checked on resume.

A sweep (:mod:`agemem.eval.stream.sweep`) runs each strategy into ``<out>/<strategy>/`` and writes
``comparison.{json,md,png}``: accuracy with its Wilson interval, bank size, similarities, Precision@k and the sign
test of each strategy against the reference one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError, to_dict
from agemem.core.encoders import build_encoder
from agemem.eval.report import Column, console_table, counted, markdown_table, write_json, write_text
from agemem.eval.stream.addition import CoarseJudge, coarse_judge_for, evaluator_name, uses_coarse
from agemem.eval.stream.analysis import summarize
from agemem.eval.stream.base import ModelSolver, Solver, StreamTask
from agemem.eval.stream.config import StreamRunConfig
from agemem.eval.stream.plots import stream_plot
from agemem.eval.stream.retention import HAND_WEIGHTS, cem_search
from agemem.eval.stream.runner import run_stream
from agemem.eval.stream.tasks import build_task
from agemem.rollouts.build import sampling_params
from agemem.tasks.stream import StreamItem

if TYPE_CHECKING:
    from rich.table import Table

    from agemem.core.encoders import Encoder
    from agemem.eval.models import Backend
    from agemem.eval.stream.base import Attempt, Demonstration, MemoryTools


def strategy_label(config: StreamRunConfig) -> str:
    """A short name of a run's strategy, e.g. ``strict+history``, ``add_all/recent``, ``add_all+lru@50``,
    ``remem``, ``remem/strict+history``, ``remem/recent``."""
    s = config.stream
    if s.replay_of:
        return f"replay({Path(s.replay_of).name})"
    if s.retrieval == "none":
        return "no_memory"
    recent = "/recent" if s.retrieval == "recent" else ""
    if s.agent == "remem":  # ReMem with ExpRAG's writes (add_all) is plain "remem"
        label = "remem" + ("" if s.addition == "add_all" else f"/{s.addition}") + recent
    else:
        label = s.addition + recent
    if s.deletion != "none":
        label += f"+{s.deletion}"
    if s.retention != "none":
        label += f"+{s.retention}@{s.capacity}"
    if s.initial_noise:
        label += f"+noisy_init{s.initial_noise:g}"
    if s.noisy_writes:
        label += f"+noisy_writes{s.noisy_writes}"
    return label


COLUMNS = (
    Column("strategy", "strategy", "{}"),
    Column("model", "model", "{}"),
    Column("tasks", "tasks", "{:d}"),
    Column("table.accuracy", "acc %"),
    Column("table.ci", "95% CI", "{!s}"),
    Column("final_bank_size", "final bank", "{:d}"),
    Column("mean_bank_size", "mean bank", "{:.1f}"),
    Column("input_similarity", "in sim", "{:.3f}"),
    Column("output_similarity", "out sim", "{:.3f}"),
    Column("precision", "P@k", "{:.3f}"),
    Column("table.additions", "adds", "{:d}"),
    Column("table.deletions", "dels", "{:d}"),
    Column("mean_replies", "steps", "{:.2f}"),
    Column("remem.think_per_task", "think", "{:.2f}"),
    Column("remem.refine_per_task", "refine", "{:.2f}"),
    Column("remem.records_updated", "upd", "{:d}"),
    Column("table.sign", "sign test vs ref", "{!s}"),
)
NOTE = (
    "\nacc: tasks solved (ground truth) x100 with its Wilson 95% interval. bank: records after the last task / on "
    "average. in sim / out sim: mean cosine similarity of a task's query / execution to the most similar record it "
    "was shown. P@k: share of the first k retrieved records that succeeded on the same task (tasks with a task "
    "key). adds / dels: records written / removed. steps: model replies per task. think / refine: ReMem's Think "
    "and Refine operations per task; upd: records its Refine rewrote (its deletions are in dels). sign test: "
    "wins-losses and exact two-sided p against the reference strategy on the same tasks.\n"
)


def _table_fields(results: dict[str, Any]) -> dict[str, Any]:
    low, high = results["accuracy_ci"]
    sign = results.get("vs_reference")
    return {
        "accuracy": None if results["accuracy"] is None else 100.0 * results["accuracy"],
        "ci": f"[{100 * low:.1f}, {100 * high:.1f}]",
        "additions": sum(results["additions"].values()),
        "deletions": sum(results["deletions"].values()),
        "sign": "–" if sign is None else f"{sign['wins']}-{sign['losses']}, p={sign['p_value']:.3g}",
    }


def results_table(title: str, runs: Sequence[dict[str, Any]]) -> Table:
    return console_table(title, runs, COLUMNS)


def write_outputs(
    out: Path, stem: str, runs: Sequence[dict[str, Any]], steps: Sequence[Sequence[dict[str, Any]]], *, plot: bool
) -> None:
    """``<stem>.json``, ``<stem>.md`` (a row per run) and, with ``plot``, ``<stem>.png``."""
    for run in runs:
        run["table"] = _table_fields(run)
    data: Any = runs[0] if len(runs) == 1 else [{k: v for k, v in r.items() if k != "config"} for r in runs]
    write_json(out / f"{stem}.json", data)
    title = _title(runs)
    write_text(out / f"{stem}.md", f"# {title}\n\n" + markdown_table(runs, COLUMNS) + NOTE)
    if plot:
        stream_plot(
            out / ("stream.png" if stem == "results" else f"{stem}.png"),
            [(r["strategy"], r, s) for r, s in zip(runs, steps)],
            title=title,
        )


def _title(runs: Sequence[dict[str, Any]]) -> str:
    tasks = {r["tasks"] for r in runs}
    size = f", {counted(tasks.pop(), 'task')}" if len(tasks) == 1 else ""
    return f"Streaming memory benchmark: {runs[0]['task']}{size}"


# --------------------------------------------------------------------------------------------- one run


@dataclass
class Shared:
    """What the runs of one command share: the encoder, the model backends and the coarse judges, each built when
    first needed (a fully resumed run loads no model)."""

    config: StreamRunConfig
    encoder: Encoder | None = None
    backends: dict[str, Backend] = field(default_factory=dict)
    solver: Solver | None = None
    coarse: CoarseJudge | None = None
    _lazy: dict[str, Any] = field(default_factory=dict)
    _judges: dict[str, CoarseJudge] = field(default_factory=dict)

    def get_encoder(self) -> Encoder:
        if self.encoder is None:
            self.encoder = build_encoder(self.config.env.encoder)
        return self.encoder

    def coarse_judge(self, config: StreamRunConfig) -> CoarseJudge | None:
        if not uses_coarse(config.stream):
            return None
        if self.coarse is not None:
            return self.coarse
        key = json.dumps(to_dict(config.reward.judge), sort_keys=True)
        if key not in self._judges:
            judge = coarse_judge_for(config)
            assert judge is not None
            self._judges[key] = judge
        return self._judges[key]

    def solver_for(self, config: StreamRunConfig, task: StreamTask) -> tuple[Solver, str, Any]:
        """``(solver, model label, resolved model description)``: the given solver, or the model of
        ``eval.models`` (default: the configured policy or endpoint) playing through ``task``."""
        if self.solver is not None:
            return self.solver, getattr(self.solver, "name", "solver"), None
        from agemem.eval.models import LazyBackend, default_model, resolve_model

        models = list(config.eval.models) or [default_model(config)]
        if len(models) > 1:
            raise ConfigError(
                f"agemem eval stream plays one model at a time, got {len(models)} ({', '.join(models)}); "
                "run once per model with its own --out"
            )
        spec = models[0]
        if spec not in self._lazy:
            resolved = resolve_model(spec, config)
            self._lazy[spec] = LazyBackend(resolved, self.backends.get(spec))
        lazy = self._lazy[spec]
        return LazyModelSolver(task, lazy, config), lazy.resolved.label, lazy.resolved.describe()


@dataclass
class LazyModelSolver:
    """A :class:`ModelSolver` whose model is loaded on its first task."""

    task: StreamTask
    backend: Any
    config: StreamRunConfig
    name: str = "model"
    _solver: ModelSolver | None = None

    def solve(self, item: StreamItem, demos: Sequence[Demonstration], tools: MemoryTools, seed: int | None) -> Attempt:
        if self._solver is None:
            from agemem.eval.stream.agent import EngineChat

            backend = self.backend.get()
            chat = EngineChat(backend.engine, backend.tokenizer, sampling_params(self.config.sampling))
            self._solver = ModelSolver(self.task, chat)
        return self._solver.solve(item, demos, tools, seed)


def run_one(
    config: StreamRunConfig, out: Path, shared: Shared, *, label: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Play one strategy into ``out`` and write its results; returns ``(results, steps)``."""
    task = build_task(config)
    solver, model, resolved = shared.solver_for(config, task)
    encoder = shared.get_encoder()
    coarse = shared.coarse_judge(config)
    outcome = run_stream(
        config, task, solver, encoder, out, model=model, coarse=coarse, progress=config.logging.progress
    )
    results = {
        "benchmark": "stream",
        "task": task.name,
        "strategy": label or strategy_label(config),
        "model": model,
        "addition": config.stream.addition,
        "deletion": config.stream.deletion,
        "retention": config.stream.retention,
        "capacity": config.stream.capacity if config.stream.retention != "none" else None,
        "retrieval": config.stream.retrieval,
        "agent": config.stream.agent,
        "order": config.stream.order,
        "evaluator": evaluator_name(config.stream),
        **summarize(outcome.steps, outcome.initial),
        "played": outcome.played,
        "resumed": outcome.resumed,
        "wall_s": outcome.wall_s,
        "coarse_judge": None if coarse is None else {"name": coarse.name, **getattr(coarse, "counters", {})},
        "resolved": resolved,
        "config": to_dict(config),
    }
    write_outputs(out, "results", [results], [outcome.steps], plot=config.stream.plot)
    return results, outcome.steps


def evaluate_stream(
    config: StreamRunConfig,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
    solver: Solver | None = None,
    coarse: CoarseJudge | None = None,
) -> dict[str, Any]:
    """One stream run of ``config`` into ``out``; returns its results.

    ``backends`` maps a model spec to a ready engine and tokenizer; ``solver`` replaces the model altogether (a
    scripted or simulated agent); ``coarse`` replaces the coarse judge of ``reward.judge``.
    """
    shared = Shared(config, encoder, dict(backends or {}), solver, coarse)
    results, _ = run_one(config, Path(out), shared)
    return results


# --------------------------------------------------------------------------------------------- CEM tuning


def tune_retention(
    config: StreamRunConfig,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
    solver: Solver | None = None,
    coarse: CoarseJudge | None = None,
) -> dict[str, Any]:
    """Search the linear retention weights on the configured (tuning) stream with the cross-entropy method.

    Every candidate is one run of the stream with ``retention=linear`` and its weights, in
    ``<out>/cem/i<iteration>_c<candidate>/`` (resumable like any run); its objective is
    ``accuracy + cem_precision_weight · Precision@k`` (Precision@k counted 0 when the stream has no task keys).
    Writes ``<out>/retention_weights.json`` (``{"weights": ..., "objective": ..., "history": ...}``), which
    ``stream.retention_weights_file`` reads.
    """
    out = Path(out)
    shared = Shared(config, encoder, dict(backends or {}), solver, coarse)
    settings = config.stream

    def objective(weights: dict[str, float], name: str) -> float:
        candidate = copy.deepcopy(config)
        candidate.stream.retention = "linear"
        candidate.stream.retention_weights = weights
        candidate.stream.retention_weights_file = ""
        candidate.stream.plot = False
        results, _ = run_one(candidate, out / "cem" / name, shared, label=f"cem {name}")
        return (results["accuracy"] or 0.0) + settings.cem_precision_weight * (results["precision"] or 0.0)

    start = {**HAND_WEIGHTS, **settings.retention_weights}
    result = cem_search(
        objective,
        initial=start,
        iterations=settings.cem_iterations,
        population=settings.cem_population,
        elite=settings.cem_elite,
        std=settings.cem_std,
        seed=settings.seed,
    )
    report = {"weights": result.weights, "objective": result.objective, "history": result.history}
    write_json(out / "retention_weights.json", report)
    return report

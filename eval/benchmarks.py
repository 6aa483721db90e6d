"""Benchmarks by name: what `agemem eval NAME` plays (:class:`agemem.eval.runner.Benchmark`).

Every environment registered with an ``evaluation`` (:class:`agemem.tasks.base.Evaluation`) is a benchmark: a
question-answering task is played by :class:`agemem.eval.qa.QABenchmark`, a text-game suite by
:class:`agemem.eval.games.GameBenchmark`. The command line reads each one's help and flags from the registration,
so a new environment needs no edit here. A benchmark of another shape is one
:class:`~agemem.eval.runner.Benchmark` and one :func:`register_benchmark` call, imported before the run; it may
carry an ``evaluation`` attribute for its command's help and flags.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agemem.core.configlib import ConfigError
from agemem.tasks import evaluations, get_task
from agemem.tasks.base import Evaluation, Option
from agemem.tasks.games import get_suite, suite_names
from agemem.tasks.qa import QATask

if TYPE_CHECKING:
    from agemem.eval.runner import Benchmark

__all__ = [
    "Evaluation",
    "Option",
    "benchmark_names",
    "benchmark_title",
    "command_evaluations",
    "get_benchmark",
    "limit_key",
    "register_benchmark",
    "unregister_benchmark",
]

_REGISTRY: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark, *, replace: bool = False) -> Benchmark:
    """Make ``benchmark`` playable as ``agemem eval <benchmark.name>``; a second, different one of the same name is
    refused unless ``replace``."""
    known = _REGISTRY.get(benchmark.name)
    if known is not None and known is not benchmark and not replace:
        raise ValueError(f"a benchmark named {benchmark.name!r} is registered already; pass replace=True to swap it")
    _REGISTRY[benchmark.name] = benchmark
    return benchmark


def unregister_benchmark(name: str) -> None:
    _REGISTRY.pop(name, None)


def command_evaluations() -> dict[str, Evaluation]:
    """Every ``agemem eval`` command's help and flags, by benchmark name: the registered environments' and those of
    benchmarks registered directly (their ``evaluation`` attribute, else a help line and ``data.limit``)."""
    found = dict(evaluations())
    for name, benchmark in _REGISTRY.items():
        if name not in found:
            found[name] = getattr(benchmark, "evaluation", None) or Evaluation(
                f"{name} (registered benchmark)", getattr(benchmark, "limit_key", "") or ""
            )
    return dict(sorted(found.items()))


def limit_key(name: str) -> str:
    """The config key ``--limit`` sets for benchmark ``name`` (its environment's, else its ``limit_key`` attribute)."""
    get_benchmark(name)  # an unknown name raises, naming every benchmark there is
    key = command_evaluations()[name].limit_key
    if not key:
        raise ConfigError(f"--limit: benchmark {name!r} names no limit_key; set its item limit as a dotted override")
    return key


def benchmark_title(name: str) -> str:
    """How tables name benchmark ``name``: its evaluation's title, else its game suite's, else the name itself."""
    evaluation = command_evaluations().get(name)
    if evaluation is not None and evaluation.title:
        return evaluation.title
    return get_suite(name).title if name in suite_names() else name


def benchmark_names() -> list[str]:
    """Every benchmark that can be asked for, from an environment or registered."""
    return sorted({*evaluations(), *_REGISTRY})


def get_benchmark(name: str) -> Benchmark:
    """The benchmark ``name``: one registered directly, else the harness of the environment registered as ``name``
    (built on first use)."""
    if name not in _REGISTRY and name in evaluations():
        register_benchmark(_harness(name))
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown benchmark {name!r}; choose one of {', '.join(benchmark_names())}, or register an environment "
            "with an evaluation (agemem.tasks.register_task / register_suite) or a benchmark "
            "(agemem.eval.benchmarks.register_benchmark) in a plugin module (--plugin MODULE)"
        )
    return _REGISTRY[name]


def _harness(name: str) -> Benchmark:
    """The evaluation of environment ``name``: the one its registration names (``Evaluation.harness``), else a game
    suite's or a QA task's."""
    harness = evaluations()[name].harness
    if harness:
        module, _, function = harness.partition(":")
        return getattr(importlib.import_module(module), function)(get_task(name))
    if name in suite_names():
        from agemem.eval.games import GameBenchmark

        return GameBenchmark(get_suite(name))
    task = get_task(name)
    if isinstance(task, QATask):
        from agemem.eval.qa import QABenchmark

        return QABenchmark(task)
    raise ConfigError(
        f"environment {name!r} has an evaluation but is neither a question-answering task (QATask) nor a text-game "
        "suite; register its Benchmark with agemem.eval.benchmarks.register_benchmark"
    )

"""Benchmarks by name: what `agemem eval NAME` plays (:class:`agemem.eval.runner.Benchmark`).

The built-in benchmarks are imported when first asked for (their modules pull in the rollout driver and the
games), so listing names costs nothing. A new benchmark is one module with a :class:`~agemem.eval.runner.Benchmark`
and one ``register_benchmark(...)`` call, imported before the run (or added to :data:`BUILTIN` here).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agemem.core.configlib import ConfigError

if TYPE_CHECKING:
    from agemem.eval.runner import Benchmark


@dataclass(frozen=True)
class Option:
    """A command-line flag of one benchmark, set as a dotted config override."""

    flag: str
    key: str
    """the dotted config key the flag sets."""
    help: str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None


@dataclass(frozen=True)
class Entry:
    """A built-in benchmark as the command line knows it, without importing it."""

    module: str
    attribute: str
    """the :class:`~agemem.eval.runner.Benchmark` class in ``module``, or a function of no arguments that builds one."""
    help: str
    limit_key: str
    """the config key ``--limit N`` sets."""
    options: tuple[Option, ...] = ()


BUILTIN: dict[str, Entry] = {
    "hotpotqa": Entry(
        "agemem.eval.hotpotqa",
        "HotpotQA",
        "HotpotQA as three-stage memory episodes: J, EM, F1, MQ, TN, TC (table, JSON, plot)",
        "data.limit",
        (
            Option(
                "--data", "data.source", "HotpotQA JSON file, datasets directory or hub id (data.source)", None, "PATH"
            ),
        ),
    ),
    "alfworld": Entry(
        "agemem.eval.games",
        "alfworld",
        "ALFWorld games with environment commands and the memory tools: SR per task type, steps, TC",
        "alfworld.limit",
        (
            Option(
                "--data-dir",
                "alfworld.data_dir",
                "folder holding json_2.1.1/<split>/ (alfworld.data_dir; default: $ALFWORLD_DATA, else "
                "~/.cache/alfworld)",
                metavar="D",
            ),
            Option("--split", "alfworld.split", "games to play (alfworld.split)", ("valid_seen", "valid_unseen")),
        ),
    ),
    "sciworld": Entry(
        "agemem.eval.games",
        "sciworld",
        "ScienceWorld tasks with the memory tools: SR and the environment's score per topic, steps, TC",
        "sciworld.limit",
    ),
    "pddl": Entry(
        "agemem.eval.games",
        "pddl",
        "PDDL problems (Blocksworld, Gripper, Tyreworld, Barman) with the memory tools: PR and SR per domain, TC",
        "pddl.limit",
    ),
    "babyai": Entry(
        "agemem.eval.games",
        "babyai",
        "BabyAI levels described in text, with the memory tools: SR per level family, steps, TC",
        "babyai.limit",
    ),
}
"""the benchmarks that ship with agemem: ``agemem eval <name>``."""

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


def benchmark_names() -> list[str]:
    """Every benchmark that can be asked for, built-in or registered."""
    return sorted({*BUILTIN, *_REGISTRY})


def get_benchmark(name: str) -> Benchmark:
    if name not in _REGISTRY and name in BUILTIN:
        entry = BUILTIN[name]
        register_benchmark(getattr(importlib.import_module(entry.module), entry.attribute)())
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown benchmark {name!r}; choose one of {', '.join(benchmark_names())}, or register yours with "
            "agemem.eval.benchmarks.register_benchmark(benchmark) in a module imported before the run"
        )
    return _REGISTRY[name]

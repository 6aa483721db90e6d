"""The evaluation runner over a benchmark protocol (:mod:`agemem.eval.runner`), with a toy benchmark of ten
items: chunking and per-chunk seeds, resume after a crash (same seeds, same records as an uninterrupted run),
identity checks, models x variants, and the benchmark registry the CLI reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.benchmarks import (
    benchmark_names,
    benchmark_title,
    command_evaluations,
    get_benchmark,
    register_benchmark,
    unregister_benchmark,
)
from agemem.eval.models import Backend
from agemem.eval.report import RUN_COLUMNS, Column, ExampleLog, Panel
from agemem.eval.runner import BarProgress, PlayProgress, RunContext, chunk_seed, evaluate, results_table
from agemem.eval.variants import apply_variant
from agemem.rollouts.engines.base import derive_seed

BASE = ["logging.progress=false", "eval.plot=false", "eval.models=[toy]", "eval.chunk_size=4", "sampling.seed=7"]


@dataclass(frozen=True)
class Item:
    id: str
    value: int


@dataclass
class Workload:
    items: list[Item]


class CrashError(RuntimeError):
    pass


class ToySession:
    """Scores an item by ``value % 2``; records which chunks it saw and under which seeds."""

    def __init__(self, benchmark: Toy, run: RunContext):
        self.benchmark = benchmark
        self.run = run
        self.start = 0

    def play(self, chunk: Sequence[Item], seed: int | None, progress: PlayProgress) -> list[dict[str, Any]]:
        if self.benchmark.crash_at is not None and chunk[0].value >= self.benchmark.crash_at:
            raise CrashError(f"killed before item {chunk[0].id}")
        self.benchmark.chunks.append(([item.id for item in chunk], seed))
        progress.advance(len(chunk))
        return [{"id": item.id, "score": item.value % 2, "seed": seed} for item in chunk]

    def committed(self, done: int) -> None:
        self.benchmark.committed.append(done)

    def summary(self) -> dict[str, Any]:
        return {"sessions": 1}


class Toy:
    name = "toy"
    unit = "item"
    columns = (*RUN_COLUMNS, Column("n", "n", "{:d}"), Column("score", "score"))
    panels = (Panel("score", ("score",), "%"),)
    metrics_note = "\nscore: odd items, %.\n"

    def __init__(self, count: int = 10, crash_at: int | None = None):
        self.count = count
        self.crash_at = crash_at
        self.chunks: list[tuple[list[str], int | None]] = []
        self.committed: list[int] = []

    def configure(self, config: AgeMemConfig, variant: str) -> AgeMemConfig:
        return apply_variant(config, variant)

    def load(self, config: AgeMemConfig) -> Workload:
        return Workload([Item(f"item-{i}", i) for i in range(self.count)])

    def identity(self, config: AgeMemConfig) -> dict[str, Any]:
        return {"count": self.count}

    def open(self, run: RunContext, workload: Workload) -> ToySession:
        return ToySession(self, run)

    def aggregate(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {"n": len(examples), "score": 100.0 * sum(e["score"] for e in examples) / max(1, len(examples))}

    def describe(self, config: AgeMemConfig, out: Path) -> dict[str, Any]:
        return {"sessions": 0}

    def plot_values(self, results: dict[str, Any]) -> dict[str, float | None]:
        return {"score": results["score"]}

    def title(self, runs: Sequence[dict[str, Any]]) -> str:
        return f"toy ({runs[0]['n']} items)"


def _config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*BASE, *overrides])


def _backends() -> dict[str, Backend]:
    # the toy session never generates: the runner only hands the backend over
    return {"toy": Backend(engine=None, tokenizer=None)}  # type: ignore[arg-type]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_run_plays_every_item_in_chunks_with_per_position_seeds(tmp_path):
    toy = Toy()
    (results,) = evaluate(toy, _config(), tmp_path, backends=_backends())
    # 10 items in chunks of 4: 4 + 4 + 2, each chunk seeded by the position of its first item
    assert [ids for ids, _ in toy.chunks] == [
        [f"item-{i}" for i in r] for r in (range(0, 4), range(4, 8), range(8, 10))
    ]
    assert [seed for _, seed in toy.chunks] == [derive_seed(7, 0, position) for position in (0, 4, 8)]
    assert toy.committed == [4, 8, 10]
    # 5 of the 10 values are odd: score 50
    assert results["n"] == 10 and results["score"] == 50.0
    assert results["played"] == 10 and results["resumed"] == 0
    assert results["sessions"] == 1  # the session's summary overrides the benchmark's description
    assert results["benchmark"] == "toy" and results["variant"] == "agemem" and results["model"] == "toy"
    assert [r["id"] for r in _records(tmp_path / "examples.jsonl")] == [f"item-{i}" for i in range(10)]
    assert json.loads((tmp_path / "run.json").read_text())["count"] == 10
    assert "| toy | agemem | 10 | 50.0 |" in (tmp_path / "results.md").read_text()
    assert json.loads((tmp_path / "results.json").read_text())["score"] == 50.0


def test_a_crashed_run_resumes_with_the_seeds_and_records_of_an_uninterrupted_one(tmp_path):
    whole = Toy()
    evaluate(whole, _config(), tmp_path / "whole", backends=_backends())
    crashing = Toy(crash_at=8)  # the third chunk never finishes
    with pytest.raises(CrashError):
        evaluate(crashing, _config(), tmp_path / "cut", backends=_backends())
    assert len(_records(tmp_path / "cut" / "examples.jsonl")) == 8
    resumed = Toy()
    reads = []
    original = ExampleLog.finished
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ExampleLog, "finished", lambda log: reads.append(1) or original(log))
        (results,) = evaluate(resumed, _config(), tmp_path / "cut", backends=_backends())
    # the log is read to decide whether to play, again once the session opened (a game session may trim it to its
    # newest memory snapshot), and once for the results: never once per item
    assert len(reads) == 3
    assert resumed.chunks == [whole.chunks[-1]]  # only the last two items, under the seed they had in `whole`
    assert results["played"] == 2 and results["resumed"] == 8
    assert _records(tmp_path / "cut" / "examples.jsonl") == _records(tmp_path / "whole" / "examples.jsonl")
    # a finished run loads nothing and opens no session
    again = Toy()
    (results,) = evaluate(again, _config(), tmp_path / "cut", backends={})
    assert again.chunks == [] and results["played"] == 0 and results["sessions"] == 0


def test_resuming_into_another_runs_folder_is_refused(tmp_path):
    evaluate(Toy(count=10), _config(), tmp_path, backends=_backends())
    with pytest.raises(ConfigError, match=r"holds another evaluation .count: 10 there, 12 now"):
        evaluate(Toy(count=12), _config(), tmp_path, backends=_backends())


def test_an_evaluation_that_failed_before_its_first_item_does_not_block_the_corrected_rerun(tmp_path, monkeypatch):
    def unloadable(resolved):
        raise ConfigError(f"policy.model={resolved.spec!r} could not be loaded")

    monkeypatch.setattr("agemem.eval.models.load_backend", unloadable)
    with pytest.raises(ConfigError, match="could not be loaded"):
        evaluate(Toy(count=12), _config(), tmp_path)  # the identity is recorded, then the model fails to load
    assert (tmp_path / "run.json").exists() and not _records_or_none(tmp_path / "examples.jsonl")
    (results,) = evaluate(Toy(count=10), _config(), tmp_path, backends=_backends())  # another identity: not refused
    assert results["played"] == 10
    assert json.loads((tmp_path / "run.json").read_text())["count"] == 10
    with pytest.raises(ConfigError, match=r"holds another evaluation .count: 10 there, 12 now"):
        evaluate(Toy(count=12), _config(), tmp_path, backends=_backends())  # with work behind it, it binds


def _records_or_none(path: Path) -> list[dict[str, Any]] | None:
    return _records(path) if path.exists() else None


def test_nothing_to_play_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="toy: the configured data gave nothing to play"):
        evaluate(Toy(count=0), _config(), tmp_path, backends=_backends())


def test_variants_write_one_folder_each_and_a_comparison(tmp_path):
    toy = Toy()
    runs = evaluate(toy, _config("eval.variants=[agemem,no_memory]"), tmp_path, backends=_backends())
    assert [r["variant"] for r in runs] == ["agemem", "no_memory"]
    # variants do not shift each other's samples: the variant index is part of every chunk seed
    assert [seed for _, seed in toy.chunks] == [
        chunk_seed(_config(), v, p) for v in ("agemem", "no_memory") for p in (0, 4, 8)
    ]
    assert (tmp_path / "toy__agemem" / "results.json").exists() and (tmp_path / "toy__no_memory" / "run.json").exists()
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert [r["variant"] for r in comparison] == ["agemem", "no_memory"] and "config" not in comparison[0]
    assert results_table(toy, runs).row_count == 2  # n, score: one row per metric, one column per run


def test_unseeded_sampling_gives_unseeded_chunks(tmp_path):
    toy = Toy()
    evaluate(toy, _config("sampling.seed=null"), tmp_path, backends=_backends())
    assert {seed for _, seed in toy.chunks} == {None}


def test_registry_builds_the_builtins_lazily_and_refuses_unknown_names():
    builtins = {"alfworld", "babyai", "hotpotqa", "pddl", "sciworld", "synthetic"}
    assert builtins <= set(benchmark_names()) and builtins <= set(command_evaluations())
    assert get_benchmark("hotpotqa").name == "hotpotqa" and get_benchmark("alfworld").unit == "game"
    assert get_benchmark("synthetic").unit == "q" and get_benchmark("pddl").headline == "PR"
    assert all(get_benchmark(name).name == name for name in command_evaluations())
    titles = {name: benchmark_title(name) for name in sorted(builtins)}
    assert titles == {
        "alfworld": "ALFWorld",
        "babyai": "BabyAI",
        "hotpotqa": "HotpotQA",
        "pddl": "PDDL",
        "sciworld": "SciWorld",
        "synthetic": "Synthetic",
    }
    with pytest.raises(ConfigError, match=r"unknown benchmark 'nope'; choose one of .*alfworld.*hotpotqa"):
        get_benchmark("nope")


def test_a_registered_benchmark_is_found_and_a_clash_refused():
    toy = register_benchmark(Toy())
    try:
        assert get_benchmark("toy") is toy and "toy" in benchmark_names()
        with pytest.raises(ValueError, match="'toy' is registered already"):
            register_benchmark(Toy())
        assert register_benchmark(toy) is toy  # the same one again is fine
    finally:
        unregister_benchmark("toy")
    assert "toy" not in benchmark_names()


def test_cli_flags_of_each_builtin_become_its_config_keys():
    from agemem.entrypoints.cli import _eval_overrides, build_parser

    parser = build_parser()
    args = parser.parse_args(["eval", "alfworld", "--split", "valid_unseen", "--data-dir", "/g", "--limit", "3"])
    assert args.command == "eval" and args.benchmark == "alfworld"
    assert _eval_overrides(args) == ["alfworld.data_dir=/g", "alfworld.split=valid_unseen", "alfworld.limit=3"]
    args = parser.parse_args(["eval", "hotpotqa", "--data", "d.json", "--limit", "5", "x.y=1"])
    assert _eval_overrides(args) == ["x.y=1", "data.source=d.json", "data.limit=5"]
    assert parser.parse_args(["eval", "hotpotqa"]).out == "runs/eval/hotpotqa"


class FakeBar:
    def __init__(self) -> None:
        self.n, self.postfix, self.draws = 0, "", 0

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text
        self.draws += refresh


def test_bar_progress_counts_items_and_redraws_the_status_at_most_once_per_interval():
    clock = iter([0.0, 0.3, 0.9, 1.0, 2.5])
    bar = FakeBar()
    progress = BarProgress(bar, min_interval_s=1.0, clock=lambda: next(clock))
    progress.advance(2)
    for text in ("a", "b", "c", "d", "e"):
        progress.status(text)
    # drawn at t=0.0, 1.0 and 2.5; the statuses between are kept and shown by the next draw
    assert bar.n == 2 and bar.postfix == "e" and bar.draws == 3


@pytest.mark.parametrize(("n", "text"), [(0, "0 games"), (1, "1 game"), (2, "2 games"), (11, "11 games")])
def test_titles_count_in_the_right_number(n, text):
    from agemem.eval.report import counted

    assert counted(n, "game") == text

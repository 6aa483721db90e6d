"""`agemem compare` (:mod:`agemem.eval.compare`): the table functions on hand-made results (cells, percentages,
cost columns, the paper's reference rows, other papers' published LoCoMo rows, "—" for what was not run), the
command's errors, and one run of the tiny random model on HotpotQA and ALFWorld through the CLI, then its
resumption, which plays nothing."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from agemem.core.configlib import ConfigError
from agemem.eval.compare import (
    LOCOMO_REFERENCE,
    MISSING,
    PAPER_TABLE,
    PAPER_TABLES,
    BenchmarkColumn,
    FinishedRun,
    column_judge,
    comparison_markdown,
    comparison_rows,
    console_tables,
    headline_metric,
    llm_cost,
    plot_comparison,
    reference_blocks,
    run_timing,
    table_columns,
)
from agemem.eval.memory_systems import eval_variants
from agemem.eval.report import RUN_COLUMNS, Column
from tests.alfworld_data import DATA, needs_alfworld
from tests.eval.test_hotpotqa import TINY as TINY_HOTPOTQA

METRICS = {"hotpotqa": "J", "alfworld": "SR", "locomo": "J"}


def _results(benchmark: str, variant: str, value: float | None, *, played: int = 4, wall_s: float = 10.0, **extra):
    key = METRICS[benchmark]
    return {
        "benchmark": benchmark,
        "model": "qwen",
        "model_spec": "Qwen/Qwen2.5-7B-Instruct",
        "variant": variant,
        key: value,
        "played": played,
        "resumed": 4 - played,
        "wall_s": wall_s,
        **extra,
    }


def _run(results: dict) -> FinishedRun:
    folder = f"{results['benchmark']}/{results['model']}__{results['variant']}"
    return FinishedRun(results, folder, run_timing(results))


def _comparison(
    runs: list[FinishedRun], *, reference: bool = False, benchmarks: tuple[str, ...] = ("hotpotqa", "alfworld")
) -> dict:
    """What :func:`agemem.eval.compare.compare` writes, from finished runs (of ``benchmarks``, in that order)."""
    rows = comparison_rows(runs, METRICS)
    ran = [BenchmarkColumn(name, METRICS[name]) for name in benchmarks]
    columns = table_columns(ran, reference=PAPER_TABLE if reference else None)
    comparison = {
        "title": "Comparison: " + ", ".join(column.header for column in ran),
        "columns": [{"name": c.name, "metric": c.metric, "items": 4 if c.metric else None} for c in columns],
        "rows": rows,
    }
    if reference:
        comparison.update(reference_blocks(benchmarks))
    return comparison


def _table(markdown: str) -> list[list[str]]:
    """The cells of the first markdown table, header first (the alignment line left out)."""
    lines = markdown.split("\n\n")[1].splitlines()
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if not line.startswith("| :")]


RUNS = [
    _results("hotpotqa", "agemem", 54.4375, wall_s=10.0),
    _results("hotpotqa", "no_memory", 38.0, wall_s=2.0),
    _results("alfworld", "agemem", 25.0, wall_s=30.0),
    _results("alfworld", "no_memory", None, played=0, wall_s=0.01),  # resumed whole: no timing
]


def test_rows_hold_each_benchmarks_headline_the_run_folders_and_seconds_per_item():
    agemem, no_memory = comparison_rows([_run(r) for r in RUNS], METRICS)
    assert (agemem["method"], no_memory["method"]) == ("AgeMem", "No-Memory")
    assert agemem["values"] == {"hotpotqa": 54.4375, "alfworld": 25.0}
    assert no_memory["values"] == {"hotpotqa": 38.0, "alfworld": None}
    assert agemem["runs"] == {"hotpotqa": "hotpotqa/qwen__agemem", "alfworld": "alfworld/qwen__agemem"}
    assert agemem["items"] == {"hotpotqa": 4, "alfworld": 4}
    assert agemem["cost"]["per_task"] == {"wall_s": 5.0}  # (10 + 30) s / (4 + 4) items played
    # the run resumed whole has no timing: the row's seconds per item come from the run that played
    assert no_memory["cost"]["per_task"] == {"wall_s": 0.5}
    assert no_memory["cost"]["timing"] == {"hotpotqa": {"played": 4, "wall_s": 2.0}, "alfworld": None}


def test_the_markdown_table_has_one_row_per_method_and_percentages_with_two_decimals():
    table = _table(comparison_markdown(_comparison([_run(r) for r in RUNS])))
    assert table == [
        ["model", "method", "HotpotQA (J)", "ALFWorld (SR)", "s/task"],
        ["qwen", "AgeMem", "54.44", "25.00", "5.00"],
        ["qwen", "No-Memory", "38.00", MISSING, "0.50"],
    ]


def test_the_reference_adds_the_papers_benchmarks_and_rows_marked_as_the_papers():
    comparison = _comparison([_run(r) for r in RUNS], reference=True)
    assert [c["name"] for c in comparison["columns"]] == ["alfworld", "sciworld", "pddl", "babyai", "hotpotqa"]
    markdown = comparison_markdown(comparison)
    ours, _, paper = markdown.partition("## Reference: the AgeMem paper's numbers (not measured here)")
    assert _table(ours)[:2] == [
        ["model", "method", "ALFWorld (SR)", "SciWorld", "PDDL", "BabyAI", "HotpotQA (J)", "s/task"],
        ["qwen", "AgeMem", "25.00", MISSING, MISSING, MISSING, "54.44", "5.00"],
    ]
    assert "arXiv:2601.01885" in paper and "Qwen2.5-7B-Instruct" in paper
    rows = [line for line in paper.splitlines() if line.startswith("| Qwen")]
    methods = ["No-Memory", "LangMem", "A-Mem", "Mem0", "Mem0g", "AgeMem"]
    assert [row.split(" | ")[1] for row in rows] == methods * 2  # both of the paper's backbones
    assert rows[5] == "| Qwen2.5-7B-Instruct (paper) | AgeMem | 41.07 | 35.55 | 17.31 | 61.42 | 54.44 |"
    assert rows[0] == "| Qwen2.5-7B-Instruct (paper) | No-Memory | 27.16 | 13.80 | 10.15 | 50.80 | 38.36 |"
    assert rows[6] == "| Qwen3-4B-Instruct (paper) | No-Memory | 38.51 | 47.89 | 30.14 | 55.83 | 47.48 |"
    assert rows[11] == "| Qwen3-4B-Instruct (paper) | AgeMem | 48.97 | 59.48 | 35.07 | 72.56 | 55.49 |"
    # the paper's numbers stay under their own key, never in our rows
    block = comparison["reference"]
    assert block["model"] == "Qwen2.5-7B-Instruct, Qwen3-4B-Instruct" and "not measured here" in block["note"]
    assert block["rows"][3] == {
        "model": "Qwen2.5-7B-Instruct",
        "method": "Mem0",
        "variant": "mem0",
        "values": {"alfworld": 37.49, "sciworld": 26.99, "pddl": 13.96, "babyai": 60.58, "hotpotqa": 46.66},
    }
    assert all(set(row["values"]) == {"hotpotqa", "alfworld"} for row in comparison["rows"])


def test_a_judged_headline_names_its_judge_beside_the_papers_llm_judged_j():
    rule = {"judge": {"name": "rule:f1:recall"}}
    model = {"judge": {"name": "model:Qwen/Qwen2.5-72B-Instruct", "requests": 4}}
    for judges, expected in [
        ((rule, rule), "HotpotQA (J, rule judge)"),
        ((model, model), "HotpotQA (J, LLM judge)"),
        ((rule, model), "HotpotQA (J, judges differ)"),
        (({}, {}), "HotpotQA (J)"),
    ]:
        runs = [
            _results("hotpotqa", "agemem", 54.0, wall_s=1.0, **judges[0]),
            _results("hotpotqa", "no_memory", 38.0, wall_s=1.0, **judges[1]),
        ]
        rows = comparison_rows([_run(r) for r in runs], METRICS)
        assert BenchmarkColumn("hotpotqa", "J", column_judge(rows, "hotpotqa")).header == expected
    comparison = _comparison([_run(r) for r in RUNS], reference=True)
    paper = comparison_markdown(comparison).partition("## Reference")[2]
    assert "| model | method | ALFWorld | SciWorld | PDDL | BabyAI | HotpotQA (J, LLM judge) |" in paper


def test_llm_cost_columns_appear_only_when_a_run_reports_them():
    mem0 = [
        _results(
            "hotpotqa", "mem0", 46.0, cost={"llm_calls": 3.0, "memory_calls": 2.0, "tokens": 900.0, "memory_s": 1}
        ),
        _results("alfworld", "mem0", 30.0, played=2, llm_calls=5, cost={"memory_calls": 1.0, "tokens": None}),
    ]
    assert llm_cost(mem0[0]) == {"llm_calls": 3.0, "memory_calls": 2.0, "tokens": 900.0, "memory_s": 1.0}
    assert llm_cost(mem0[1]) == {"llm_calls": 5.0, "memory_calls": 1.0}  # None: items recorded without costs
    assert llm_cost(RUNS[0]) == {}
    table = _table(comparison_markdown(_comparison([_run(r) for r in [*RUNS, *mem0]])))
    assert table[0][4:] == ["s/task", "LLM calls/task", "mem calls/task", "tokens/task"]
    # per item over the row's items (4 each): calls (3 x 4 + 5 x 4) / 8; tokens from the one run reporting them;
    # seconds: (10 + 10) s / (4 + 2) items played
    assert table[3] == ["qwen", "Mem0", "46.00", "30.00", "3.33", "4.00", "1.50", "900"]
    assert table[1][5:] == [MISSING] * 3  # AgeMem reports no LLM cost
    (row,) = comparison_rows([_run(r) for r in mem0], METRICS)
    assert row["cost"]["per_task"]["memory_s"] == 1.0  # in comparison.json, not a table column
    assert row["cost"]["llm"]["alfworld"] == {"llm_calls": 5.0, "memory_calls": 1.0}


def test_a_variant_without_a_paper_name_is_shown_by_its_own():
    (row,) = comparison_rows([_run(_results("hotpotqa", "rag", 40.0))], METRICS)
    assert row["method"] == "rag"


def test_the_headline_metric_the_benchmark_declares_else_its_first_score_column():
    from agemem.eval.benchmarks import get_benchmark

    columns = (*RUN_COLUMNS, Column("items", "n", "{:d}"), Column("TC.total", "TC"), Column("PR", "PR"))
    assert headline_metric(SimpleNamespace(name="pddl", columns=columns, headline="SR")) == "SR"
    builtin = {name: headline_metric(get_benchmark(name)) for name in ("hotpotqa", "synthetic", "alfworld", "pddl")}
    assert builtin == {"hotpotqa": "J", "synthetic": "J", "alfworld": "SR", "pddl": "PR"}
    assert headline_metric(SimpleNamespace(name="pddl", columns=columns)) == "PR"
    with pytest.raises(ConfigError, match="headline"):
        headline_metric(SimpleNamespace(name="pddl", columns=columns[:3]))


def test_bad_benchmarks_and_variants_are_errors_naming_the_choices(tmp_path, capsys):
    from agemem.entrypoints.cli import main
    from agemem.eval.benchmarks import benchmark_names

    choices = ", ".join(benchmark_names())  # every benchmark there is, the built-in ones among them
    assert {"alfworld", "babyai", "frozenlake", "hotpotqa", "pddl", "sciworld"} <= set(benchmark_names())
    for argv, message in (
        (["--benchmark", "hotpotqa", "--benchmark", "nope"], f"unknown benchmark 'nope'; choose one of {choices}"),
        ([], f"name at least one --benchmark; choose from {choices}"),
        (["--benchmark", "hotpotqa", "--benchmark", "hotpotqa"], "hotpotqa given twice"),
        (["--benchmark", "hotpotqa", "--variant", "mem1"], "invalid choice: 'mem1' (choose from"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["compare", *argv, "--out", str(tmp_path)])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert message in error
        if "mem1" in message:
            assert all(variant in error for variant in eval_variants())
    assert list(tmp_path.iterdir()) == []  # nothing ran


TINY_ALFWORLD = [
    f"alfworld.data_dir={DATA}",
    "alfworld.split=valid_seen",
    "alfworld.max_env_steps=2",
    "alfworld.max_replies_per_step=1",
    "alfworld.debrief_replies=0",
]


@needs_alfworld
def test_tiny_random_model_on_hotpotqa_and_alfworld_then_a_resumption_that_plays_nothing(tmp_path, capsys, monkeypatch):
    from agemem.entrypoints.cli import main

    out = tmp_path / "compare"
    argv = ["compare", "--benchmark", "hotpotqa", "--benchmark", "alfworld", "--model", "tiny-random-qwen2"]
    argv += ["--variant", "agemem", "--variant", "no_memory", "--limit", "2", "--out", str(out)]
    argv += [*TINY_HOTPOTQA, *TINY_ALFWORLD]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "compare [1/2] hotpotqa" in printed and "compare [2/2] alfworld" in printed
    comparison = json.loads((out / "comparison.json").read_text())
    assert [(c["name"], c["metric"], c["items"]) for c in comparison["columns"]] == [
        ("hotpotqa", "J", 2),
        ("alfworld", "SR", 2),
    ]
    assert [(r["model"], r["method"]) for r in comparison["rows"]] == [
        ("tiny-random-qwen2", "AgeMem"),
        ("tiny-random-qwen2", "No-Memory"),
    ]
    for row in comparison["rows"]:
        assert row["values"] == {"hotpotqa": 0.0, "alfworld": 0.0}  # random tokens never answer nor win
        for benchmark, folder in row["runs"].items():
            assert folder == f"{benchmark}/tiny-random-qwen2__{row['variant']}"
            assert json.loads((out / folder / "results.json").read_text())["played"] == 2
        assert row["cost"]["per_task"]["wall_s"] > 0
        # the runs' LLM use per item (when results.json has it): the mean of the two benchmarks' (2 items each)
        reported = [json.loads((out / f / "results.json").read_text()).get("cost") for f in row["runs"].values()]
        if all(isinstance(cost, dict) and cost.get("llm_calls") is not None for cost in reported):
            mean_calls = (reported[0]["llm_calls"] + reported[1]["llm_calls"]) / 2
            assert row["cost"]["per_task"]["llm_calls"] == pytest.approx(mean_calls)
    assert (out / "comparison.png").stat().st_size > 10_000
    assert (out / "hotpotqa" / "comparison.json").is_file()  # each benchmark's own agemem-eval comparison
    table = _table((out / "comparison.md").read_text())
    assert table[0][:5] == ["model", "method", "HotpotQA (J, rule judge)", "ALFWorld (SR)", "s/task"]
    assert table[1][:4] == ["tiny-random-qwen2", "AgeMem", "0.00 [0.00, 0.00]", "0.00 [0.00, 0.00]"]  # 95% interval

    # a re-run loads no model and plays nothing; the table comes back from results.json, timings included
    def no_model(resolved):
        raise AssertionError(f"a finished run loaded {resolved.spec}")

    monkeypatch.setattr("agemem.eval.models.load_backend", no_model)
    assert main([*argv, "--reference"]) == 0
    again = json.loads((out / "comparison.json").read_text())
    for row, before in zip(again["rows"], comparison["rows"]):
        assert all(json.loads((out / f / "results.json").read_text())["played"] == 0 for f in row["runs"].values())
        assert row["values"] == before["values"] and row["cost"]["per_task"] == before["cost"]["per_task"]
    assert [c["name"] for c in again["columns"]] == ["alfworld", "sciworld", "pddl", "babyai", "hotpotqa"]
    assert again["reference"]["rows"][5]["values"]["hotpotqa"] == 54.44  # Qwen2.5-7B's AgeMem row
    assert "reference_locomo" not in again  # LoCoMo not compared: no other papers' rows
    printed = capsys.readouterr().out
    assert "the AgeMem paper's numbers (not measured here)" in printed and "54.44" in printed


# --------------------------------------------------------------------------------------------- published LoCoMo rows

LOCOMO_RUNS = [
    _results("hotpotqa", "mem0", 46.0),
    _results("locomo", "mem0", 61.25, F1=40.5, BLEU1=33.0),
]

MEM0 = "Chhikara et al., Mem0: Building Production-Ready AI Agents with Scalable Long-Term Memory (arXiv:2504.19413)"
ZEP = 'Zep blog, "Lies, Damn Lies, & Statistics: Is Mem0 Really SOTA in Agent Memory?" (2025)'
MEMORY_R1 = (
    "Yan et al., Memory-R1: Enhancing Large Language Model Agents to Manage and Utilize Memories via Reinforcement "
    "Learning (arXiv:2508.19828)"
)
PUBLISHED_LOCOMO = [  # method, our variant, model, source (its start), J, F1: as the sources publish them
    ("Full-context", "full_context", "GPT-4o-mini", MEM0, 72.90, None),
    ("Mem0g", "mem0g", "GPT-4o-mini", MEM0, 68.44, None),
    ("Mem0", "mem0", "GPT-4o-mini", MEM0, 66.88, None),
    ("Zep", None, "GPT-4o-mini", MEM0, 65.99, None),
    ("LangMem", "langmem", "GPT-4o-mini", MEM0, 58.10, None),
    ("OpenAI memory", None, "GPT-4o-mini", MEM0, 52.90, None),
    ("A-Mem", "amem", "GPT-4o-mini", MEM0, 48.38, None),
    ("Zep (corrected setup)", None, "GPT-4o-mini", ZEP, 84.61, None),
    ("Memory-R1", None, "LLaMA-3.1-8B-Instruct", MEMORY_R1, 62.74, 45.02),
]


def _section_table(section: str) -> list[list[str]]:
    """The cells of the markdown table of a ``## Reference`` section, header first (the alignment line left out)."""
    table = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| :")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table]


def _locomo_comparison(*, reference: bool = True) -> dict:
    return _comparison([_run(r) for r in LOCOMO_RUNS], reference=reference, benchmarks=("hotpotqa", "locomo"))


def test_published_locomo_rows_come_only_with_the_reference_and_a_compared_locomo():
    assert set(reference_blocks(["hotpotqa", "alfworld"])) == {"reference"}
    assert set(reference_blocks(["hotpotqa", "locomo"])) == {"reference", "reference_locomo"}
    assert "reference_locomo" not in _locomo_comparison(reference=False)
    assert "reference_locomo" not in _comparison([_run(r) for r in RUNS], reference=True)
    block = _locomo_comparison()["reference_locomo"]
    assert block["benchmark"] == "locomo" and "other papers' setups" in block["note"]
    assert "not measured here" in block["note"]


def test_every_published_locomo_number_appears_exactly_with_its_source_and_model():
    rows = _locomo_comparison()["reference_locomo"]["rows"]
    assert [set(row) for row in rows] == [{"method", "variant", "model", "source", "J", "F1"}] * len(rows)
    found = [(r["method"], r["variant"], r["model"], r["J"], r["F1"]) for r in rows]
    assert found == [(method, variant, model, J, F1) for method, variant, model, _, J, F1 in PUBLISHED_LOCOMO]
    assert all(row["source"].startswith(expected[3]) for row, expected in zip(rows, PUBLISHED_LOCOMO))
    # the Mem0 paper's setup travels with its rows: its judge and answerer, the categories and questions scored
    assert "judge and answerer GPT-4o-mini, categories 1-4, 1,540 questions" in rows[0]["source"]
    assert [row.J for row in LOCOMO_REFERENCE.rows] == [expected[4] for expected in PUBLISHED_LOCOMO]


def test_the_markdown_shows_published_locomo_rows_as_other_papers_after_the_agemem_papers():
    markdown = comparison_markdown(_locomo_comparison())
    ours, _, rest = markdown.partition("## Reference: the AgeMem paper's numbers (not measured here)")
    heading = "## Reference: published LoCoMo numbers (other papers' setups, not measured here)"
    agemem_paper, _, published = rest.partition(heading)
    assert published and markdown.count(heading) == 1  # after the AgeMem paper's, under its own heading
    assert all(source not in ours + agemem_paper for source in (MEM0, ZEP, MEMORY_R1))
    assert "other papers' setups (answerer, judge, prompts differ)" in published
    table = _section_table(published)
    assert table[0] == ["method", "model", "J", "F1", "source"]
    for cells, (method, _, model, source, J, F1) in zip(table[1:], PUBLISHED_LOCOMO, strict=True):
        assert cells[:4] == [method, model, f"{J:.2f}", MISSING if F1 is None else f"{F1:.2f}"]
        assert cells[4].startswith(source)
    assert table[-1][:4] == ["Memory-R1", "LLaMA-3.1-8B-Instruct", "62.74", "45.02"]
    titles = [table.title for table in console_tables(_locomo_comparison())]
    assert titles[1:] == [
        "reference: the AgeMem paper's numbers (not measured here)",
        "reference: published LoCoMo numbers (other papers' setups, not measured here)",
    ]


def test_the_agemem_papers_rows_never_gain_a_locomo_value(tmp_path):
    comparison = _locomo_comparison()
    assert all("locomo" not in table.benchmarks for table in PAPER_TABLES)
    assert all(set(row["values"]) == set(PAPER_TABLE.benchmarks) for row in comparison["reference"]["rows"])
    assert [c["name"] for c in comparison["columns"]][-1] == "locomo"  # ours, after the paper's benchmarks
    agemem_paper = comparison_markdown(comparison).split("## Reference: ")[1]
    assert {row[-1] for row in _section_table(agemem_paper)[1:]} == {
        MISSING
    }  # the paper's rows under our LoCoMo column
    # ours keep our LoCoMo J; no published number joins our rows
    assert [row["values"] for row in comparison["rows"]] == [{"hotpotqa": 46.0, "locomo": 61.25}]
    plot_comparison(tmp_path / "c.png", comparison)  # the plot leaves the published rows out, and still draws
    assert (tmp_path / "c.png").stat().st_size > 0


def test_without_locomo_the_reference_leaves_the_markdown_byte_for_byte_as_before():
    # sha256 of comparison.md for RUNS as written before LoCoMo's published rows existed, without and with
    # --reference: a comparison without LoCoMo must not change by a byte
    before = {
        False: "390698d3d207b1255784e8895758fa19fecb8508df2c262540855c7b5ff6cbf7",
        True: "b8d154a515b307313fb37204b79ee2740aee8a7f2a59df4030a954ec6b63418d",
    }
    for reference, digest in before.items():
        markdown = comparison_markdown(_comparison([_run(r) for r in RUNS], reference=reference))
        assert hashlib.sha256(markdown.encode()).hexdigest() == digest
        assert "LoCoMo" not in markdown and "other papers" not in markdown

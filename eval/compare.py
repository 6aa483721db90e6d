"""`agemem compare`: models x variants over several benchmarks, tabulated like the AgeMem paper's main table.

Each benchmark is played by :func:`agemem.eval.runner.evaluate` into ``out/<benchmark>/`` (one folder per model
and variant, resumable as `agemem eval` is); the table is then rebuilt from the runs' ``results.json`` files:

* one row per (model, variant), labelled with the paper's method name (:data:`METHOD_NAMES`);
* one column per benchmark: its headline metric in % (:func:`headline_metric`; HotpotQA J, ALFWorld SR);
* cost columns: wall-clock seconds per item played (:func:`run_timing`), and the LLM calls and tokens per item
  when the runs' ``results.json`` carry them (:func:`llm_cost`; :func:`agemem.eval.metrics.mean_cost` writes them).

``out/comparison.{json,md,png}`` hold the rows, the markdown table and a grouped bar plot. With ``reference`` the
paper's own rows (:data:`PAPER_TABLES`: Qwen2.5-7B-Instruct and Qwen3-4B-Instruct) are added under a separate
``reference`` key and heading, never mixed into ours. Other papers' published numbers on a benchmark the AgeMem
paper did not run (:data:`PUBLISHED_REFERENCES`: LoCoMo's) come under their own ``reference_<benchmark>`` key and
heading when that benchmark is compared, apart from both.

The table functions (:func:`run_timing`, :func:`llm_cost`, :func:`comparison_rows`, :func:`table_columns`,
:func:`reference_block`, :func:`reference_blocks`, :func:`comparison_markdown`) are pure: results dicts in, rows or
text out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.eval.benchmarks import benchmark_names, benchmark_title, get_benchmark, limit_key
from agemem.eval.memory_systems import memory_system, memory_system_names
from agemem.eval.report import RUN_COLUMNS, Panel, bar_plot, slug, write_json, write_text

if TYPE_CHECKING:
    from rich.table import Table

    from agemem.core.encoders import Encoder
    from agemem.eval.config import EvalConfig, EvalRunConfig
    from agemem.eval.models import Backend
    from agemem.eval.runner import Benchmark

MISSING = "—"
"""a cell without a number: a benchmark not run, or a run without its metric."""

METHOD_NAMES: dict[str, str] = {"no_memory": "No-Memory", "agemem": "AgeMem"}
"""the paper's name of AgeMem's variants' methods; a memory system is shown by its registered title, any other
variant by its own name."""


@dataclass(frozen=True)
class ReferenceTable:
    """Published numbers to show beside ours: one row of values per variant, in :attr:`benchmarks` order."""

    source: str
    model: str
    note: str
    benchmarks: tuple[str, ...]
    rows: tuple[tuple[str, tuple[float, ...]], ...]


PAPER_TABLE = ReferenceTable(
    source=(
        "Yu et al., Agentic Memory: Learning Unified Long-Term and Short-Term Memory Management for Large Language "
        "Model Agents (arXiv:2601.01885), main results table"
    ),
    model="Qwen2.5-7B-Instruct",
    note="the paper's numbers, not measured here; HotpotQA is the LLM-judge score J",
    benchmarks=("alfworld", "sciworld", "pddl", "babyai", "hotpotqa"),
    rows=(
        ("no_memory", (27.16, 13.80, 10.15, 50.80, 38.36)),
        ("langmem", (38.27, 28.29, 15.85, 51.34, 37.43)),
        ("amem", (34.68, 28.06, 18.39, 58.82, 43.95)),
        ("mem0", (37.49, 26.99, 13.96, 60.58, 46.66)),
        ("mem0g", (35.34, 30.50, 14.86, 58.78, 42.06)),
        ("agemem", (41.07, 35.55, 17.31, 61.42, 54.44)),
    ),
)
"""The AgeMem paper's main results for Qwen2.5-7B-Instruct (Yu et al., *Agentic Memory: Learning Unified Long-Term
and Short-Term Memory Management for Large Language Model Agents*, arXiv:2601.01885, main results table), in % per
benchmark, HotpotQA as the LLM-judge score J: what ``--reference`` prints beside our rows."""

PAPER_TABLE_QWEN3 = ReferenceTable(
    source=PAPER_TABLE.source,
    model="Qwen3-4B-Instruct",
    note=PAPER_TABLE.note,
    benchmarks=PAPER_TABLE.benchmarks,
    rows=(
        ("no_memory", (38.51, 47.89, 30.14, 55.83, 47.48)),
        ("langmem", (40.89, 50.42, 28.42, 53.80, 42.70)),
        ("amem", (34.31, 50.14, 34.41, 61.35, 48.48)),
        ("mem0", (41.17, 51.38, 31.72, 60.05, 39.16)),
        ("mem0g", (36.69, 47.76, 29.61, 57.59, 38.12)),
        ("agemem", (48.97, 59.48, 35.07, 72.56, 55.49)),
    ),
)
"""The same table's rows for Qwen3-4B-Instruct (the paper's second backbone)."""

PAPER_TABLES: tuple[ReferenceTable, ...] = (PAPER_TABLE, PAPER_TABLE_QWEN3)
"""every backbone of the paper's main table, in its order: what ``--reference`` prints."""


@dataclass(frozen=True)
class PublishedRow:
    """One row another paper (or report) published, in its own setup: its answerer, judge and prompts, not ours."""

    method: str
    """the source's name of the method."""
    variant: str | None
    """our variant of that method; None: we have none."""
    model: str
    """the backbone that answered in the source."""
    source: str
    J: float
    """the LLM-judge score J, in %."""
    F1: float | None = None
    """the token F1, in %, where the source published it."""


@dataclass(frozen=True)
class PublishedReference:
    """Other papers' published rows on one benchmark: shown beside ours only when that benchmark is compared."""

    benchmark: str
    title: str
    """the benchmark's name in the heading (a constant: the rows are about this benchmark whether or not it is
    registered under that title here)."""
    note: str
    rows: tuple[PublishedRow, ...]


MEM0_PAPER = (
    "Chhikara et al., Mem0: Building Production-Ready AI Agents with Scalable Long-Term Memory (arXiv:2504.19413); "
    "LLM-as-a-judge J, judge and answerer GPT-4o-mini, categories 1-4, 1,540 questions"
)
ZEP_BLOG = (
    'Zep blog, "Lies, Damn Lies, & Statistics: Is Mem0 Really SOTA in Agent Memory?" (2025): Zep\'s own report of a '
    "corrected Zep setup"
)
MEMORY_R1_PAPER = (
    "Yan et al., Memory-R1: Enhancing Large Language Model Agents to Manage and Utilize Memories via Reinforcement "
    "Learning (arXiv:2508.19828)"
)

LOCOMO_REFERENCE = PublishedReference(
    benchmark="locomo",
    title="LoCoMo",
    note=(
        "other papers' setups (answerer, judge, prompts differ): not measured here and not comparable row by row "
        "with ours"
    ),
    rows=(
        PublishedRow("Full-context", "full_context", "GPT-4o-mini", MEM0_PAPER, J=72.90),
        PublishedRow("Mem0g", "mem0g", "GPT-4o-mini", MEM0_PAPER, J=68.44),
        PublishedRow("Mem0", "mem0", "GPT-4o-mini", MEM0_PAPER, J=66.88),
        PublishedRow("Zep", None, "GPT-4o-mini", MEM0_PAPER, J=65.99),
        PublishedRow("LangMem", "langmem", "GPT-4o-mini", MEM0_PAPER, J=58.10),
        PublishedRow("OpenAI memory", None, "GPT-4o-mini", MEM0_PAPER, J=52.90),
        PublishedRow("A-Mem", "amem", "GPT-4o-mini", MEM0_PAPER, J=48.38),
        PublishedRow("Zep (corrected setup)", None, "GPT-4o-mini", ZEP_BLOG, J=84.61),
        PublishedRow("Memory-R1", None, "LLaMA-3.1-8B-Instruct", MEMORY_R1_PAPER, J=62.74, F1=45.02),
    ),
)
"""Published LoCoMo (Maharana et al., ACL 2024) numbers of other papers: the Mem0 paper's table (GPT-4o-mini
answering and judging), Zep's later report of its own corrected setup, and Memory-R1's LLaMA-3.1-8B-Instruct row.
The AgeMem paper has no LoCoMo column, so these never join :data:`PAPER_TABLES`."""

PUBLISHED_REFERENCES: tuple[PublishedReference, ...] = (LOCOMO_REFERENCE,)
"""other papers' rows per benchmark: what ``--reference`` adds when their benchmark is compared."""

LLM_COST_KEYS: tuple[str, ...] = ("llm_calls", "prompt_tokens", "completion_tokens", "cost")
"""top-level ``results.json`` keys of what a run's LLM use cost per item (mean over its items); every number of a
``cost`` dict counts too."""

COST_HEADERS: dict[str, tuple[str, str]] = {
    "wall_s": ("s/task", "{:.2f}"),
    "llm_calls": ("LLM calls/task", "{:.2f}"),
    "memory_calls": ("mem calls/task", "{:.2f}"),
    "tokens": ("tokens/task", "{:.0f}"),
    "prompt_tokens": ("prompt tok/task", "{:.0f}"),
    "completion_tokens": ("completion tok/task", "{:.0f}"),
    "cost": ("cost/task", "{:.4g}"),
}
"""the cost columns of the table, in order, each shown when some row has its key: header and number format. The
other cost keys (``agent_prompt_tokens``, ``memory_s``, ...) are in ``comparison.json`` only, to keep the table
readable."""


# --------------------------------------------------------------------------------------------- names and metrics


def method_name(variant: str) -> str:
    if variant in memory_system_names():
        return memory_system(variant).title
    return METHOD_NAMES.get(variant, variant)


def headline_metric(benchmark: Benchmark) -> str:
    """The ``results.json`` key of ``benchmark``'s headline metric, a percentage (0-100).

    In order: the benchmark's own ``headline`` attribute (the built-in harnesses have one: J for QA, a suite's SR or
    PR); else the first metric column of its table that is a top-level number other than a count, so a benchmark
    registered without a ``headline`` still gets a column, labelled with the key it was read from.
    """
    declared = getattr(benchmark, "headline", None)
    if declared:
        return declared
    run_keys = {column.key for column in RUN_COLUMNS}
    for column in benchmark.columns:
        if column.key not in run_keys and "." not in column.key and column.fmt not in ("{}", "{:d}"):
            return column.key
    raise ConfigError(
        f"benchmark {benchmark.name!r} has no headline metric: give it a `headline` attribute naming the "
        "results.json key of its main score (in %)"
    )


@dataclass(frozen=True)
class BenchmarkColumn:
    """One benchmark column of the table; ``metric`` None: a paper benchmark we did not run."""

    name: str
    metric: str | None
    judge: str | None = None
    """what scored the headline when a judge did: ``rule judge``, ``LLM judge``, ``judges differ`` (the rows')."""

    @property
    def header(self) -> str:
        title = benchmark_title(self.name)
        if not self.metric:
            return title
        return f"{title} ({self.metric}, {self.judge})" if self.judge else f"{title} ({self.metric})"


def judge_kind(name: str | None) -> str | None:
    """``rule judge`` for the built-in rule judges (``rule:...``), ``LLM judge`` for a model's; None: no judge."""
    if not name:
        return None
    return "rule judge" if name.startswith("rule") else "LLM judge"


def column_judge(rows: Sequence[Mapping[str, Any]], benchmark: str) -> str | None:
    """The judge of a benchmark's column over our rows: one kind, or ``judges differ``."""
    kinds = {judge_kind(row["judges"].get(benchmark)) for row in rows} - {None}
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "judges differ"


# --------------------------------------------------------------------------------------------- rows (pure)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def run_timing(results: Mapping[str, Any]) -> dict[str, float] | None:
    """``{"played", "wall_s"}`` of the invocation that wrote a run's ``results.json``: ``wall_s`` times only the
    items that invocation played, so a run it resumed whole (``played: 0``) has no timing (None)."""
    played = results.get("played") or 0
    return {"played": played, "wall_s": float(results["wall_s"])} if played > 0 else None


def llm_cost(results: Mapping[str, Any]) -> dict[str, float]:
    """The LLM cost per item a run's ``results.json`` reports (means over the run's items, which a resumed run
    recomputes from ``examples.jsonl``): the :data:`LLM_COST_KEYS` at the top level, and every number of a ``cost``
    dict (which wins over a top-level key of the same name). None values (items recorded without costs) are
    left out."""
    found = {key: results[key] for key in LLM_COST_KEYS if key in results and is_number(results[key])}
    nested = results.get("cost")
    if isinstance(nested, Mapping):
        found.update({key: value for key, value in nested.items() if is_number(value)})
    return {key: float(value) for key, value in found.items()}


def row_cost(
    timings: Mapping[str, Mapping[str, float] | None],
    llm: Mapping[str, Mapping[str, float]],
    items: Mapping[str, int],
) -> dict[str, Any]:
    """A row's cost over its benchmarks (each mapping keyed by benchmark). ``per_task``: ``wall_s`` = Σ wall_s /
    Σ played over the runs with a timing; each LLM key = Σ per-item value x items / Σ items over the runs that
    report it (a key only some runs report is averaged over those)."""
    known = [timing for timing in timings.values() if timing]
    per_task: dict[str, float] = {}
    if known:
        per_task["wall_s"] = sum(t["wall_s"] for t in known) / sum(t["played"] for t in known)
    for key in dict.fromkeys(key for cost in llm.values() for key in cost):
        reporting = [benchmark for benchmark, cost in llm.items() if key in cost]
        per_task[key] = sum(llm[b][key] * items[b] for b in reporting) / sum(items[b] for b in reporting)
    return {"per_task": per_task, "timing": dict(timings), "llm": {b: dict(cost) for b, cost in llm.items() if cost}}


@dataclass(frozen=True)
class FinishedRun:
    """One benchmark run as the table reads it."""

    results: dict[str, Any]
    """its ``results.json``."""
    folder: str
    """its folder, relative to the comparison's output folder."""
    timing: dict[str, float] | None
    """:func:`run_timing` of the invocation that played it (None: not known)."""
    interval: list[float] | None = None
    """the 95% bootstrap interval of its headline number (:func:`headline_interval`; None: not computed)."""


def comparison_rows(runs: Sequence[FinishedRun], metrics: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per (model, variant), in the order first met: the headline value of each benchmark (``metrics``:
    benchmark -> results key), the items and folder of each run, and the row's cost (:func:`row_cost`)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    timings: dict[tuple[str, str], dict[str, dict[str, float] | None]] = {}
    llm: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for run in runs:
        results = run.results
        benchmark, key = results["benchmark"], (results["model"], results["variant"])
        row = rows.setdefault(
            key,
            {
                "model": results["model"],
                "model_spec": results.get("model_spec", results["model"]),
                "variant": results["variant"],
                "method": method_name(results["variant"]),
                "values": {},
                "items": {},
                "runs": {},
                "judges": {},
                "intervals": {},
            },
        )
        judge = results.get("judge")
        row["judges"][benchmark] = judge.get("name") if isinstance(judge, dict) else None
        value = results.get(metrics[benchmark])
        row["values"][benchmark] = float(value) if is_number(value) else None
        row["items"][benchmark] = results["played"] + results["resumed"]
        row["runs"][benchmark] = run.folder
        row["intervals"][benchmark] = run.interval
        timings.setdefault(key, {})[benchmark] = run.timing
        llm.setdefault(key, {})[benchmark] = llm_cost(results)
    for key, row in rows.items():
        row["cost"] = row_cost(timings[key], llm[key], row["items"])
    return list(rows.values())


def table_columns(ran: Sequence[BenchmarkColumn], *, reference: ReferenceTable | None = None) -> list[BenchmarkColumn]:
    """The benchmark columns: the ones run, in their order; with ``reference``, the paper's benchmarks in the
    paper's order (those not run have no metric and show :data:`MISSING` in our rows), then the others run."""
    if reference is None:
        return list(ran)
    by_name = {column.name: column for column in ran}
    paper = [by_name.get(name, BenchmarkColumn(name, None)) for name in reference.benchmarks]
    return [*paper, *(column for column in ran if column.name not in reference.benchmarks)]


def reference_block(tables: Sequence[ReferenceTable] = PAPER_TABLES) -> dict[str, Any]:
    """``comparison.json``'s ``reference``: the paper's rows of every backbone, each row with its model, marked as
    the paper's."""
    return {
        "source": tables[0].source,
        "model": ", ".join(table.model for table in tables),
        "note": tables[0].note,
        "judged": {"hotpotqa": "J, LLM judge"},
        "rows": [
            {
                "model": table.model,
                "method": method_name(variant),
                "variant": variant,
                "values": dict(zip(table.benchmarks, values)),
            }
            for table in tables
            for variant, values in table.rows
        ],
    }


def published_key(benchmark: str) -> str:
    """``comparison.json``'s key of other papers' rows on ``benchmark``, beside the AgeMem paper's ``reference``."""
    return f"reference_{benchmark}"


def published_block(published: PublishedReference) -> dict[str, Any]:
    """``comparison.json``'s block of other papers' rows on one benchmark, each with its source and model."""
    return {
        "benchmark": published.benchmark,
        "title": published.title,
        "note": published.note,
        "rows": [
            {"method": r.method, "variant": r.variant, "model": r.model, "source": r.source, "J": r.J, "F1": r.F1}
            for r in published.rows
        ],
    }


def reference_blocks(
    benchmarks: Sequence[str], published: Sequence[PublishedReference] = PUBLISHED_REFERENCES
) -> dict[str, Any]:
    """What ``--reference`` adds to ``comparison.json`` when ``benchmarks`` are compared: the AgeMem paper's rows
    (``reference``), and under their own key (:func:`published_key`) other papers' rows of each compared benchmark
    that has some: kept apart, as neither is measured here nor in the other's setup."""
    blocks = {"reference": reference_block(PAPER_TABLES)}
    for table in published:
        if table.benchmark in benchmarks:
            blocks[published_key(table.benchmark)] = published_block(table)
    return blocks


def percent_cell(value: float | None, interval: Sequence[float] | None = None) -> str:
    """``41.07``, or with its interval ``41.07 [38.20, 44.10]``; :data:`MISSING` without a value."""
    if value is None:
        return MISSING
    return f"{value:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def cost_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The cost columns: ``wall_s`` always, then each other :data:`COST_HEADERS` key some row reports."""
    reported = {key for row in rows for key in row["cost"]["per_task"]}
    return [key for key in COST_HEADERS if key == "wall_s" or key in reported]


def cost_cell(key: str, value: float | None) -> str:
    return MISSING if value is None else COST_HEADERS[key][1].format(value)


def our_table(comparison: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The header and cells of our rows: model, method, one headline % per benchmark column, the cost columns."""
    columns = [BenchmarkColumn(c["name"], c["metric"], c.get("judge")) for c in comparison["columns"]]
    rows = comparison["rows"]
    costs = cost_keys(rows)
    header = ["model", "method", *(c.header for c in columns), *(COST_HEADERS[k][0] for k in costs)]
    body = [
        [
            row["model"],
            row["method"],
            *(percent_cell(row["values"].get(c.name), row.get("intervals", {}).get(c.name)) for c in columns),
            *(cost_cell(k, row["cost"]["per_task"].get(k)) for k in costs),
        ]
        for row in rows
    ]
    return header, body


def reference_table(comparison: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The header and cells of the paper's rows, over the same benchmark columns as ours."""
    names = [c["name"] for c in comparison["columns"]]
    reference = comparison["reference"]
    judged = reference.get("judged", {})  # the paper's judged columns say so, as ours do
    titles = [f"{benchmark_title(n)} ({judged[n]})" if n in judged else benchmark_title(n) for n in names]
    header = ["model", "method", *titles]
    body = [
        [
            f"{row.get('model', reference['model'])} (paper)",
            row["method"],
            *(percent_cell(row["values"].get(name)) for name in names),
        ]
        for row in reference["rows"]
    ]
    return header, body


def published_table(block: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The header and cells of other papers' rows on one benchmark: method, model, J, F1 (:data:`MISSING` where
    not published) and source."""
    header = ["method", "model", "J", "F1", "source"]
    body = [
        [row["method"], row["model"], percent_cell(row["J"]), percent_cell(row["F1"]), row["source"]]
        for row in block["rows"]
    ]
    return header, body


def published_heading(block: Mapping[str, Any]) -> str:
    return f"published {block['title']} numbers (other papers' setups, not measured here)"


def published_sections(comparison: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The blocks of other papers' rows ``comparison`` carries, in :data:`PUBLISHED_REFERENCES` order."""
    keys = [published_key(table.benchmark) for table in PUBLISHED_REFERENCES]
    return [comparison[key] for key in keys if key in comparison]


def left_aligned(index: int, name: str, text_columns: int = 2) -> bool:
    """Whether a table's column holds text (left-aligned) rather than numbers (right): the first ``text_columns``,
    and the ``source`` that ends a table of published rows (:func:`published_table`)."""
    return index < text_columns or name == "source"


def markdown(header: Sequence[str], body: Sequence[Sequence[str]], text_columns: int = 2) -> str:
    """A GitHub-markdown table: the text columns (:func:`left_aligned`) left-aligned, the numbers right."""
    align = [":---" if left_aligned(i, name, text_columns) else "---:" for i, name in enumerate(header)]
    lines = [header, align, *body]
    return "\n".join("| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in lines) + "\n"


def comparison_markdown(comparison: Mapping[str, Any]) -> str:
    """``comparison.md``: our table, what its columns mean, with a ``reference`` the paper's rows under their own
    heading, then under theirs other papers' published rows (:func:`reference_blocks`)."""
    ran = [c for c in comparison["columns"] if c["metric"]]
    items = ", ".join(f"{benchmark_title(c['name'])} {c['items']}" for c in ran)
    llm = len(cost_keys(comparison["rows"])) > 1
    bootstrap = comparison.get("bootstrap")
    intervals = (
        f"percentile bootstrap over the run's items, {bootstrap['samples']} resamples, seed {bootstrap['seed']}"
        if bootstrap
        else ""
    )
    text = f"# {comparison['title']}\n\n" + markdown(*our_table(comparison))
    text += (
        "\nEach benchmark column: its headline metric in % (results key in brackets; HotpotQA J: the judge's answer "
        "score x100, the paper's LLM-judge score when reward.judge is a model; ALFWorld SR: games won)"
        + (f", then its 95% interval ({intervals})" if intervals else "")
        + f"; {MISSING}: not run. Items per benchmark: {items}. s/task: wall-clock seconds per item played over the "
        "row's runs (loading the model included)"
        + ("; the other /task columns: the LLM calls and tokens the runs report, per item" if llm else "")
        + ". Runs: <benchmark>/<model>__<variant>/ under this folder (comparison.json: rows[].runs).\n"
    )
    if "reference" in comparison:
        reference = comparison["reference"]
        text += (
            f"\n## Reference: the AgeMem paper's numbers (not measured here)\n\n{reference['source']}; "
            f"{reference['model']}; {reference['note']}.\n\n" + markdown(*reference_table(comparison))
        )
    for block in published_sections(comparison):
        text += (
            f"\n## Reference: {published_heading(block)}\n\n{block['note']}. J: LLM-judge score, F1: token F1, "
            f"both in % ({MISSING}: not published).\n\n" + markdown(*published_table(block))
        )
    return text


def console_tables(comparison: Mapping[str, Any]) -> list[Table]:
    """``comparison.md``'s tables for a terminal: ours, then the paper's when there is a reference, then other
    papers' published rows it carries."""
    from rich.table import Table

    parts = [(comparison["title"], our_table(comparison))]
    if "reference" in comparison:
        parts.append(("reference: the AgeMem paper's numbers (not measured here)", reference_table(comparison)))
    parts += [
        (f"reference: {published_heading(block)}", published_table(block)) for block in published_sections(comparison)
    ]
    tables = []
    for title, (header, body) in parts:
        table = Table(title=title)
        for i, name in enumerate(header):
            table.add_column(name, justify="left" if left_aligned(i, name) else "right")
        for cells in body:
            table.add_row(*cells)
        tables.append(table)
    return tables


# --------------------------------------------------------------------------------------------- the command


def check_benchmarks(names: Sequence[str]) -> list[str]:
    """``names`` when each is a benchmark, once; else a :class:`ConfigError` naming the choices."""
    if not names:
        raise ConfigError(f"name at least one --benchmark; choose from {', '.join(benchmark_names())}")
    repeated = sorted({name for name in names if list(names).count(name) > 1})
    if repeated:
        raise ConfigError(f"--benchmark {', '.join(repeated)} given twice; list each benchmark once")
    for name in names:
        get_benchmark(name)  # an unknown name raises, naming every benchmark there is
    return list(names)


def benchmark_overrides(
    name: str, overrides: Sequence[str], *, models: Sequence[str], variants: Sequence[str], limit: int | None
) -> list[str]:
    """The dotted overrides of benchmark ``name``'s config: the user's, then the flags (a flag wins, as in
    `agemem eval`)."""
    flags = [f"eval.models={json.dumps(list(models))}"] if models else []
    if variants:
        flags.append(f"eval.variants={json.dumps(list(variants))}")
    if limit is not None:
        flags.append(f"{limit_key(name)}={limit}")
    return [*overrides, *flags]


def run_folder(out: Path, results: Mapping[str, Any], *, single: bool) -> Path:
    """Where :func:`agemem.eval.models.evaluate_models` wrote a run: ``out`` itself for a lone model and variant,
    else ``out/<model>__<variant>/``."""
    return out if single else out / f"{slug(results['model'])}__{results['variant']}"


def played_timings(out: Path) -> dict[Path, dict[str, float]]:
    """The timing of each run under ``out`` whose ``results.json`` records play, read before a resumed evaluation
    rewrites it with ``played: 0`` (a compare killed in a later benchmark would otherwise lose the timings of the
    earlier, finished ones)."""
    found = {}
    for path in [out / "results.json", *out.glob("*/results.json")]:
        timing = run_timing(read_results(path)) if path.is_file() else None
        if timing:
            found[path.parent] = timing
    return found


def previous_timings(path: Path) -> dict[str, dict[str, float]]:
    """The run timings a former ``comparison.json`` kept, by run folder: a run finished then and resumed now played
    nothing this time, so its timing comes from there. An unreadable file only loses those timings."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        return {
            folder: timing
            for row in rows
            for benchmark, folder in row["runs"].items()
            if (timing := row["cost"]["timing"].get(benchmark))
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def headline_interval(benchmark: Benchmark, metric: str, run_dir: Path, settings: EvalConfig) -> list[float] | None:
    """The 95% interval of a run's headline number: its finished items (``examples.jsonl``) resampled
    ``eval.bootstrap_samples`` times (:func:`agemem.eval.stats.bootstrap_interval`, seeded with
    ``eval.bootstrap_seed``), the benchmark's own aggregate recomputed on each resample; None when intervals are off
    or the run has fewer than two items."""
    if not settings.bootstrap_samples:
        return None
    from agemem.eval.report import ExampleLog
    from agemem.eval.stats import bootstrap_interval

    examples = list(ExampleLog(run_dir / "examples.jsonl").finished().values())

    def headline(sample: list[dict[str, Any]]) -> float | None:
        value = benchmark.aggregate(sample).get(metric)
        return float(value) if is_number(value) else None

    found = bootstrap_interval(examples, headline, samples=settings.bootstrap_samples, seed=settings.bootstrap_seed)
    return None if found is None else [round(found[0], 2), round(found[1], 2)]


def read_results(path: Path) -> dict[str, Any]:
    results = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(results, dict):
        raise ConfigError(f"{path} holds no run's results (a JSON object); delete its folder to run it afresh")
    return results


def compare(
    configs: Mapping[str, EvalRunConfig],
    out: str | Path,
    *,
    reference: bool = False,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
    announce: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Evaluate ``eval.models`` x ``eval.variants`` of each benchmark's config (``configs``: benchmark name ->
    its config) into ``out/<benchmark>/`` and write ``out/comparison.{json,md,png}``; returns what the JSON holds.

    Every benchmark, its headline metric and its data are checked before any model loads. A re-run resumes each
    benchmark (finished runs play nothing) and rebuilds the table from the runs' ``results.json``; ``backends``
    and ``encoder`` as for :func:`agemem.eval.runner.evaluate`.
    """
    from agemem.eval.models import default_model
    from agemem.eval.runner import evaluate

    out = Path(out)
    names = check_benchmarks(list(configs))
    benchmarks = {name: get_benchmark(name) for name in names}
    metrics = {name: headline_metric(benchmark) for name, benchmark in benchmarks.items()}
    for name, benchmark in benchmarks.items():  # a missing data folder fails now, not after hours of other benchmarks
        config = configs[name]
        benchmark.load(benchmark.configure(config, config.eval.variants[0]))
    previous = previous_timings(out / "comparison.json")
    finished: list[FinishedRun] = []
    for number, name in enumerate(names, 1):
        config, folder = configs[name], out / name
        models = ", ".join(config.eval.models) or default_model(config)
        announce(f"compare [{number}/{len(names)}] {name}: {models} x {', '.join(config.eval.variants)} -> {folder}")
        before = played_timings(folder)
        runs = evaluate(benchmarks[name], config, folder, backends=backends, encoder=encoder)
        for run in runs:
            run_dir = run_folder(folder, run, single=len(runs) == 1)
            results = read_results(run_dir / "results.json")
            key = run_dir.relative_to(out).as_posix()
            timing = run_timing(results) or before.get(run_dir) or previous.get(key)
            interval = headline_interval(benchmarks[name], metrics[name], run_dir, config.eval)
            finished.append(FinishedRun(results, key, timing, interval))
    rows = comparison_rows(finished, metrics)
    # the judge goes into the header: a rule-judged HotpotQA J is not the paper's LLM-judged J
    ran = [BenchmarkColumn(name, metrics[name], column_judge(rows, name)) for name in names]
    items = rows[0]["items"]  # every row played the same items of a benchmark (one config per benchmark)
    comparison: dict[str, Any] = {
        "title": "Comparison: " + ", ".join(column.header for column in ran),
        "columns": [
            {"name": c.name, "metric": c.metric, "judge": c.judge, "items": items.get(c.name)}
            for c in table_columns(ran, reference=PAPER_TABLE if reference else None)
        ],
        "rows": rows,
    }
    settings = next(iter(configs.values())).eval
    if settings.bootstrap_samples:
        comparison["bootstrap"] = {"samples": settings.bootstrap_samples, "seed": settings.bootstrap_seed}
    if reference:
        comparison.update(reference_blocks(names))
    write_json(out / "comparison.json", comparison)
    write_text(out / "comparison.md", comparison_markdown(comparison))
    if all(config.eval.plot for config in configs.values()):
        plot_comparison(out / "comparison.png", comparison)
    return comparison


def plot_comparison(path: Path, comparison: Mapping[str, Any]) -> None:
    """Grouped bars: one group per benchmark, one bar per row (model, method); with a ``reference`` block the
    paper's rows too, hatched and labelled as the paper's, over every benchmark column (ours show n/a where not run)."""
    reference = comparison.get("reference")
    shown = [c for c in comparison["columns"] if c["metric"] or reference]
    columns = [BenchmarkColumn(c["name"], c["metric"], c.get("judge")) for c in shown]
    rows = comparison["rows"]
    labels = [f"{row['model']} {row['method']}" for row in rows]
    values = [{c.header: row["values"].get(c.name) for c in columns} for row in rows]
    hatched = [False] * len(rows)
    if reference:
        labels += [f"{row.get('model', reference['model'])} {row['method']} (paper)" for row in reference["rows"]]
        values += [{c.header: row["values"].get(c.name) for c in columns} for row in reference["rows"]]
        hatched += [True] * len(reference["rows"])
    panel = Panel("headline metric per benchmark (%)", [c.header for c in columns], "%", ymax=100.0)
    bar_plot(path, labels, values, [panel], hatched=hatched)

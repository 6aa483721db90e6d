"""What every evaluation harness writes: a resumable per-item log, JSON results, tables and plots.

Shared by the benchmark harnesses (HotpotQA, ALFWorld): nothing here knows a benchmark's metrics. A
harness names its columns (:class:`Column`) and plot panels (:class:`Panel`) and passes plain dicts of
results.

* :class:`ExampleLog`: ``examples.jsonl``, one JSON line per finished item, appended as items finish;
  a re-run reads the finished ids back and plays only the rest (resume). A last line cut short by a
  killed run is removed before anything is appended.
* :func:`check_identity`: ``run.json``, what a run is; resuming into a folder of another run is refused.
* :func:`write_json`: atomic (a reader sees the old file or the new one, never half).
* :func:`write_results`: a harness's ``<stem>.json``, ``<stem>.md`` and ``<stem>.png`` for one run or several.
* :func:`markdown_table` / :func:`console_table`: one row per run, the same columns.
* :func:`bar_plot`: grouped bars, one panel per metric group, one bar colour per run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.core.files import atomic_open
from agemem.core.tools import TOOL_NAMES

if TYPE_CHECKING:
    from rich.table import Table


class ExampleLog:
    """A JSONL file of finished items keyed by ``id_key``; append-only, resumable."""

    def __init__(self, path: str | os.PathLike[str], id_key: str = "id"):
        self.path = Path(path)
        self.id_key = id_key

    def finished(self) -> dict[str, dict[str, Any]]:
        """The records already written, by id (a later line for the same id wins); cuts a torn last line."""
        if not self.path.exists():
            return {}
        drop_torn_tail(self.path)
        records: dict[str, dict[str, Any]] = {}
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(
                        f"{self.path}:{number} is not valid JSON ({err}); fix or delete that line to resume"
                    ) from err
                records[str(record[self.id_key])] = record
        return records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append records, one line each, flushed to disk before returning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def keep(self, ids: Iterable[str]) -> None:
        """Rewrite the log (atomically) with only the records of ``ids``, in that order: a resumed run that must
        replay some finished items drops their records first."""
        records = self.finished()
        with atomic_open(self.path) as handle:
            for key in ids:
                if key in records:
                    handle.write(json.dumps(records[key], ensure_ascii=False) + "\n")


def drop_torn_tail(path: Path) -> None:
    """Cut a last line that has no newline (its writer was killed mid-line)."""
    with path.open("rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    with atomic_open(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def check_identity(path: Path, identity: dict[str, Any], *, work: Path) -> None:
    """Refuse to resume into a directory that holds another evaluation; record the identity otherwise.

    ``work`` is the file its played items are logged to: an identity without work behind it (an evaluation
    that failed before its first item, e.g. on a model that would not load) binds nothing and is replaced,
    so the corrected rerun into the same ``--out`` is not refused."""
    if path.exists() and work.exists() and work.stat().st_size > 0:
        stored = json.loads(path.read_text())
        changed = [key for key in identity if stored.get(key) != identity[key]]
        if changed:
            key = changed[0]
            raise ConfigError(
                f"{path.parent} holds another evaluation ({key}: {stored.get(key)!r} there, {identity[key]!r} now); "
                f"use another --out, or delete {path.parent} to start afresh"
            )
    write_json(path, identity)


def counted(n: int, noun: str) -> str:
    """``1 game``, ``3 games``: a count with its noun in the right number (for titles)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def slug(text: str) -> str:
    """A file-name-safe form of a label: runs of other characters become one ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


@dataclass(frozen=True)
class Column:
    key: str
    """a key of the results dict; ``a.b`` reads ``results["a"]["b"]``."""
    header: str
    fmt: str = "{:.1f}"
    """format of a number; None values print as an en dash."""

    def cell(self, results: dict[str, Any]) -> str:
        value: Any = results
        for part in self.key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return "–"
        return self.fmt.format(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


RUN_COLUMNS = (Column("model", "model", "{}"), Column("variant", "variant", "{}"))
"""the first columns of every benchmark table: which model, which variant."""

COST_COLUMNS = (
    Column("cost.llm_calls", "calls", "{:.1f}"),
    Column("cost.memory_calls", "mem calls", "{:.1f}"),
    Column("cost.tokens", "tokens", "{:.0f}"),
    Column("wall_s_per_task", "s/task", "{:.2f}"),
)
"""the last columns of every benchmark table: what a task cost (:func:`agemem.eval.metrics.mean_cost`)."""

COST_NOTE = (
    "calls: LLM calls per task (the agent's steps plus a memory system's calls); mem calls: the memory system's "
    "share; tokens: their prompt plus completion tokens per task; s/task: wall seconds per task played.\n"
)


def tool_label(name: str) -> str:
    """A tool's short label in tables and plots: ``Add_memory`` -> ``Add``."""
    return name.split("_")[0]


TOOL_CALL_COLUMNS = (
    *(Column(f"TC.{name}", f"TC {tool_label(name)}", "{:.2f}") for name in TOOL_NAMES),
    Column("TC.total", "TC total", "{:.2f}"),
)
"""TC: mean calls of each tool per episode, then all tools (``TC`` of :func:`agemem.eval.metrics.mean_tool_calls`)."""
TOOL_CALL_LABELS = (*(tool_label(name) for name in TOOL_NAMES), "total")
"""the bars of a tool-call panel, in :func:`tool_call_values` order."""


def tool_call_values(tool_calls: dict[str, float]) -> dict[str, float]:
    """A run's ``TC`` dict keyed by :data:`TOOL_CALL_LABELS`, for a plot panel."""
    return {**{tool_label(name): tool_calls[name] for name in TOOL_NAMES}, "total": tool_calls["total"]}


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """A GitHub-markdown table, one row per results dict; text columns left-aligned, numbers right."""
    header = "| " + " | ".join(c.header for c in columns) + " |"
    align = "|" + "|".join(":---" if c.fmt == "{}" else "---:" for c in columns) + "|"
    body = ["| " + " | ".join(c.cell(row).replace("|", "\\|") for c in columns) + " |" for row in rows]
    return "\n".join([header, align, *body]) + "\n"


def console_table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> Table:
    """The markdown table transposed for a terminal: one row per metric, one column per run, the run's
    text columns (``fmt="{}"``, e.g. model and variant) as its header."""
    from rich.table import Table

    names = [c for c in columns if c.fmt == "{}"]
    table = Table(title=title, show_header=True)
    table.add_column("metric")
    for row in rows:
        table.add_column("\n".join(c.cell(row) for c in names), justify="right")
    for column in columns:
        if column.fmt != "{}":
            table.add_row(column.header, *(column.cell(row) for row in rows))
    return table


@dataclass(frozen=True)
class Panel:
    title: str
    metrics: Sequence[str]
    """keys of the values dicts, one bar group each."""
    ylabel: str = ""
    ymax: float | None = None
    """fixed top of the y axis (e.g. 100 for percentages); None: fit the bars."""


def bar_plot(
    path: str | os.PathLike[str],
    labels: Sequence[str],
    values: Sequence[dict[str, float | None]],
    panels: Sequence[Panel],
    *,
    title: str = "",
    hatched: Sequence[bool] = (),
) -> None:
    """Grouped bars: in each panel one group per metric and one bar per run (``labels[i]``, ``values[i]``).

    Every bar carries its value, so a panel of zeros reads "0" rather than looking empty; a missing or None value
    draws no bar but an "n/a" mark, so a metric that does not apply is not read as 0. ``hatched[i]``: draw run
    i's bars hatched (numbers quoted from elsewhere, e.g. the paper's). Written with the Agg backend.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = [min(9.0, max(3.5, 0.35 * len(p.metrics) * max(1, len(labels)) + 2.0)) for p in panels]
    fig, axes = plt.subplots(1, len(panels), figsize=(sum(widths), 4.6), gridspec_kw={"width_ratios": widths})
    axes = list(axes) if len(panels) > 1 else [axes]
    bar = 0.8 / max(1, len(labels))
    for axis, panel in zip(axes, panels):
        xs = range(len(panel.metrics))
        top = panel.ymax or max([v for row in values for m in panel.metrics if (v := row.get(m)) is not None] or [1])
        for i, (label, row) in enumerate(zip(labels, values)):
            offset = (i - (len(labels) - 1) / 2) * bar
            heights = [row.get(m) for m in panel.metrics]
            shown = [(x + offset, h) for x, h in zip(xs, heights) if h is not None]
            drawn = axis.bar(
                [x for x, _ in shown], [h for _, h in shown], bar, label=label,
                hatch="//" if i < len(hatched) and hatched[i] else None,
            )  # fmt: skip
            upright = 90 if len(labels) > 4 else 0  # many bars to a group: labels side by side would overlap
            axis.bar_label(drawn, fmt="%.3g", fontsize="x-small", padding=1, rotation=upright)
            for x, h in zip(xs, heights):
                if h is None:
                    axis.text(
                        x + offset, top * 0.01, "n/a", ha="center", va="bottom", fontsize="x-small", color="0.45",
                        rotation=upright,
                    )  # fmt: skip
        axis.set_xticks(list(xs), list(panel.metrics), rotation=30 if len(panel.metrics) > 4 else 0, ha="right"
                        if len(panel.metrics) > 4 else "center")  # fmt: skip
        axis.set_title(panel.title, fontsize="medium", wrap=True)
        axis.set(ylabel=panel.ylabel)
        axis.set_ylim(0, (panel.ymax or top or 1.0) * 1.12)  # room for the value labels above the tallest bar
        axis.grid(axis="y", alpha=0.3)
    # the legend below the panels: inside, it covered bars; it grows with the runs instead of the bars shrinking
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", fontsize="small",
               ncol=min(3, max(1, len(labels))), frameon=False)  # fmt: skip
    if title:
        fig.suptitle(title, wrap=True)
    rows = -(-len(labels) // 3)
    fig.tight_layout(rect=(0, 0.06 * rows, 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def unique_labels(
    labels: Sequence[str], make: Callable[[str, int], str] = lambda label, n: f"{label}-{n}"
) -> list[str]:
    """``labels`` with repeats told apart (``a, a`` → ``a, a-2``)."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else make(label, seen[label]))
    return out


def without_config(results: dict[str, Any]) -> dict[str, Any]:
    """A run's results without its full config (the comparison file lists several runs)."""
    return {k: v for k, v in results.items() if k != "config"}


def write_results(
    out: Path,
    stem: str,
    runs: Sequence[dict[str, Any]],
    *,
    title: str,
    columns: Sequence[Column],
    note: str,
    panels: Sequence[Panel],
    plot_values: Callable[[dict[str, Any]], dict[str, float | None]],
    plot: bool,
) -> None:
    """``<stem>.json`` (one run: its results; several: a list without their configs), ``<stem>.md`` (``title``,
    the table, ``note``) and, with ``plot``, ``<stem>.png`` (one bar colour per run, labelled model (variant))."""
    write_json(out / f"{stem}.json", runs[0] if len(runs) == 1 else [without_config(r) for r in runs])
    write_text(out / f"{stem}.md", f"# {title}\n\n" + markdown_table(runs, columns) + note)
    if plot:
        labels = [f"{r['model']} ({r['variant']})" for r in runs]
        bar_plot(out / f"{stem}.png", labels, [plot_values(r) for r in runs], panels, title=title)

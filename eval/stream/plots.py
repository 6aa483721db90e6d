"""The stream benchmark's figure: cumulative success, input vs output similarity, bank size over the stream.

One line (or one colour of points) per strategy; written with the Agg backend (no display needed).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def stream_plot(
    path: str | os.PathLike[str],
    runs: Sequence[tuple[str, dict[str, Any], Sequence[dict[str, Any]]]],
    *,
    title: str = "",
) -> None:
    """:func:`stream_figure` written to ``path``."""
    import matplotlib.pyplot as plt

    fig = stream_figure(runs, title=title)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def stream_figure(runs: Sequence[tuple[str, dict[str, Any], Sequence[dict[str, Any]]]], *, title: str = "") -> Any:
    """``runs``: ``(label, results, steps)`` per strategy. Panels: the cumulative success rate after each task;
    each task's output similarity against its input similarity (tasks shown a record); the bank size after each
    task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (success_ax, scatter_ax, bank_ax) = plt.subplots(1, 3, figsize=(16, 4.6))
    shown = 0
    for label, results, steps in runs:
        curve = results["curves"]["success"]
        xs = range(1, len(curve) + 1)
        marker = "o" if len(curve) <= 30 else None  # a short stream's points stay visible (one task is one point)
        success_ax.plot(xs, [100.0 * c if c is not None else None for c in curve], label=label, marker=marker, ms=3)
        points = [(s["input_similarity"], s["output_similarity"]) for s in steps if s["input_similarity"] is not None]
        if points:
            scatter_ax.scatter([p[0] for p in points], [p[1] for p in points], s=10, alpha=0.5, label=label)
            shown += len(points)
        bank_ax.plot(xs, results["curves"]["bank_size"], label=label, marker=marker, ms=3)
    success_ax.set(title="cumulative success", xlabel="task", ylabel="success so far (%)", ylim=(-2, 102))
    scatter_ax.set(
        title="experience following", xlabel="input similarity (query vs record)", ylabel="output similarity"
    )
    if not shown:  # an empty panel would read as a broken plot
        scatter_ax.text(
            0.5, 0.5, "no task was shown a record", ha="center", va="center", transform=scatter_ax.transAxes
        )
        scatter_ax.set(xticks=[], yticks=[])
    bank_ax.set(title="memory bank", xlabel="task", ylabel="records")
    bank_ax.set_ylim(bottom=0)
    longest = max((len(results["curves"]["success"]) for _, results, _ in runs), default=1)
    for axis in (success_ax, bank_ax):  # tasks and records are counts
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        axis.set_xlim(0.5, longest + 0.5)
    bank_ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    for axis in (success_ax, scatter_ax, bank_ax):
        axis.grid(alpha=0.3)
    success_ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig

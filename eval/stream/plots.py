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
    """``runs``: ``(label, results, steps)`` per strategy. Panels: the cumulative success rate after each task;
    each task's output similarity against its input similarity (tasks shown a record); the bank size after each
    task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (success_ax, scatter_ax, bank_ax) = plt.subplots(1, 3, figsize=(16, 4.6))
    for label, results, steps in runs:
        curve = results["curves"]["success"]
        xs = range(1, len(curve) + 1)
        success_ax.plot(xs, [100.0 * c if c is not None else None for c in curve], label=label)
        points = [(s["input_similarity"], s["output_similarity"]) for s in steps if s["input_similarity"] is not None]
        if points:
            scatter_ax.scatter([p[0] for p in points], [p[1] for p in points], s=10, alpha=0.5, label=label)
        bank_ax.plot(xs, results["curves"]["bank_size"], label=label)
    success_ax.set(title="cumulative success", xlabel="task", ylabel="success so far (%)", ylim=(0, 100))
    scatter_ax.set(
        title="experience following", xlabel="input similarity (query vs record)", ylabel="output similarity"
    )
    bank_ax.set(title="memory bank", xlabel="task", ylabel="records")
    bank_ax.set_ylim(bottom=0)
    for axis in (success_ax, scatter_ax, bank_ax):
        axis.grid(alpha=0.3)
    success_ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""The stream figure says what it shows on short streams too: whole task numbers, visible single points, an
empty panel that says why, and a title with the right plural."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from agemem.eval.stream.evaluate import _title
from agemem.eval.stream.plots import stream_figure


def run(tasks: int, shown: int) -> tuple[str, dict, list[dict]]:
    """A strategy's results over ``tasks`` tasks, the first ``shown`` of which were shown a record."""
    curves = {"success": [0.0] * tasks, "bank_size": list(range(1, tasks + 1))}
    steps = [
        {"input_similarity": 0.3 if i < shown else None, "output_similarity": 0.4 if i < shown else None}
        for i in range(tasks)
    ]
    return "add_all", {"curves": curves}, steps


@pytest.mark.parametrize("tasks", [1, 2, 7, 40])
def test_task_axes_show_whole_tasks_and_short_streams_keep_their_points(tasks):
    fig = stream_figure([run(tasks, shown=0)])
    success, _, bank = fig.axes
    for axis in (success, bank):
        ticks = [t for t in axis.get_xticks() if axis.get_xlim()[0] <= t <= axis.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        assert axis.get_xlim() == (0.5, tasks + 0.5)
        (line,) = axis.get_lines()
        assert (line.get_marker() == "o") == (tasks <= 30)  # one task is one point: without a marker, nothing shows
    plt.close(fig)


def test_an_empty_similarity_panel_says_why_and_a_full_one_has_its_points():
    empty = stream_figure([run(3, shown=0)])
    assert [t.get_text() for t in empty.axes[1].texts] == ["no task was shown a record"]
    full = stream_figure([run(3, shown=2)])
    assert not full.axes[1].texts and len(full.axes[1].collections[0].get_offsets()) == 2
    plt.close(empty)
    plt.close(full)


def test_the_title_counts_tasks_in_the_right_number():
    assert _title([{"task": "hotpotqa", "tasks": 1}]) == "Streaming memory benchmark: hotpotqa, 1 task"
    assert _title([{"task": "synthetic", "tasks": 5}]) == "Streaming memory benchmark: synthetic, 5 tasks"

"""The bar plots every evaluation writes say what they show: values on the bars, n/a where nothing applies,
the paper's numbers marked as the paper's."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from agemem.eval.compare import plot_comparison, reference_block
from agemem.eval.report import Panel, bar_plot


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions close, kept open for the test to read."""
    kept, close = [], plt.close
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for figure in kept:
        close(figure)  # the real one: monkeypatch restores it only after this teardown


def _texts(axis) -> list[str]:
    return [text.get_text() for text in axis.texts]


def test_zeros_are_labelled_and_a_missing_value_is_na_not_an_empty_slot(tmp_path, figures):
    # an all-zero panel used to look empty, and a task type without games like 0%
    rows = [{"SR": 0.0, "pick_and_place": None}, {"SR": 0.0, "pick_and_place": 0.0}]
    bar_plot(tmp_path / "p.png", ["agemem", "no_memory"], rows, [Panel("SR", ["SR", "pick_and_place"], "%", 100.0)])
    (axis,) = figures[0].axes
    assert sorted(_texts(axis)) == ["0", "0", "0", "n/a"]
    assert axis.get_ylim()[1] > 100  # room above a full bar for its label
    assert [t.get_text() for t in figures[0].legends[0].get_texts()] == ["agemem", "no_memory"]


def test_the_comparison_plots_the_papers_rows_hatched_beside_ours(tmp_path, figures):
    comparison = {
        "columns": [
            {"name": "alfworld", "metric": "SR", "judge": None},
            {"name": "sciworld", "metric": None, "judge": None},
            {"name": "hotpotqa", "metric": "J", "judge": "rule judge"},
        ],
        "rows": [{"model": "tiny", "method": "AgeMem", "values": {"alfworld": 0.0, "hotpotqa": 12.5}}],
        "reference": reference_block(),
    }
    plot_comparison(tmp_path / "c.png", comparison)
    (axis,) = figures[0].axes
    assert [t.get_text() for t in axis.get_xticklabels()] == ["ALFWorld (SR)", "SciWorld", "HotpotQA (J, rule judge)"]
    legend = [t.get_text() for t in figures[0].legends[0].get_texts()]
    assert legend[0] == "tiny AgeMem" and len(legend) == 13  # ours, then the paper's six rows per backbone
    assert legend[6] == "Qwen2.5-7B-Instruct AgeMem (paper)" and legend[-1] == "Qwen3-4B-Instruct AgeMem (paper)"
    texts = _texts(axis)
    assert "54.4" in texts and "41.1" in texts  # the paper's AgeMem HotpotQA J and ALFWorld SR, on their bars
    assert "55.5" in texts and "49" in texts  # the same on Qwen3-4B-Instruct (48.97 shown as 49)
    assert texts.count("n/a") == 1  # ours on SciWorld, not run
    hatches = {patch.get_hatch() for patch in axis.patches}
    assert hatches == {None, "//"}

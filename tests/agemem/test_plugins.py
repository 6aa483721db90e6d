"""Plugins reach every registry from outside the package: an installed distribution's entry point registers a QA
environment that `agemem train` trains on and `agemem eval` evaluates, in a fresh process; ``--plugin M`` and
``plugins:`` import a module by name and keep it in the run's config; a broken plugin is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agemem.core.configlib import ConfigError
from agemem.core.plugins import load_entry_points, load_plugins, plugins_of
from agemem.entrypoints.cli import parse_command_line, requested_plugins
from agemem.entrypoints.roots import config_from_tree, load_command_config
from agemem.eval.benchmarks import unregister_benchmark
from agemem.tasks import task_names, unregister_task

REPO = Path(__file__).resolve().parents[2]


def _plugin_module(name: str, task: str) -> str:
    # a whole QA environment in a few lines: generated questions, and an `agemem eval <task>` command with a flag
    return textwrap.dedent(
        f"""
        from agemem.tasks import Evaluation, Option, register_task
        from agemem.tasks.qa import QATask
        from agemem.tasks.synthetic import generate_synthetic_tasks


        def load(config):
            return generate_synthetic_tasks(6, seed=3)


        register_task(
            QATask(
                "{task}",
                load,
                evaluation=Evaluation(
                    "six invented people's facts ({name})",
                    "data.limit",
                    (Option("--people", "data.synthetic.entities_per_task", "people per task"),),
                    title="Trivia",
                ),
            )
        )
        """
    )


def _installed(site: Path, module: str, task: str) -> Path:
    """A distribution as pip leaves it in site-packages: the module and a dist-info with an entry point."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(_plugin_module(module, task))
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[agemem.environments]\n{task} = {module}\n")
    return site


def _agemem(args: list[str], site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    code = "import sys; from agemem.entrypoints.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_an_installed_plugin_environment_trains_and_evaluates_in_a_fresh_process(tmp_path):
    site = _installed(tmp_path / "site", "agemem_trivia", "trivia")
    tiny = [
        "--config",
        str(REPO / "configs/tiny_cpu.yaml"),
        "distractors.cache_dir=",
        "train.tasks_per_step=1",
        "rollout.rollouts_per_task=2",
        "sampling.max_tokens=16",
        "logging.progress=false",
    ]
    run = tmp_path / "run"
    trained = _agemem(["train", *tiny, "data.source=trivia", "max_steps=1", f"output_dir={run}"], site, tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (metrics,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics["step"] == 1 and metrics["episodes"] == 2 and "train/loss" in metrics
    trajectory = json.loads((run / "trajectories.jsonl").read_text().splitlines()[0])
    assert trajectory["task_id"].startswith("synthetic-3-")  # the plugin's own questions were played

    out = tmp_path / "eval"
    evaluated = _agemem(
        ["eval", "trivia", "--model", str(run), "--people", "3", "--limit", "1", "--out", str(out), *tiny[:2]],
        site,
        tmp_path,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "trivia" and results["questions"] == 1
    listed = _agemem(["eval", "--help"], site, tmp_path)
    assert "trivia" in listed.stdout and "six invented people's facts" in listed.stdout


def test_plugin_flag_and_config_key_import_a_module_and_the_run_keeps_it(tmp_path, monkeypatch):
    (tmp_path / "agemem_quiz_flag.py").write_text(_plugin_module("agemem_quiz_flag", "quiz_flag"))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        _, args = parse_command_line(["eval", "quiz_flag", "--plugin", "agemem_quiz_flag", "--people", "2"])
        assert "quiz_flag" in task_names() and args.benchmark == "quiz_flag"
        config = load_command_config("eval", None, args.overrides)
        assert config.plugins == ["agemem_quiz_flag"]  # a run's config.json names it
        assert config_from_tree({"plugins": ["agemem_quiz_flag"]}, "train").plugins == ["agemem_quiz_flag"]
        yaml_file = tmp_path / "run.yaml"
        yaml_file.write_text("plugins: [agemem_quiz_flag]\n")
        assert requested_plugins(["eval", "x", "--config", str(yaml_file), "--plugin=more"]) == [
            "agemem_quiz_flag",
            "more",
        ]
    finally:
        unregister_task("quiz_flag")
        unregister_benchmark("quiz_flag")


def test_a_missing_or_broken_plugin_is_an_error_that_names_it(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"plugin 'no_such_agemem_plugin' .*cannot be imported.*install"):
        load_plugins(["no_such_agemem_plugin"])
    with pytest.raises(ConfigError, match="must be a list of module names"):
        plugins_of({"plugins": "one_module"})
    site = tmp_path / "site"
    site.mkdir()
    (site / "agemem_broken.py").write_text("raise RuntimeError('boom')\n")
    info = site / "agemem_broken-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agemem-broken\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text("[agemem.tools]\nbroken = agemem_broken\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ConfigError, match=r"agemem.tools plugin 'broken' .*from agemem-broken 2.0.*boom"):
        load_entry_points()
    with pytest.raises(SystemExit, match=r"configuration error: the agemem.tools plugin 'broken'"):
        parse_command_line(["config"])

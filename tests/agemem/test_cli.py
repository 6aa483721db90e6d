import json
import shutil
import subprocess
import sys

import pytest
import yaml

from agemem.entrypoints.cli import main


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("demo", "config", "tools"))


def test_config_prints_resolved_yaml_with_overrides(capsys):
    assert main(["config", "env.context.filter_threshold=0.42"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["env"]["context"]["filter_threshold"] == 0.42


def _dotted(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _dotted(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_config_marks_each_value_with_the_source_that_set_it(tmp_path, capsys):
    from agemem.core.configlib import to_dict
    from agemem.entrypoints.roots import load_command_config

    base = tmp_path / "base.yaml"
    base.write_text("seed: 3\nenv:\n  context:\n    max_context_tokens: 1024\nreward:\n  term_weights: {a: 1.0}\n")
    derived = tmp_path / "derived.yaml"
    derived.write_text("extends: base.yaml\nseed: 4\nsampling:\n  top_p: 0.5\n  max_tokens: 7\n")
    argv = ["--config", str(derived), "sampling.max_tokens=9", 'env.system_prompt=say "hi": yes']
    assert main(["config", "--command", "learn", *argv]) == 0
    text = capsys.readouterr().out
    expected = to_dict(load_command_config("learn", str(derived), argv[2:]))
    assert yaml.safe_load(text) == expected  # the annotated YAML loads back to the effective config, exactly
    sources, path = {}, []
    for line in text.splitlines():  # dotted key -> the comment, from the indentation
        depth = (len(line) - len(line.lstrip())) // 2
        path[depth:] = [line.strip().split(":")[0]]
        if "  # " in line:
            sources[".".join(path)] = line.rsplit("  # ", 1)[1]
    assert sources["seed"] == str(derived) and sources["sampling.seed"] == "default"  # the derived file wins
    assert sources["env.context.max_context_tokens"] == str(base)
    assert sources["sampling.top_p"] == str(derived) and sources["sampling.max_tokens"] == "override"
    assert sources["env.system_prompt"] == "override" and sources["env.context.filter_threshold"] == "default"
    assert sources["reward.term_weights.a"] == str(base)
    assert set(sources) == set(_dotted(expected))  # every value is marked
    assert "learn" in expected and "eval" not in expected and "stream" not in expected  # learn's own sections


def test_bad_override_exits_2_with_the_reason(capsys):
    with pytest.raises(SystemExit) as info:
        main(["config", "env.context.filter_threshold=2"])
    assert info.value.code == 2
    assert "configuration error: env.context.filter_threshold=2.0 is a cosine similarity" in capsys.readouterr().err


def test_tools_prints_schemas(capsys):
    assert main(["tools"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 6


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_tools_stage_prints_what_the_env_offers_in_that_stage_under_paper(stage, make_env, capsys):
    from agemem.core.tools import PAPER_STAGE_TOOLS

    env = make_env()
    env.offer(PAPER_STAGE_TOOLS[stage], where=f"in Stage {stage}")  # what Episode does at the stage's start
    assert main(["tools", "--stage", str(stage), "--system-prompt"]) == 0
    assert capsys.readouterr().out == env.context.messages[0].content + "\n"
    assert main(["tools", "--stage", str(stage)]) == 0
    names = [json.loads(line)["function"]["name"] for line in capsys.readouterr().out.splitlines()]
    assert sorted(names) == sorted(PAPER_STAGE_TOOLS[stage])


def test_demo_runs_a_full_episode_on_real_hotpotqa(tmp_path, capsys):
    record_path = tmp_path / "demo.json"
    assert main(["demo", "--out", str(record_path)]) == 0
    record = json.loads(record_path.read_text())
    stats = record["stats"]
    assert record["answer"] == record["gold"] == "Gesellschaft mit beschränkter Haftung"
    adds = [op for op in stats["memory_ops"] if op["op"] == "add"]
    assert len(adds) == 2 and all(op["ok"] and op["stage"] == 1 for op in adds)
    assert len(stats["filters"]) == 1 and len(stats["filters"][0]["removed_contents"]) == 1
    assert len(stats["summaries"]) == 1 and stats["summaries"][0]["span"] == "all"
    (retrieval,) = stats["retrievals"]
    assert any("GmbH" in content for content in retrieval["contents"])
    assert stats["violations"] == [] and not stats["overflow"]
    assert "Stage 3 · answer" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "demo.example=500 is out of range"), ("{not json", "is not JSON"), ('[{"q": 1}]', "HotpotQA format")],
)
def test_demo_rejects_bad_input_with_exit_2(tmp_path, capsys, content, fragment):
    args = ["demo", "demo.example=500"]
    if content is not None:
        (tmp_path / "data.json").write_text(content)
        args = ["demo", f"demo.data={tmp_path / 'data.json'}"]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2 and fragment in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("agemem") is None, reason="console script not installed (pip install -e .)")
def test_console_script_is_installed():
    out = subprocess.run(["agemem", "--help"], capture_output=True, text=True, check=True).stdout
    assert "demo" in out


def test_importing_the_packages_loads_no_heavy_libraries():
    """No import-time side effects: torch / transformers / sentence-transformers load on first use."""
    code = (
        "import sys, agemem, agemem.core.env, agemem.entrypoints.cli, agemem.entrypoints.demo, "
        "agemem.rollouts, agemem.rewards, agemem.train, agemem.eval; "
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

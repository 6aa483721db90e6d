"""`agemem eval stream` end to end: the tiny random policy on a short HotpotQA stream (with its own memory tools),
a sweep through the command line, the shipped sweep files and the flags (ALFWorld: test_alfworld_stream.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.cli import build_parser, main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.stream.runner import read_steps
from agemem.eval.stream.sweep import load_sweep, parse_sweep, strategy_config
from tests.conftest import WordSetEncoder

TINY = ["sampling.max_tokens=4", "stream.max_steps=1", "logging.progress=false"]
ROOT = Path(__file__).resolve().parents[3]


def test_tiny_policy_runs_a_short_hotpotqa_stream_with_its_own_memory_tools(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["eval", "stream", "--task", "hotpotqa", "--model", "tiny-random-qwen2", "--limit", "2"]
    assert main([*argv, "--addition", "policy", "--out", str(out), *TINY]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "hotpotqa" and results["tasks"] == 2 and results["strategy"] == "policy"
    assert results["model"] == "tiny-random-qwen2" and results["accuracy"] == 0.0  # random tokens never answer
    steps = read_steps(out)
    assert [s["task_id"] for s in steps] == results["task_ids"]
    assert all(s["replies"] == 2 and s["prompt_tokens"] > 200 for s in steps)  # the task, then the memory turn
    assert (out / "stream.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "acc %" in printed and "steps.jsonl" in printed
    # the same command again resumes: nothing left to play, no model loaded
    assert main([*argv, "--addition", "policy", "--out", str(out), *TINY]) == 0
    assert json.loads((out / "results.json").read_text())["played"] == 0


def test_sweep_through_the_command_line(tmp_path, monkeypatch):
    import agemem.eval.stream.evaluate

    monkeypatch.setattr(agemem.eval.stream.evaluate, "build_encoder", lambda config: WordSetEncoder())  # MiniLM: above
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "base: {stream.task: synthetic, stream.synthetic_tasks: 3}\n"
        "strategies:\n  no_memory: {stream.retrieval: none}\n  capped: [stream.capacity=1, stream.retention=fifo]\n"
    )
    out = tmp_path / "sweep"
    argv = ["eval", "stream", "--model", "tiny-random-qwen2", "--sweep", str(sweep), "--out", str(out), *TINY]
    assert main(argv) == 0
    comparison = json.loads((out / "comparison.json").read_text())
    assert [r["strategy"] for r in comparison] == ["no_memory", "capped"]
    assert comparison[1]["vs_reference"] == {"wins": 0, "losses": 0, "ties": 3, "p_value": 1.0}
    assert max(comparison[1]["curves"]["bank_size"]) == 1 and comparison[0]["final_bank_size"] == 3
    assert (out / "no_memory" / "steps.jsonl").exists() and (out / "comparison.png").exists()


def test_shipped_sweep_files_name_valid_strategies():
    for name in ("stream_hotpotqa.yaml", "stream_retention.yaml"):
        spec = load_sweep(ROOT / "configs" / "sweeps" / name)
        configs = {n: strategy_config(AgeMemConfig(), spec.base, o) for n, o in spec.strategies.items()}
        assert spec.reference in configs and len(configs) >= 10
    hotpotqa = load_sweep(ROOT / "configs" / "sweeps" / "stream_hotpotqa.yaml").strategies
    assert {"add_all+none", "strict+history", "coarse+combined", "no_memory", "exprecent"} <= set(hotpotqa)


def test_sweep_files_are_checked():
    with pytest.raises(ConfigError, match="unknown key 'strategy'"):
        parse_sweep({"strategy": {}})
    with pytest.raises(ConfigError, match="no strategy"):
        parse_sweep({"base": {}})
    with pytest.raises(ConfigError, match="reference 'x' is not a strategy"):
        parse_sweep({"strategies": {"a": {}}, "reference": "x"})
    with pytest.raises(ConfigError, match="non-empty list"):
        parse_sweep({"grid": {"stream.addition": []}})
    spec = parse_sweep({"grid": {"stream.addition": ["strict"], "stream.noisy_writes": [3]}})
    assert list(spec.strategies) == ["strict+noisy_writes=3"]
    with pytest.raises(ConfigError, match=r"stream\.deletion"):
        strategy_config(AgeMemConfig(), {"stream.deletion": "sometimes"})


def test_flags_map_to_dotted_overrides():
    from agemem.entrypoints.cli import _stream_overrides

    parser = build_parser()
    args = parser.parse_args(["eval", "stream", "--task", "synthetic", "--capacity", "7", "--order", "shift"])
    config = load_config(AgeMemConfig, None, _stream_overrides(args))
    assert (config.stream.task, config.stream.capacity, config.stream.retention) == ("synthetic", 7, "utility")
    assert config.stream.order == "shift"
    args = parser.parse_args(["eval", "stream", "--capacity", "7", "--retention", "lru", "--deletion", "periodic"])
    config = load_config(AgeMemConfig, None, _stream_overrides(args))
    assert (config.stream.retention, config.stream.deletion) == ("lru", "periodic")


def test_bad_stream_settings_name_the_key_and_the_fix(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "stream", "--out", "x", "stream.capacity=0"])
    assert "stream.capacity=0 must be >= 1" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"initial_noise=1\.5 must be in"):
        load_config(AgeMemConfig, overrides=["stream.initial_noise=1.5"])
    with pytest.raises(ConfigError, match="addition=fixed never writes"):
        load_config(AgeMemConfig, overrides=["stream.addition=fixed", "stream.noisy_writes=3"])
    with pytest.raises(ConfigError, match="one model at a time"):
        from agemem.eval.stream.evaluate import evaluate_stream

        config = load_config(AgeMemConfig, overrides=["eval.models=[a,b]", "stream.task=synthetic"])
        evaluate_stream(config, "unused", encoder=None)

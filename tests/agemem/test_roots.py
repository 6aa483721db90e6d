"""Config roots per command, and a run's saved config as the default for its checkpoint."""

import json

import pytest

from agemem.core.configlib import ConfigError
from agemem.entrypoints.demo import DemoRunConfig
from agemem.entrypoints.roots import (
    AgeMemConfig,
    check_union,
    config_from_tree,
    load_command_config,
    load_eval_config,
    load_resume_config,
)
from agemem.eval.config import EvalRunConfig
from agemem.eval.stream.config import StreamRunConfig
from agemem.recipes.learn import LearnRunConfig
from agemem.tasks.config import TaskRunConfig
from agemem.train.config import TrainRunConfig


def _run(root, **sections):
    """A training run directory as agemem train leaves it: config.json and one complete checkpoint."""
    tree = {"output_dir": str(root), "max_steps": 7, **sections}
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(tree))
    checkpoint = root / "checkpoints" / "step_000001"
    (checkpoint / "policy").mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"step": 1, "tasks_seen": 4, "world_size": 1}))
    return root


def _is_root(config: object, root: type) -> bool:
    """``config`` is ``root`` itself, or ``root`` with the registered tasks' sections composed on (nothing else)."""
    built = type(config)
    return built is root or (built.__bases__ == (root,) and built.__name__ == root.__name__)


def test_each_command_reads_its_own_root_from_a_shared_file():
    learn_cpu = "configs/learn_cpu.yaml"
    assert _is_root(load_command_config("learn", learn_cpu, []), LearnRunConfig)
    train = load_command_config("train", learn_cpu, [])
    assert _is_root(train, TrainRunConfig) and not hasattr(train, "learn") and not hasattr(train, "eval")
    assert train.max_steps == load_command_config("learn", learn_cpu, []).max_steps  # the shared sections agree
    evaluation = load_command_config("eval", learn_cpu, [])
    assert _is_root(evaluation, EvalRunConfig) and not hasattr(evaluation, "grpo")
    assert _is_root(load_command_config("stream", None, []), StreamRunConfig)
    assert _is_root(load_command_config("rollout", None, []), TaskRunConfig)
    assert _is_root(load_command_config("demo", None, []), DemoRunConfig) and not hasattr(DemoRunConfig(), "alfworld")
    # another command's section is validated, not ignored: a typo in grpo stops `agemem eval` too
    with pytest.raises(ConfigError, match=r"unknown config key 'grpo\.bta'; did you mean 'grpo\.beta'"):
        load_command_config("eval", None, ["grpo.bta=0.1"])
    with pytest.raises(ConfigError, match="unknown config key 'evl'; did you mean 'eval'"):
        load_command_config("train", None, ["evl.plot=false"])
    with pytest.raises(ConfigError, match="no config root for command 'nope'"):
        load_command_config("nope", None, [])


def test_a_recipe_run_s_saved_config_loads_for_export(tmp_path):
    tree = {"learn": {"seeds": [3]}, "max_steps": 5, "eval": {"plot": False}}
    assert _is_root(config_from_tree(tree, "export"), TrainRunConfig)
    assert config_from_tree(tree, "export").max_steps == 5
    assert config_from_tree(tree, "learn").learn.seeds == [3]


def test_evaluating_a_run_without_config_plays_in_the_run_s_environment(tmp_path):
    run = _run(tmp_path / "run", sampling={"max_tokens": 48}, rollout={"stage1_max_steps": 5}, train={"epochs": 3})
    config = load_eval_config(None, ["eval.plot=false"], [str(run)])
    assert config.sampling.max_tokens == 48 and config.rollout.stage1_max_steps == 5
    assert not hasattr(config, "train")  # training settings are not the environment, nor the evaluation's root
    assert config.eval.plot is False  # the command's own flags still apply on top
    # a checkpoint of the run, and a base model compared beside it, play in the same environment
    checkpoint = str(run / "checkpoints" / "step_000001")
    assert load_eval_config(None, [], ["Qwen/Qwen2.5-7B-Instruct", checkpoint]).sampling.max_tokens == 48
    # --config wins over the run
    assert load_eval_config("configs/tiny_cpu.yaml", [], [str(run)]).rollout.stage1_max_steps == 2
    base_only = load_eval_config(None, [], ["Qwen/Qwen2.5-7B-Instruct"])
    assert base_only.sampling.max_tokens == AgeMemConfig().sampling.max_tokens


def test_runs_from_different_environments_need_a_config(tmp_path):
    a = _run(tmp_path / "a", sampling={"max_tokens": 48})
    b = _run(tmp_path / "b", sampling={"max_tokens": 64})
    with pytest.raises(ConfigError, match=r"different environments.*pass --config"):
        load_eval_config(None, [], [str(a), str(b)])


def test_resume_without_config_continues_with_the_run_s_own_config(tmp_path):
    run = _run(tmp_path / "run", sampling={"max_tokens": 48}, train={"epochs": 3})
    config = load_resume_config(None, [f"output_dir={run}", "max_steps=9"])
    assert (config.sampling.max_tokens, config.train.epochs, config.max_steps) == (48, 3, 9)
    with_file = load_resume_config("configs/tiny_cpu.yaml", [f"output_dir={run}"])
    assert (
        with_file.sampling.max_tokens == load_command_config("train", "configs/tiny_cpu.yaml", []).sampling.max_tokens
    )


def test_the_union_of_roots_refuses_a_key_two_roots_declare_apart():
    from dataclasses import dataclass, field

    from agemem.eval.config import EvalConfig

    check_union(LearnRunConfig, StreamRunConfig, DemoRunConfig)  # the shipped roots: each key declared once

    @dataclass
    class OtherEvalRoot(TaskRunConfig):
        eval: EvalConfig = field(default_factory=EvalConfig)

    with pytest.raises(TypeError, match=r"config key 'eval' is declared by both EvalRunConfig and .*OtherEvalRoot"):
        check_union(EvalRunConfig, OtherEvalRoot)

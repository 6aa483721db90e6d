"""`agemem train data.source=alfworld`: GRPO steps on the bundled ALFWorld test games (configs/alfworld_tiny_cpu.yaml,
the tiny random policy) play real games through TextWorld's engine, score them (won -> 1, else 0, plus the
context/memory terms and penalties) and change the weights. Needs the `alfworld` extra and skips without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agemem.core.configlib import load_config
from agemem.entrypoints.cli import main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.records import read_trajectories
from agemem.tasks import get_task, load_tasks
from agemem.tasks.alfworld import discover_games
from tests.alfworld_data import DATA, needs_alfworld

CONFIG = ["--config", "configs/alfworld_tiny_cpu.yaml", f"alfworld.data_dir={DATA}"]


def test_the_games_load_as_tasks_with_an_empty_stage_2_and_the_game_prompt():
    config = load_config(AgeMemConfig, overrides=["data.source=alfworld", f"alfworld.data_dir={DATA}"])
    spec = get_task("alfworld")
    tasks = load_tasks(config)
    assert [t.id for t in tasks] == [g.id for g in discover_games(str(DATA), "valid_seen")]
    assert all(t.metadata["benchmark"] == "alfworld" and Path(t.metadata["source"]).is_file() for t in tasks)
    assert not spec.uses_distractors and spec.stages(tasks[0], [], config.rollout).facts == []
    configured = spec.configure(config)
    assert "ALFWorld" in configured.env.system_prompt and not config.env.system_prompt  # a copy, not an edit


@needs_alfworld
@pytest.mark.slow
def test_grpo_steps_on_real_games_change_the_weights(tmp_path):
    out = tmp_path / "run"
    # the random policy never wins: under reward.terms=effects every rollout then earns the same (context pays in
    # proportion to the answer's score), so no advantage and no update; the paper's terms still vary
    assert main(["train", *CONFIG, "max_steps=2", f"output_dir={out}", "reward.terms=paper"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in records] == [1, 2]
    for m in records:
        assert m["episodes"] == 4  # 2 games x K=2
        assert 0.0 <= m["reward/alfworld/won"] <= 1.0 and m["reward/task"] == m["reward/alfworld/won"]
        assert m["samples/llm_steps"] > 0 and "train/loss" in m
    assert any(m["reward/total_std"] > 0 for m in records)  # GRPO had something to compare

    games = {g.id for g in discover_games(str(DATA), "valid_seen")}
    trajectories = list(read_trajectories(out / "trajectories.jsonl"))
    assert len(trajectories) == 8  # logging.trajectory_samples=4 per step
    for t in trajectories:
        assert t.task_id in games and t.meta["benchmark"] == "alfworld"
        assert t.question and "Your task is to" not in t.question  # the game's own task sentence
        assert 1 <= t.meta["env_steps"] <= 3 and len(t.meta["transcript"]) == t.meta["env_steps"]
        assert all(entry["observation"] for entry in t.meta["transcript"])
        assert "Admissible commands:" in t.steps[0].prompt_text and "ALFWorld" in t.steps[0].prompt_text
        assert t.reward["task"] == float(t.meta["won"])
        assert not t.distractors and all(s.stage == 3 for s in t.steps)

    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy

    initial, _ = load_policy(PolicyConfig(device="cpu"))
    final = load_file(out / "checkpoints" / "step_000002" / "policy" / "model.safetensors")
    changed = [k for k, v in initial.state_dict().items() if k in final and not torch.equal(v, final[k])]
    assert len(changed) > 10
    saved = json.loads((out / "config.json").read_text())
    assert saved["data"]["source"] == "alfworld" and "ALFWorld" in saved["env"]["system_prompt"]

"""End to end with the real transformers engine, the embedded tiny random Qwen2 policy and
the real Qwen2.5 tokenizer: sampled rollouts through all three stages, and the CLI."""

from __future__ import annotations

import json
import math

import pytest

from agemem.core.configlib import load_config
from agemem.entrypoints.cli import main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
from agemem.rollouts.policy import load_policy
from agemem.rollouts.records import read_trajectories
from agemem.tasks import load_tasks
from tests.conftest import WordSetEncoder

TINY = [
    "data.source=synthetic",
    "data.synthetic.num_tasks=2",
    "distractors.generator=task",
    "distractors.count=2",
    "distractors.cache_dir=",
    "sampling.max_tokens=6",
    "sampling.temperature=1.0",
    "rollout.rollouts_per_task=3",
    "rollout.stage1_max_steps=2",
    "rollout.stage2_max_steps=1",
    "rollout.stage3_max_steps=1",
    "env.summarizer.backend=extractive",
]


@pytest.fixture(scope="module")
def config() -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=TINY)


@pytest.fixture(scope="module")
def policy(config):
    return load_policy(config.policy)


def test_sampled_rollouts_of_one_task_differ_and_carry_engine_logprobs(config, policy):
    model, tokenizer = policy
    tasks = load_tasks(config)[:1]
    resources = build_resources(config.env, tokenizer, encoder=WordSetEncoder())
    engine = build_engine(config.engine, model, tokenizer)
    driver = build_driver(config.rollout, config.sampling, engine, tokenizer, resources, progress=False)
    result = driver.run(tasks, distractors_for(config.distractors, tasks, resources.encoder))

    trajectories = result.trajectories
    assert [t.rollout_index for t in trajectories] == [0, 1, 2]
    # stage caps: 2 + 1 + 1 agent steps; a random model never answers, so every stage runs to its cap
    assert all([s.stage for s in t.steps] == [1, 1, 2, 3] for t in trajectories)
    assert all(t.ended_by == "round_limit" and t.answer is None for t in trajectories)
    first_steps = [tuple(t.steps[0].completion_ids) for t in trajectories]
    assert len(set(first_steps)) == 3  # same prompt, three different samples
    assert len({t.steps[0].prompt_text for t in trajectories}) == 1
    for step in (s for t in trajectories for s in t.steps):
        assert len(step.completion_ids) == len(step.logprobs) == 6 and step.finish_reason == "length"
        # a random 151k-way model: every sampled token has log-prob near log(1/151665) = -11.9
        assert all(-14.0 < lp < -9.0 and math.isfinite(lp) for lp in step.logprobs)
        assert tokenizer.decode(step.prompt_ids) == step.prompt_text
        assert step.context_tokens == len(step.prompt_ids)
    assert result.stats.ticks == 4 and result.stats.mean_batch == 3.0
    assert result.stats.generated_tokens == 3 * 4 * 6


def test_rollout_cli_writes_trajectories_and_summary(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["rollout", "--out", str(out), *TINY, "rollout.rollouts_per_task=2"]) == 0
    trajectories = list(read_trajectories(out / "trajectories.jsonl"))
    assert [(t.task_id, t.rollout_index) for t in trajectories] == [
        ("synthetic-0-0", 0),
        ("synthetic-0-0", 1),
        ("synthetic-0-1", 0),
        ("synthetic-0-1", 1),
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["episodes"] == 4 and summary["summary"]["steps"] == 4.0
    assert summary["throughput"]["generated_tokens"] == 4 * 4 * 6
    assert summary["config"]["rollout"]["rollouts_per_task"] == 2
    # scored with the default rule judge: a random policy never answers, so R_task = -1 and the
    # round limit is hit (penalty -1) in every episode
    assert all(t.reward["task"] == -1.0 and t.reward["penalty/round_limit"] == 1.0 for t in trajectories)
    rewards = summary["rewards"]
    assert rewards["total"] == pytest.approx(sum(t.reward["total"] for t in trajectories) / 4)
    assert rewards["task"] == -1.0 and summary["judge"] == {"name": "rule:f1:recall"}
    assert not list(out.glob(".*.tmp"))
    printed = capsys.readouterr().out
    assert "exact match" in printed and "reward terms" in printed and "memory/storage" in printed


def test_the_rollout_table_keeps_terms_diagnostics_and_throughput_apart():
    from rich.console import Console

    from agemem.rewards.composite import REWARD_TERMS
    from agemem.rollouts.driver import RolloutStats
    from agemem.rollouts.summary import summary_table

    summary = {"episodes": 4, "steps": 3.0, "exact_match": 0.25}
    rewards = {"total": 0.5, "memory/storage": 0.25, "context/tokens_used": 812.0, "violations": 1.0}
    console = Console(width=200, record=True)
    console.print(summary_table(summary, RolloutStats(episodes=4, steps=14, ticks=7), rewards, REWARD_TERMS))
    labels = [line.split("│")[1].strip() for line in console.export_text().splitlines() if line.startswith("│")]
    terms_at, diagnostics_at = (
        labels.index("reward terms (batch mean)"),
        labels.index("reward diagnostics: what the terms were computed from (batch mean)"),
    )
    assert set(labels[terms_at + 1 : diagnostics_at]) >= {"total", "memory/storage"}
    assert "context/tokens_used" in labels[diagnostics_at:] and "context/tokens_used" not in labels[:diagnostics_at]
    # `steps` and `episodes` once each: the throughput's LLM-call count has its own name
    assert labels.count("episodes") == 1 and labels.count("steps") == 1
    assert "LLM calls (agent steps + policy summaries)" in labels


def test_rollout_cli_without_rewards(tmp_path):
    out = tmp_path / "run"
    assert main(["rollout", "--out", str(out), "--no-rewards", *TINY, "data.synthetic.num_tasks=1"]) == 0
    assert all(t.reward == {} for t in read_trajectories(out / "trajectories.jsonl"))
    assert "rewards" not in json.loads((out / "summary.json").read_text())


def test_rollout_cli_reports_bad_config(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["rollout", "rollout.rollouts_per_task=0"])
    assert exit_info.value.code == 2
    assert "rollouts_per_task=0 must be >= 1" in capsys.readouterr().err

"""The reward ranks a scripted ideal episode above each degraded variant (rule judge, real
tokenizer, scripted engine through the real driver)."""

from __future__ import annotations

import pytest

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rewards.composite import score_trajectories
from agemem.rewards.judges import RuleJudge
from agemem.rollouts.build import build_driver, build_resources, distractors_for
from agemem.rollouts.synthetic import generate_synthetic_tasks
from tests.conftest import WordSetEncoder
from tests.rollouts.scripted import MemoryAgent, ScriptedEngine

VARIANTS = {
    # stores the facts, filters the distractors, retrieves, answers right
    "ideal": {"stage2": "filter"},
    "stores nothing": {"stage1": "ack", "stage2": "filter"},
    "stores distractors": {"stage1": "ack", "stage2": "store"},
    "never manages context": {"stage2": "ack"},
    "answers wrong": {"stage2": "filter", "wrong": True},
    "no answer": {"stage2": "filter", "never_answer": True},
}


def play_variant(name, tasks, qwen_tokenizer):
    options = dict(VARIANTS[name])
    wrong = options.pop("wrong", False)
    answers = {t.question: "purple elephant" for t in tasks} if wrong else None
    config = load_config(
        AgeMemConfig,
        overrides=[
            "distractors.generator=task",
            "distractors.cache_dir=",
            "rollout.paragraphs_per_turn=1",
            "rollout.rollouts_per_task=1",
            # a budget the system prompt (~1.1k tokens) and the facts fit in, so compression tells apart
            # a context cleared of distractors from one that kept them
            "env.context.max_context_tokens=4000",
        ],
    )
    encoder = WordSetEncoder()
    resources = build_resources(config.env, qwen_tokenizer, encoder=encoder)
    engine = ScriptedEngine(qwen_tokenizer, MemoryAgent(tasks, answers=answers, **options))
    driver = build_driver(config.rollout, config.sampling, engine, qwen_tokenizer, resources, progress=False)
    trajectories = driver.run(tasks, distractors_for(config.distractors, tasks, encoder)).trajectories
    breakdowns = score_trajectories(
        trajectories, {t.id: t for t in tasks}, RuleJudge(), config.reward, config.env.context.max_context_tokens
    )
    return sum(b["total"] for b in breakdowns) / len(breakdowns), breakdowns


@pytest.fixture(scope="module")
def rewards(qwen_tokenizer):
    tasks = generate_synthetic_tasks(3, seed=4)
    return {name: play_variant(name, tasks, qwen_tokenizer) for name in VARIANTS}


@pytest.mark.parametrize("degraded", [name for name in VARIANTS if name != "ideal"])
def test_ideal_episode_outscores_each_degraded_variant(rewards, degraded):
    assert rewards["ideal"][0] > rewards[degraded][0]


def test_each_degradation_shows_in_its_own_term(rewards):
    ideal = rewards["ideal"][1][0]
    assert rewards["stores nothing"][1][0]["memory/storage"] < ideal["memory/storage"]
    assert rewards["answers wrong"][1][0]["task"] < ideal["task"]
    assert rewards["no answer"][1][0]["task"] == -1.0 and rewards["no answer"][1][0]["penalty/round_limit"] == 1.0
    assert rewards["never manages context"][1][0]["context/preventive"] < ideal["context/preventive"]

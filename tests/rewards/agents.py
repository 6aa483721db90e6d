"""Scripted agents for the reward tests and bench/reward_gaming.py: an ideal agent, degraded ones and ones that farm
a reward term, each played through the real driver and env and scored with the rule judge."""

from __future__ import annotations

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rewards.composite import score_trajectories
from agemem.rewards.judges import RuleJudge
from agemem.rollouts.build import build_driver, build_resources, distractors_for
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
    # farming: each does the ideal agent's work, or the never-managing agent's, plus a habit that collects a term
    "no-op filters": {"stage2": "ack", "farm": "noop_filter"},
    "rewrites a memory with itself": {"stage2": "filter", "farm": "self_update"},
    "deletes and re-adds a memory": {"stage2": "filter", "farm": "delete_readd"},
    "retrieval spam": {"stage2": "filter", "farm": "retrieval_spam"},
}
FARMERS = {
    # farmer -> the same agent without the habit
    "no-op filters": "never manages context",
    "rewrites a memory with itself": "ideal",
    "deletes and re-adds a memory": "ideal",
    "retrieval spam": "ideal",
}


def play_variant(name, tasks, qwen_tokenizer, terms="effects"):
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
            f"reward.terms={terms}",
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

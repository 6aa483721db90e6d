"""`agemem rollout`: play tasks x K rollouts with the configured policy and engine.

Writes ``trajectories.jsonl`` (one readable JSON line per episode, written as it finishes)
and ``summary.json`` under the output directory, and prints a summary table. The task, its episode
and its scorer come from the registry (:mod:`agemem.tasks.base`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from agemem.core.configlib import to_dict
from agemem.core.encoders import Encoder
from agemem.rewards.base import TrajectoryScorer
from agemem.rewards.composite import REWARD_TERMS
from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
from agemem.rollouts.records import TrajectoryWriter
from agemem.rollouts.summary import rewrite_trajectories, summarize_trajectories, summary_table
from agemem.tasks.base import load_task_pool, no_distractors, task_for_source
from agemem.tasks.config import TaskRunConfig


def task_scorer(config: TaskRunConfig) -> Callable[[Encoder], TrajectoryScorer]:
    """``encoder -> scorer`` of the task ``data.source`` names (the judge's composite reward for QA tasks)."""
    spec = task_for_source(config.data.source)
    return functools.partial(spec.scorer, spec.configure(config))


def run_rollouts(
    config: TaskRunConfig,
    out: str | Path,
    *,
    make_scorer: Callable[[Encoder], TrajectoryScorer] | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """Load tasks, policy and engine from ``config``, play every task K times, write results to ``out``.

    The task is the one ``data.source`` names (:func:`agemem.tasks.base.task_for_source`): its items, its episode.
    ``make_scorer`` builds the reward scorer from the env's encoder (:func:`task_scorer`);
    with it, every trajectory carries its reward breakdown and the summary has the mean of each term.
    """
    from agemem.rollouts.policy import load_policy

    console = console or Console()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spec = task_for_source(config.data.source)
    config = spec.configure(config)
    tasks, pool = load_task_pool(config)
    model, tokenizer = load_policy(config.policy) if config.engine.backend != "openai" else (None, None)
    if tokenizer is None:
        from agemem.core.chat import load_tokenizer

        tokenizer = load_tokenizer(config.policy.tokenizer or config.env.context.tokenizer)
    resources = build_resources(config.env, tokenizer)
    if spec.uses_distractors:
        distractors = distractors_for(config.distractors, tasks, resources.encoder, pool, progress=True)
    else:
        distractors = no_distractors(tasks)
    engine = build_engine(config.engine, model, tokenizer)
    driver = build_driver(
        config.rollout, config.sampling, engine, tokenizer, resources, make_episode=spec.episodes(config)
    )
    console.print(
        f"{len(tasks)} task(s) x {config.rollout.rollouts_per_task} rollouts, engine={engine.name}, "
        f"policy={config.policy.model}"
    )
    with TrajectoryWriter(out / "trajectories.jsonl") as writer:
        result = driver.run(tasks, distractors, writer=writer)
    summary = summarize_trajectories(result.trajectories)
    record: dict[str, Any] = {"summary": summary}
    rewards = None
    if make_scorer is not None:
        scorer = make_scorer(resources.encoder)
        record |= scorer.report(scorer(result.trajectories, tasks))
        rewards = record["rewards"]
        rewrite_trajectories(out / "trajectories.jsonl", result.trajectories)
    record |= {"throughput": result.stats.to_json(), "config": to_dict(config)}
    (out / "summary.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))
    console.print(summary_table(summary, result.stats, rewards, REWARD_TERMS))
    console.print(f"trajectories: {out / 'trajectories.jsonl'}\nsummary: {out / 'summary.json'}")
    return record

"""Held-out evaluation on synthetic memory tasks: what the policy stores, retrieves and answers.

Each task is played once by the policy (the same three-stage episode and sampling settings as
training) and scored with the run's reward. Per episode we record:

* ``em``: official HotpotQA exact match of the final answer (0 or 1);
* ``reward``: the composite (or answer-only) reward the policy was trained on;
* ``storage``: R_storage, the share of Stage-1 adds that hold a supporting fact;
* ``stored_fact``: 1 when some memory entry holds the sentence that answers the question;
* ``stored_distractor``: 1 when a Stage-2 distractor was written to memory;
* ``retrieved``: 1 when the agent called Retrieve_memory at least once;
* ``context_tokens``: R_compression's token count of the final context;
* ``generated_tokens``: completion tokens over all LLM steps;
* ``steps``: LLM steps; ``violations``: format violations;

and, per tool, whether the episode used it *usefully* (the behaviour each memory pressure of the synthetic family
rewards, ``bench/pressures.py``):

* ``retrieved_before_answer``: Retrieve_memory called in Stage 3, before the answer (recall: the answer is only in
  long-term memory);
* ``updated_stale``: a stored entry that a later Stage-1 message made stale was rewritten or deleted (Update_memory,
  Delete_memory): the stale sentence was written to memory and the final memory no longer holds it (revisions);
* ``stale_kept``: the final memory still holds a stale sentence (the failure ``updated_stale`` avoids);
* ``managed_context``: Summary_context or Filter_context called in Stage 2 and the episode never hit the prompt cap
  (``rollout.max_prompt_tokens``; context pressure); ``overflowed``: the episode ended on the cap.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.rewards.build import build_scorer
from agemem.rewards.judges import exact_match
from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
from agemem.rollouts.policy import load_policy
from agemem.tasks.synthetic import BY_NAME
from agemem.train.config import TrainRunConfig

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.rollouts.records import Task, Trajectory

METRICS = (
    "em",
    "reward",
    "storage",
    "stored_fact",
    "stored_distractor",
    "retrieved",
    "context_tokens",
    "generated_tokens",
    "steps",
    "violations",
    "retrieved_before_answer",
    "updated_stale",
    "stale_kept",
    "managed_context",
    "overflowed",
)
USEFUL_USE = {
    "Retrieve": "retrieved_before_answer",
    "Update/Delete": "updated_stale",
    "Summary/Filter": "managed_context",
}
"""each tool family and the per-episode metric that says it was used where it helps."""
_UNSCORED = float("nan")  # a metric an older evaluation file did not record


@dataclass
class EpisodeScore:
    task_id: str
    em: float
    reward: float
    storage: float
    stored_fact: float
    stored_distractor: float
    retrieved: float
    context_tokens: float
    generated_tokens: float
    steps: float
    violations: float
    answer: str | None
    retrieved_before_answer: float = _UNSCORED
    updated_stale: float = _UNSCORED
    stale_kept: float = _UNSCORED
    managed_context: float = _UNSCORED
    overflowed: float = _UNSCORED


def episode_score(trajectory: Trajectory, task: Task, breakdown: dict[str, float]) -> EpisodeScore:
    supports = [fact.text for fact in task.supporting_facts if fact.text]
    memory = trajectory.final_memory
    stored_fact = any(s in entry["content"] for s in supports for entry in memory)
    stored_distractor = any(
        d in entry["content"] or entry["content"] in d for d in task.distractors for entry in memory
    )
    return EpisodeScore(
        task_id=task.id,
        em=exact_match(trajectory.answer, task.answer) if trajectory.answer is not None else 0.0,
        reward=breakdown["total"],
        storage=breakdown["memory/storage"],
        stored_fact=float(stored_fact),
        stored_distractor=float(stored_distractor),
        retrieved=float(breakdown["memory/retrievals"] > 0),
        context_tokens=breakdown["context/tokens_used"],
        generated_tokens=float(sum(len(step.completion_ids) for step in trajectory.steps)),
        steps=float(len(trajectory.steps)),
        violations=breakdown["violations"],
        answer=trajectory.answer,
        **tool_use(trajectory, task),
    )


def _calls(trajectory: Trajectory, names: tuple[str, ...], stage: int | None = None) -> list[dict[str, Any]]:
    return [
        call
        for step in trajectory.steps
        if stage is None or step.stage == stage
        for call in step.tool_calls
        if call.get("name") in names
    ]


def stale_sentences(task: Task) -> list[str]:
    """The Stage-1 sentences a later Stage-1 message of ``task`` changes (``data.synthetic.revisions``)."""
    return [BY_NAME[c["attribute"]].state(c["entity"], c["old"]) for c in task.metadata.get("revisions", [])]


def tool_use(trajectory: Trajectory, task: Task) -> dict[str, float]:
    """Per tool, whether ``trajectory`` used it where it helps (the module docstring's last five metrics)."""
    stale = stale_sentences(task)
    arguments = [call.get("arguments") for call in _calls(trajectory, ("Add_memory",))]
    written = [str(a.get("content", "")) for a in arguments if isinstance(a, dict)]  # a malformed call wrote nothing
    stored_stale = {s for s in stale if any(s in content for content in written)}
    kept = {s for s in stale if any(s in entry["content"] for entry in trajectory.final_memory)}
    overflowed = trajectory.ended_by == "prompt_too_long"
    compressed = bool(_calls(trajectory, ("Summary_context", "Filter_context"), stage=2))
    return {
        "retrieved_before_answer": float(bool(_calls(trajectory, ("Retrieve_memory",), stage=3))),
        "updated_stale": float(bool(stored_stale - kept)),
        "stale_kept": float(bool(kept)),
        "managed_context": float(compressed and not overflowed),
        "overflowed": float(overflowed),
    }


def evaluate_policy(
    config: TrainRunConfig,
    model_dir: str | Path,
    tasks: Sequence[Task],
    *,
    seed: int,
    encoder: Encoder | None = None,
    progress: bool = True,
) -> tuple[list[EpisodeScore], list[Trajectory]]:
    """Play every task once with the policy in ``model_dir`` (its own tokenizer), sampling as
    ``config.sampling`` says from base seed ``seed``; return per-episode scores and trajectories."""
    config = replace(
        config,
        policy=replace(config.policy, model=str(model_dir), tokenizer=str(model_dir)),
        rollout=replace(config.rollout, rollouts_per_task=1),
    )
    model, tokenizer = load_policy(config.policy)
    resources = build_resources(config.env, tokenizer, encoder=encoder)
    engine = build_engine(config.engine, model, tokenizer)
    driver = build_driver(config.rollout, config.sampling, engine, tokenizer, resources, progress=progress)
    distractors = distractors_for(config.distractors, tasks, resources.encoder)
    trajectories = driver.run(list(tasks), distractors, seed=seed).trajectories
    by_id = {task.id: task for task in tasks}
    breakdowns = build_scorer(config.reward, config.env.context.max_context_tokens, resources.encoder)(
        trajectories, [by_id[t.task_id] for t in trajectories]
    )
    scores = [episode_score(t, by_id[t.task_id], b) for t, b in zip(trajectories, breakdowns, strict=True)]
    return scores, trajectories


def mean_scores(scores: Sequence[EpisodeScore]) -> dict[str, float]:
    return {name: sum(getattr(s, name) for s in scores) / len(scores) for name in METRICS} if scores else {}


def paired_differences(before: Sequence[EpisodeScore], after: Sequence[EpisodeScore], metric: str) -> list[float]:
    """``after - before`` of ``metric`` per task, matched by task id."""
    earlier = {s.task_id: getattr(s, metric) for s in before}
    missing = [s.task_id for s in after if s.task_id not in earlier]
    if missing or len(earlier) != len(after):
        raise ValueError(f"before and after must score the same tasks (unmatched: {missing[:3]})")
    return [getattr(s, metric) - earlier[s.task_id] for s in after]


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval ``mean ± t_{(1+c)/2, n-1} · s / sqrt(n)`` (s: the sample std).

    Used for paired per-task differences within a seed and for per-seed improvements across
    seeds; with one value the interval is undefined (nan).
    """
    from scipy.stats import t as student_t

    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = sum(values) / n
    if n == 1:
        return mean, math.nan, math.nan
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = student_t.ppf((1 + confidence) / 2, n - 1) * std / math.sqrt(n)
    return mean, mean - half, mean + half


def ci_dict(values: Sequence[float]) -> dict[str, float]:
    """:func:`mean_ci` as ``{"mean", "low", "high"}``."""
    mean, low, high = mean_ci(values)
    return {"mean": mean, "low": low, "high": high}


def scores_to_rows(scores: Sequence[EpisodeScore]) -> list[dict[str, Any]]:
    return [asdict(s) for s in scores]


def read_scores(path: Path) -> list[EpisodeScore]:
    """The episode scores a held-out evaluation wrote (one JSON object a line, :func:`scores_to_rows`)."""
    return [EpisodeScore(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]

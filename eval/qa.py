"""`agemem eval hotpotqa` (and every QA environment: ``agemem eval synthetic``, a registered QA set): questions
played as AgeMem episodes, scored with the paper's metrics.

Each question is one episode: Stage 1 shows its paragraphs as casual user turns (the agent may build
LTM), Stage 2 distractors are off unless ``eval.distractors`` is on (as the authors evaluate), Stage 3
asks the question. Questions are played in chunks of ``eval.chunk_size`` through the batched rollout
driver, each chunk scored in one judge batch and appended to ``examples.jsonl``; a re-run skips the
questions already there (resume).

Per question (``examples.jsonl``; scores in [0, 1]):

* ``judge``: the configured judge's score of the answer (rule judge: official token F1, or EM with
  ``reward.judge.answer_metric=em``); 0 without an answer;
* ``em``, ``f1``: official HotpotQA exact match and token F1 (``hotpot_evaluate_v1`` normalisation);
* ``mq``: memory quality, :func:`memory_quality`; None when no Stage 1 was played or the question has no
  supporting fact;
* ``stage3_prompt_tokens``, ``stage3_steps``: the prompt tokens of the Stage-3 agent steps and their number;
* ``tool_calls``: calls per tool and in total (:func:`agemem.eval.metrics.tool_calls`).

Per run (``results.json``): J, EM, F1 = 100 · the mean of ``judge``, ``em``, ``f1``; MQ = the mean of
``mq``; TN = Σ Stage-3 prompt tokens / Σ Stage-3 steps (:func:`agemem.eval.metrics.pooled_mean`); TC = the mean
calls per episode of each tool and in total.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError, to_dict
from agemem.eval import metrics
from agemem.eval.config import EvalRunConfig
from agemem.eval.report import (
    COST_COLUMNS,
    COST_NOTE,
    RUN_COLUMNS,
    TOOL_CALL_COLUMNS,
    TOOL_CALL_LABELS,
    Column,
    Panel,
    counted,
    tool_call_values,
)
from agemem.eval.runner import PlayProgress, RunContext, evaluate
from agemem.eval.variants import apply_variant
from agemem.rewards.base import AnswerItem, Judge, MemoryItem
from agemem.rewards.judges import exact_match, f1_score
from agemem.rollouts.build import build_driver, distractors_for
from agemem.tasks import get_task, load_task_pool, source_of, task_for_source
from agemem.tasks.base import DataConfig
from agemem.tasks.qa import QATask

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.eval.models import Backend
    from agemem.rollouts.records import Task, Trajectory

COLUMNS = (
    *RUN_COLUMNS,
    Column("questions", "n", "{:d}"),
    Column("J", "J"),
    Column("EM", "EM"),
    Column("F1", "F1"),
    Column("MQ", "MQ", "{:.3f}"),
    Column("TN", "TN", "{:.0f}"),
    *TOOL_CALL_COLUMNS,
    *COST_COLUMNS,
)
PANELS = (
    Panel("answers and memory", ("J", "EM", "F1", "MQ x100"), "score (0-100)", ymax=100.0),
    Panel("Stage-3 prompt", ("TN",), "tokens per step"),
    Panel("tool calls per episode", TOOL_CALL_LABELS, "calls"),
)
METRICS_NOTE = (
    "\nJ: judge score x100. EM / F1: official HotpotQA exact match / token F1, x100. MQ: memory quality (0-1), "
    "the judge's score of the final LTM against each supporting-fact sentence, averaged. TN: prompt tokens per "
    "Stage-3 step. TC: tool calls per episode. " + COST_NOTE
)


# --------------------------------------------------------------------------------------------- metrics


def memory_quality_items(memory: Sequence[str], facts: Sequence[str]) -> list[MemoryItem]:
    """One judge item per supporting fact: the whole LTM (entries joined by newlines) against that fact."""
    content = "\n".join(memory)
    return [MemoryItem(content, (fact,)) for fact in facts]


def memory_quality(fact_scores: Sequence[float]) -> float | None:
    """MQ of one question: the mean over its supporting facts f of the judge's score of the LTM M against f.

    With the rule judge the score is ``|C(f) ∩ C(M)| / |C(f)|`` (``C``: content words, see
    :func:`agemem.rewards.judges.content_words`), so ``MQ = (1/|F|) Σ_f |C(f) ∩ C(M)| / |C(f)|``: the share of each
    supporting sentence's content words present anywhere in memory. A model judge is asked, per fact, how
    much of it the memory carries (0-1). None when the question has no supporting fact.
    """
    return sum(fact_scores) / len(fact_scores) if fact_scores else None


def answer_scores(trajectory: Trajectory, judge_score: float | None) -> dict[str, float]:
    """``judge``, ``em`` and ``f1`` of one final answer (all 0 when the agent never answered)."""
    if trajectory.answer is None:
        return {"judge": 0.0, "em": 0.0, "f1": 0.0}
    return {
        "judge": float(judge_score or 0.0),
        "em": exact_match(trajectory.answer, trajectory.gold_answer),
        "f1": f1_score(trajectory.answer, trajectory.gold_answer),
    }


def score_examples(
    trajectories: Sequence[Trajectory],
    tasks: dict[str, Task],
    judge: Judge,
    offered: Sequence[str],
    *,
    stage1_played: bool,
) -> list[dict[str, Any]]:
    """One ``examples.jsonl`` record per trajectory; the judge is called once per role for the batch."""
    answered = [t for t in trajectories if t.answer is not None]
    answer_items = [AnswerItem(t.question, t.answer or "", t.gold_answer) for t in answered]
    by_answer = dict(zip((id(t) for t in answered), judge.answer_scores(answer_items)))
    memories = {id(t): [entry["content"] for entry in t.final_memory] for t in trajectories}
    facts = {id(t): [f.text for f in tasks[t.task_id].supporting_facts if f.text] for t in trajectories}
    # an empty memory holds nothing: scored 0 without asking a model judge about an empty note
    asked = [t for t in trajectories if stage1_played and memories[id(t)]]
    items = [item for t in asked for item in memory_quality_items(memories[id(t)], facts[id(t)])]
    fact_scores = iter(judge.memory_scores(items))
    records = []
    for trajectory in trajectories:
        key = id(trajectory)
        if not stage1_played:
            mq = None
        elif memories[key]:
            mq = memory_quality([next(fact_scores) for _ in facts[key]])
        else:
            mq = memory_quality([0.0] * len(facts[key]))
        scores = answer_scores(trajectory, by_answer.get(key))
        records.append(example_record(trajectory, scores, mq, facts[key], offered))
    return records


def example_record(
    trajectory: Trajectory,
    scores: dict[str, float],
    mq: float | None,
    facts: Sequence[str],
    offered: Sequence[str],
) -> dict[str, Any]:
    """What examples.jsonl keeps of one episode: scores, the counts behind TN and TC, memory, transcript."""
    tokens, steps = metrics.stage_prompt_tokens(trajectory, stage=3)
    return {
        "id": trajectory.task_id,
        "question": trajectory.question,
        "gold": trajectory.gold_answer,
        "answer": trajectory.answer,
        **scores,
        "mq": mq,
        "stage3_prompt_tokens": tokens,
        "stage3_steps": steps,
        "tool_calls": metrics.tool_calls(trajectory, offered),
        "ended_by": trajectory.ended_by,
        "steps": len(trajectory.action_steps),
        "violations": sum(len(s.violations) for s in trajectory.action_steps),
        "limit_hits": len(trajectory.limit_hits),
        "memory": [entry["content"] for entry in trajectory.final_memory],
        "cost": metrics.llm_cost(trajectory.steps, trajectory.stats.memory_system_cost),
        "supporting_facts": list(facts),
        "transcript": [{"stage": s.stage, "kind": s.kind, "completion": s.completion_text} for s in trajectory.steps],
    }


def aggregate(examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The run's metrics from its per-question records (see the module docstring for the formulas)."""
    return {
        "questions": len(examples),
        "J": metrics.percent(e["judge"] for e in examples),
        "EM": metrics.percent(e["em"] for e in examples),
        "F1": metrics.percent(e["f1"] for e in examples),
        "MQ": metrics.mean(e["mq"] for e in examples),
        "TN": metrics.pooled_mean((e["stage3_prompt_tokens"] for e in examples), (e["stage3_steps"] for e in examples)),
        "TC": metrics.mean_tool_calls([e["tool_calls"] for e in examples]),
        "answered": metrics.percent(float(e["answer"] is not None) for e in examples),
        "cost": metrics.mean_cost([e.get("cost") for e in examples]),
        "ended_by": {
            reason: sum(e["ended_by"] == reason for e in examples)
            for reason in sorted({e["ended_by"] for e in examples})
        },
    }


# --------------------------------------------------------------------------------------------- the benchmark


@dataclass
class Questions:
    """The questions of one run, and the pool Stage-2 distractors are drawn from."""

    items: list[Task]
    pool: list[Task]


class QuestionSession:
    """One model under one variant: the batched rollout driver over the questions not yet finished."""

    start = 0  # questions carry no state between each other: any unfinished question can be played

    def __init__(self, run: RunContext, questions: Questions):
        config, backend = run.config, run.backend
        resources = run.env_resources()
        self.config = config
        self.driver = build_driver(
            config.rollout, config.sampling, backend.engine, backend.tokenizer, resources, progress=False
        )
        self.judge = run.shared.get_judge()
        self.before = judge_counters(self.judge)
        finished = run.log.finished()
        pending = [t for t in questions.items if t.id not in finished]
        if config.distractors.count:
            self.distractors = distractors_for(
                config.distractors, pending, resources.encoder, questions.pool, progress=config.logging.progress
            )
        else:
            self.distractors = {t.id: [] for t in pending}
        self.by_id = {t.id: t for t in questions.items}
        self.offered = run.offered

    def play(self, chunk: Sequence[Task], seed: int | None, progress: PlayProgress) -> list[dict[str, Any]]:
        result = self.driver.run(list(chunk), self.distractors, rollouts_per_task=1, seed=seed)
        records = score_examples(
            result.trajectories, self.by_id, self.judge, self.offered, stage1_played=writes_memory(self.config)
        )
        progress.advance(len(chunk))  # the driver's own bar counts the episodes of the chunk
        return records

    def committed(self, done: int) -> None:
        pass

    def summary(self) -> dict[str, Any]:
        """``judge``: the judge calls of this session (name and counters, e.g. fallbacks)."""
        return {"judge": judge_calls(self.judge, self.before)}


def judge_counters(judge: Any) -> dict[str, int]:
    """A copy of ``judge``'s counters now (none for a judge that keeps none), for :func:`judge_calls` later."""
    return dict(getattr(judge, "counters", {}))


def judge_calls(judge: Any, before: dict[str, int]) -> dict[str, Any]:
    """``judge``'s name and what each of its counters gained since ``before`` (:func:`judge_counters`)."""
    after = getattr(judge, "counters", {})
    return {"name": judge.name, **{k: v - before.get(k, 0) for k, v in after.items()}}


def writes_memory(config: EvalRunConfig) -> bool:
    """Whether Stage 1 builds long-term memory (for MQ): it is played, and not only kept in the context."""
    return config.rollout.stage1 and not config.rollout.keep_stage1_context


def with_source(config: EvalRunConfig, task: QATask) -> EvalRunConfig:
    """``config`` with ``data.source`` naming ``task``: kept when it already does (a HotpotQA file for hotpotqa), set
    to the task's name when it is the default, and a location no task claims (``agemem eval hotpotqa --data
    dev.json``) is the benchmark's own (``hotpotqa:dev.json``); a source of another environment is a
    :class:`ConfigError`."""
    source = source_of(task.name, config.data.source)
    if source != config.data.source:
        return replace(config, data=replace(config.data, source=source))
    owner = task_for_source(source)
    if owner is task:
        return config
    if source == DataConfig().source:
        return replace(config, data=replace(config.data, source=task.name))
    raise ConfigError(
        f"data.source={source!r} is the {owner.name} environment, and `agemem eval {task.name}` plays {task.name}; "
        f"run `agemem eval {owner.name}`, or drop data.source"
    )


class QABenchmark:
    """`agemem eval <name>` for a question-answering environment (:class:`agemem.eval.runner.Benchmark`): HotpotQA,
    synthetic, or any registered :class:`~agemem.tasks.qa.QATask` with an ``evaluation``."""

    unit = "q"
    columns = COLUMNS
    panels = PANELS
    metrics_note = METRICS_NOTE
    headline = "J"

    def __init__(self, task: QATask):
        self.task = task
        self.name = task.name
        self.display = (task.evaluation.title if task.evaluation else "") or task.name

    def configure(self, config: EvalRunConfig, variant: str) -> EvalRunConfig:
        return with_source(apply_variant(config, variant), self.task)

    def load(self, config: EvalRunConfig) -> Questions:
        tasks, pool = load_task_pool(config)
        if not tasks:
            raise ConfigError(f"data.source={config.data.source!r} gave no questions")
        return Questions(tasks, pool)

    def identity(self, config: EvalRunConfig) -> dict[str, Any]:
        data, judge = config.data, config.reward.judge
        return {
            "data": {"source": data.source, "split": data.split, "hub_config": data.hub_config},
            "sampling": to_dict(config.sampling),
            "stage2": to_dict(config.distractors) if config.distractors.count else None,
            "judge": {"backend": judge.backend, "model": judge.model, "answer_metric": judge.answer_metric},
        }

    def open(self, run: RunContext, workload: Questions) -> QuestionSession:
        return QuestionSession(run, workload)

    def aggregate(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return aggregate(examples)

    def describe(self, config: EvalRunConfig, out: Path) -> dict[str, Any]:
        return {"judge": None}  # replaced by the session's judge calls when this run played questions

    def plot_values(self, results: dict[str, Any]) -> dict[str, float | None]:
        mq = results["MQ"]
        return {
            "J": results["J"],
            "EM": results["EM"],
            "F1": results["F1"],
            "MQ x100": None if mq is None else 100.0 * mq,
            "TN": results["TN"],
            **tool_call_values(results["TC"]),
        }

    def title(self, runs: Sequence[dict[str, Any]]) -> str:
        counts = {r["questions"] for r in runs}
        return f"{self.display} ({counted(counts.pop(), 'question')})" if len(counts) == 1 else self.display


def evaluate_qa(
    config: EvalRunConfig,
    out: str | Path,
    *,
    name: str = "hotpotqa",
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every model of ``eval.models`` under every ``eval.variants`` on the questions of QA environment
    ``name`` (:func:`agemem.eval.runner.evaluate`)."""
    task = get_task(name)
    if not isinstance(task, QATask):
        raise ConfigError(f"{name!r} is not a question-answering environment; evaluate it with `agemem eval {name}`")
    return evaluate(QABenchmark(task), config, out, backends=backends, encoder=encoder)

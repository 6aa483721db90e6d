"""`agemem eval locomo`: LoCoMo's long conversations, read once each, then every question asked against what the agent
(or a memory system) kept of them.

A run has two phases, both on the evaluation runner (:mod:`agemem.eval.runner`):

**Ingestion.** Each conversation the questions need reaches the agent session by session: one user message per
session, headed by its date (:func:`agemem.tasks.locomo.session_text`), answered as a Stage-1 turn
(:meth:`agemem.rollouts.episode.Episode.take_in`: the agent may store, update, delete, summarise, filter). Long-term
memory persists across the sessions of a conversation, in its own scope (``locomo/<sample id>``). The short-term
context runs on from session to session (``locomo.session_context=carry``): before a session arrives, its oldest
rounds are dropped until the session fits ``env.context.max_context_tokens``, so the budget and the agent's own
management decide what survives of ~600 turns (``reset``: every session starts from an empty context). A memory
system's variant hands each session to the system instead (its own LLM calls; the agent does not act). The
conversations are ingested side by side, one session each per round, one engine call per tick for all of them; after
every round the memory (``ingest/memory_round_NNNN.npz``) and then the state (``ingest/state.json``: sessions done,
each conversation's context, a record per session) are written, so a killed run resumes at the last finished round
and never redoes a finished session.

**Questions.** Every question is its own Stage-3 episode against the conversation's memory as ingestion left it:
the memory-system papers ask all questions of a conversation against one memory state, and so does this. A variant
whose agent can write memory (``agemem``, ``rag``, ``ltm_only``) starts each question from a fresh copy of that memory
(:meth:`agemem.core.ltm.LongTermMemory.copy_scope`), so a question's Add/Update/Delete never reach the next question;
a memory system's variant searches the conversation's memory itself (its agent has no tools). Each question starts
from an empty short-term context, as Stage 3 does after the paper's reset. ``no_memory`` asks the question alone;
``full_context`` puts every session before the question in the context, unanswered (what the memory systems compare
with; ``rollout.max_prompt_tokens`` caps it, an over-long prompt ends the episode, recorded).

Per question (``examples.jsonl``): the QA harness's record (:func:`agemem.eval.qa.score_examples`: judge score, MQ
against the evidence turns, TN, TC, transcript) and LoCoMo's: ``category``; ``locomo_f1``, ``mem0_f1``, ``bleu1``
(:func:`agemem.eval.locomo_metrics.score_answer`); ``j``, Mem0's J (an LLM judge's CORRECT/WRONG under
:data:`~agemem.eval.locomo_metrics.J_RUBRIC` when ``reward.judge`` is a model; with the rule judge, its answer score);
``cost``: what answering cost plus the question's share of its conversation's ingestion (``answer_cost``,
``ingest_cost``).

Per run (``results.json``): J, F1 (Mem0's), BLEU-1 over categories 1-4 (category 5, adversarial, apart, as the
memory-system papers report it); LoCoMo F1, LoCoMo's own F1 over every category played; each metric per category;
``ingest``, what ingestion did and cost (:func:`ingest_summary`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from agemem.core.chat import end_of_turn_ids
from agemem.core.configlib import ConfigError, to_dict
from agemem.core.context import ShortTermContext
from agemem.core.env import MemoryEnv
from agemem.core.ltm import SnapshotError
from agemem.core.tools import LTM_TOOLS
from agemem.eval import locomo_metrics as lm
from agemem.eval import metrics
from agemem.eval.memory_systems import seed_position
from agemem.eval.qa import judge_calls, judge_counters, score_examples
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
    write_json,
)
from agemem.eval.runner import PlayProgress, RunContext
from agemem.eval.variants import apply_variant
from agemem.rollouts.build import build_driver, sampling_params
from agemem.rollouts.driver import play_together
from agemem.rollouts.engines.base import Completion, derive_seed
from agemem.rollouts.episode import Episode, EpisodeOverError, EpisodeSetup, GenerationRequest, Stages
from agemem.rollouts.records import Task
from agemem.tasks.locomo import (
    LocomoConversation,
    LocomoTask,
    locomo_path,
    locomo_settings,
    played_sessions,
    question_tasks,
    selected_conversations,
)

if TYPE_CHECKING:
    from agemem.core.env import EnvResources
    from agemem.eval.config import EvalRunConfig
    from agemem.rollouts.driver import EpisodeRun
    from agemem.rollouts.engines.base import Engine, SamplingParams

Number = TypeVar("Number", int, float)

SCOPE_PREFIX = "locomo/"
"""a conversation's long-term memory lives in scope ``locomo/<sample id>``."""
STATE_FILE = "ingest/state.json"
INGESTING_VARIANTS_EXCLUDED = ("no_memory", "full_context")
"""the variants that read no memory, so ingest nothing."""


def conversation_scope(sample_id: str) -> str:
    return SCOPE_PREFIX + sample_id


# --------------------------------------------------------------------------------------------- the table

CATEGORY_LABELS = {c: lm.category_name(c) for c in lm.SCORED_CATEGORIES}
"""categories 1-4 by LoCoMo's own naming (Mem0's paper names them otherwise: :func:`lm.category_name`)."""

COLUMNS = (
    *RUN_COLUMNS,
    Column("questions", "n", "{:d}"),
    Column("J", "J"),
    Column("F1", "F1"),
    Column("BLEU1", "BLEU-1"),
    Column("LoCoMo_F1", "LoCoMo F1"),
    *(Column(f"by_category.{c}.J", f"J {name}") for c, name in CATEGORY_LABELS.items()),
    Column("by_category.5.LoCoMo_F1", "adversarial"),
    Column("MQ", "MQ", "{:.3f}"),
    Column("TN", "TN", "{:.0f}"),
    *TOOL_CALL_COLUMNS,
    Column("ingest_cost.llm_calls", "ingest calls", "{:.1f}"),
    *COST_COLUMNS,
)
PANELS = (
    Panel("answers (categories 1-4)", ("J", "F1", "BLEU-1", "LoCoMo F1"), "score (0-100)", ymax=100.0),
    Panel("J by category", tuple(CATEGORY_LABELS.values()), "J (0-100)", ymax=100.0),
    Panel("tool calls per question", TOOL_CALL_LABELS, "calls"),
)
METRICS_NOTE = (
    "\nJ: Mem0's LLM-judge score x100 (CORRECT/WRONG under its rubric, categories 1-4; with the rule judge, the rule "
    "judge's answer score). F1 / BLEU-1: Mem0's set-of-tokens F1 and NLTK BLEU-1, x100, categories 1-4. LoCoMo F1: "
    "LoCoMo's own stemmed F1 over every category played (category 5 scores an answer saying the topic was not "
    "mentioned). Per category by LoCoMo's naming: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 "
    "adversarial (Mem0's paper calls 1 single-hop, 3 multi-hop, 4 open-domain). MQ: memory quality against the "
    "evidence turns (0-1). TN: prompt tokens per answering step. TC: tool calls per question. ingest calls: the "
    "question's share of its conversation's ingestion LLM calls; calls and tokens below count answering plus that "
    "share. " + COST_NOTE
)


# --------------------------------------------------------------------------------------------- metrics


def locomo_scores(record: dict[str, Any]) -> dict[str, Any]:
    """The rule-based LoCoMo scores of one question record (its answer, gold answer and category); a question
    without an answer scores 0 where a score is defined."""
    scores = lm.score_answer(record["answer"] or "", record["gold"], record["category"])
    if record["answer"] is None:
        scores = {key: (0.0 if key != "category" and value is not None else value) for key, value in scores.items()}
    return scores


@runtime_checkable
class RubricJudge(Protocol):
    """A model judge that answers any chat prompt (:meth:`agemem.rewards.judges.LLMJudge.complete_all`)."""

    name: str

    def complete_all(self, prompts: Sequence[list[dict[str, str]]]) -> list[str | None]: ...


def j_scores(records: Sequence[dict[str, Any]], judge: Any) -> list[tuple[float | None, str]]:
    """J of each record with its reason: category 5 is not judged (None), an unanswered question is WRONG (0); a
    model judge labels the rest under Mem0's rubric (an unreadable reply: None, counted), the rule judge gives its
    answer score (``record["judge"]``)."""
    asked = [r for r in records if r["category"] != lm.ADVERSARIAL and r["answer"] is not None]
    verdicts: dict[int, tuple[float | None, str]] = {}
    if isinstance(judge, RubricJudge):
        replies = judge.complete_all([lm.j_messages(r["question"], r["gold"], r["answer"]) for r in asked])
        for record, reply in zip(asked, replies):
            label = lm.parse_j_label(reply)
            verdicts[id(record)] = (None if label.score is None else float(label.score), label.reason)
    else:
        for record in asked:
            verdicts[id(record)] = (float(record["judge"]), "rule judge's answer score")
    out = []
    for record in records:
        if record["category"] == lm.ADVERSARIAL:
            out.append((None, "category 5 is not judged"))
        elif record["answer"] is None:
            out.append((0.0, "no answer"))
        else:
            out.append(verdicts[id(record)])
    return out


def keywise_sum(dicts: Iterable[Mapping[str, Number]]) -> dict[str, Number]:
    """Key-wise sums of dicts of numbers: costs (:func:`agemem.eval.metrics.llm_cost`, floats stay floats)
    and tool-call counts (ints stay ints)."""
    total: dict[str, Number] = {}
    for numbers in dicts:
        for key, value in numbers.items():
            total[key] = total.get(key, 0) + value
    return total


def scale_cost(cost: dict[str, float], factor: float) -> dict[str, float]:
    return {key: value * factor for key, value in cost.items()}


def category_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """One :func:`lm.aggregate` summary as the table reads it: n, J, F1, BLEU1, LoCoMo_F1 (%)."""
    mean = summary["mean"]
    return {
        "n": summary["count"],
        "J": mean["j"],
        "F1": mean["mem0_f1"],
        "BLEU1": mean["bleu1"],
        "LoCoMo_F1": mean["locomo_f1"],
    }


def aggregate(examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The run's metrics from its per-question records (the module docstring gives each)."""
    scored = lm.aggregate(examples)
    overall = category_summary(scored["overall"])
    return {
        "questions": len(examples),
        "J": overall["J"],
        "F1": overall["F1"],
        "BLEU1": overall["BLEU1"],
        "LoCoMo_F1": scored["overall_with_adversarial"]["mean"]["locomo_f1"],
        "by_category": {str(c): category_summary(s) for c, s in scored["by_category"].items()},
        "adversarial": category_summary(scored["adversarial"]),
        "j_unreadable": sum(1 for e in examples if e["category"] != lm.ADVERSARIAL and e["j"] is None),
        "MQ": metrics.mean(e["mq"] for e in examples),
        "TN": metrics.pooled_mean((e["stage3_prompt_tokens"] for e in examples), (e["stage3_steps"] for e in examples)),
        "TC": metrics.mean_tool_calls([e["tool_calls"] for e in examples]),
        "answered": metrics.percent(float(e["answer"] is not None) for e in examples),
        "cost": metrics.mean_cost([e["cost"] for e in examples]),
        "answer_cost": metrics.mean_cost([e["answer_cost"] for e in examples]),
        "ingest_cost": metrics.mean_cost([e["ingest_cost"] for e in examples]),
        "ended_by": {
            reason: sum(e["ended_by"] == reason for e in examples)
            for reason in sorted({e["ended_by"] for e in examples})
        },
    }


# --------------------------------------------------------------------------------------------- ingestion


@dataclass
class IngestState:
    """What ``ingest/state.json`` holds: how far each conversation is, its short-term context, a record per session
    played, and the memory snapshot taken with it."""

    done: dict[str, int] = field(default_factory=dict)
    """sessions ingested, per conversation."""
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """each conversation's short-term context after its last session (:meth:`ShortTermContext.to_json`)."""
    sessions: list[dict[str, Any]] = field(default_factory=list)
    """one record per session played (:func:`session_record`), in play order."""
    snapshot: str = ""
    """the memory file written with this state (relative to the run's folder); empty: nothing ingested yet."""
    rounds: int = 0
    """rounds committed (a round: one session of every conversation not done yet)."""
    wall_s: float = 0.0
    """seconds spent ingesting, over every process that added a round."""

    @classmethod
    def read(cls, path: Path) -> IngestState:
        if not path.is_file():
            return cls()
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as err:
            raise ConfigError(
                f"{path} is not an ingestion state ({err}); delete {path.parent.parent} to start afresh"
            ) from err

    def cost_of(self, sample_id: str) -> dict[str, float]:
        return keywise_sum(s["cost"] for s in self.sessions if s["conversation"] == sample_id)


def session_record(
    sample_id: str, index: int, date: str, episode: Episode, env: MemoryEnv, dropped: int, ended_by: str, error: str
) -> dict[str, Any]:
    """What one ingested session did: its steps and tool calls, how it ended, what the budget dropped before it,
    the context and memory it left, and its cost (the agent's steps and the memory system's calls)."""
    steps = episode.steps
    return {
        "conversation": sample_id,
        "session": index,
        "date": date,
        "ended_by": ended_by,
        "error": error or None,
        "steps": len(steps),
        "tool_calls": metrics.count_tool_calls(steps, env.offered),
        "violations": len(env.stats.violations),
        "limit_hits": len(episode.limit_hits),
        "dropped_messages": dropped,
        "context_tokens": env.context_tokens(),
        "context_messages": len(env.context.messages),
        "memory_entries": len(env.ltm.entries(scope=env.scope)),
        "cost": metrics.llm_cost(steps, env.stats.memory_system_cost),
        "transcript": [s.completion_text for s in steps],
    }


def ingest_summary(state: IngestState) -> dict[str, Any] | None:
    """``results.json``'s ``ingest``: conversations and sessions ingested, agent steps, tool calls and sessions cut
    short, messages the budget dropped, memory entries per conversation at the end, and the total cost."""
    if not state.sessions:
        return None
    last = {s["conversation"]: s for s in state.sessions}
    ended: dict[str, int] = {}
    for s in state.sessions:
        ended[s["ended_by"]] = ended.get(s["ended_by"], 0) + 1
    return {
        "conversations": len(state.done),
        "sessions": len(state.sessions),
        "rounds": state.rounds,
        "wall_s": round(state.wall_s, 3),
        "steps": sum(s["steps"] for s in state.sessions),
        "tool_calls": keywise_sum(s["tool_calls"] for s in state.sessions),
        "ended_by": ended,
        "dropped_messages": sum(s["dropped_messages"] for s in state.sessions),
        "memory_entries": {sample: s["memory_entries"] for sample, s in last.items()},
        "cost": keywise_sum(s["cost"] for s in state.sessions),
    }


class Ingestion:
    """Feeds conversations to the agent (or a memory system) session by session, side by side, committing after
    every round; a re-run restores the memory and contexts of the last committed round."""

    def __init__(
        self, run: RunContext, resources: EnvResources, variant_reads_memory: bool, conversations: Sequence[str]
    ):
        config = run.config
        self.out = run.out
        self.config = config
        self.settings = locomo_settings(config)
        self.resources = resources
        self.engine: Engine = run.backend.engine
        stop_ids = end_of_turn_ids(run.backend.tokenizer)
        self.sampling: SamplingParams = sampling_params(config.sampling, stop_ids)
        policy_summaries = config.env.summarizer.backend == "policy"
        self.setup = EpisodeSetup(run.backend.tokenizer, tuple(stop_ids), config.rollout, policy_summaries)
        self.variant_index = seed_position(run.variant)
        self.active = variant_reads_memory
        self.state = IngestState.read(self.out / STATE_FILE)
        for sample in conversations:  # a memory system's store outlives a killed run: drop what the kill left
            resources.ltm.clear(scope=conversation_scope(sample))
        if self.state.snapshot:
            try:
                resources.ltm.restore(self.out / self.state.snapshot)
            except SnapshotError as err:
                raise ConfigError(f"{err}; delete {self.out} to start afresh") from err

    def ensure(self, conversations: Sequence[LocomoConversation], progress: PlayProgress) -> None:
        """Ingest every session of ``conversations`` not ingested yet, a round (one session of each) at a time."""
        if not self.active:
            return
        while True:
            pending = [c for c in conversations if self.state.done.get(c.sample_id, 0) < self.sessions_of(c)]
            if not pending:
                return
            self.play_round(pending, progress)

    def sessions_of(self, conversation: LocomoConversation) -> int:
        return len(played_sessions(conversation, self.settings))

    def play_round(self, conversations: Sequence[LocomoConversation], progress: PlayProgress) -> None:
        """One session of each conversation, side by side; then the memory and the state, in that order."""
        runs = []
        for conversation in conversations:
            index = self.state.done.get(conversation.sample_id, 0)
            runs.append(self.play_session(conversation, index))
        described = ", ".join(f"{c.sample_id} s{self.state.done.get(c.sample_id, 0) + 1}" for c in conversations)
        progress.status(f"ingesting {described}")
        base = self.config.sampling.seed
        sampling = (
            self.sampling
            if base is None
            else replace(self.sampling, seed=derive_seed(base, self.variant_index, -1, self.state.rounds))
        )
        started = time.perf_counter()
        results = play_together(runs, self.engine, sampling)
        self.state.wall_s += time.perf_counter() - started
        for conversation, (record, context) in zip(conversations, results):
            self.state.done[conversation.sample_id] = record["session"]
            self.state.contexts[conversation.sample_id] = context
            self.state.sessions.append(record)
        self.commit()

    def play_session(
        self, conversation: LocomoConversation, index: int
    ) -> Generator[GenerationRequest, Completion, tuple[dict[str, Any], dict[str, Any]]]:
        """Session ``index`` (0-based) of ``conversation`` as one Stage-1 turn on the conversation's memory and
        context; returns its record and the context it leaves."""
        session = conversation.sessions[index]
        env = MemoryEnv(self.resources, scope=conversation_scope(conversation.sample_id))
        saved = self.state.contexts.get(conversation.sample_id)
        # a memory system's ingestion has no agent to read the context: every session starts from an empty one
        carry = self.settings.session_context == "carry" and self.config.rollout.stage1_agent
        if saved is not None and carry:
            env.context = ShortTermContext.from_json(saved)
        text = session.message(self.settings.image_captions)
        dropped = env.fit_context(self.config.env.context.max_context_tokens, text)
        task = Task(f"{conversation.sample_id}/session_{session.index}", "", "", [], [])
        episode = Episode(task, [], env, self.setup, 0)  # only its Stage 1 is played (take_in)
        ended_by, error = "done", ""
        try:
            yield from episode.take_in([text])
        except EpisodeOverError as over:  # the next session still comes: a conversation is not one episode
            ended_by, error = over.reason, over.error or ""
        record = session_record(
            conversation.sample_id, index + 1, session.date_time, episode, env, len(dropped), ended_by, error
        )
        return record, env.context.to_json()

    def commit(self) -> None:
        """The memory after this round, then the state naming it (a kill in between keeps the previous pair), then
        the older memory files go."""
        self.state.rounds += 1
        name = f"ingest/memory_round_{self.state.rounds:04d}.npz"
        self.resources.ltm.save(self.out / name)
        self.state.snapshot = name
        write_json(self.out / STATE_FILE, self.state.__dict__)
        for path in (self.out / "ingest").glob("memory_round_*.npz"):
            if path.name != Path(name).name:
                path.unlink()


# --------------------------------------------------------------------------------------------- questions


@dataclass
class LocomoWorkload:
    """The questions of one run, conversation by conversation, and their conversations."""

    items: list[Task]
    conversations: dict[str, LocomoConversation]


class LocomoSession:
    """One model under one variant: ingest what the pending questions need, then ask them in chunks."""

    start = 0  # a question's memory is its conversation's, which ingestion rebuilds on resume: any can be played

    def __init__(self, run: RunContext, workload: LocomoWorkload, task_spec: LocomoTask):
        config = run.config
        self.task_spec = task_spec
        self.config = config
        self.variant = run.variant
        self.resources = run.env_resources()
        self.reads_memory = run.variant not in INGESTING_VARIANTS_EXCLUDED
        self.copies_memory = self.reads_memory and any(tool in LTM_TOOLS for tool in config.env.tools)
        self.ingestion = Ingestion(run, self.resources, self.reads_memory, list(workload.conversations))
        self.workload = workload
        self.judge = run.shared.get_judge()
        self.before = judge_counters(self.judge)
        self.offered = run.offered
        self.by_id = {task.id: task for task in workload.items}
        self.questions_per_conversation: dict[str, int] = {}
        for task in workload.items:
            sample = task.metadata["conversation"]
            self.questions_per_conversation[sample] = self.questions_per_conversation.get(sample, 0) + 1
        self.driver = build_driver(
            config.rollout,
            config.sampling,
            run.backend.engine,
            run.backend.tokenizer,
            self.resources,
            progress=False,
            make_episode=self.question_episode,
        )
        self.ingested = False

    def question_episode(
        self, task: Task, distractors: list[str], env: MemoryEnv, setup: EpisodeSetup, index: int
    ) -> EpisodeRun:
        """A question as a Stage-3 episode on its conversation's memory (a copy, where the agent can write it)."""
        stages: Stages
        if self.reads_memory:
            source = conversation_scope(task.metadata["conversation"])
            if self.copies_memory:
                env.ltm.copy_scope(source, env.scope)  # type: ignore[attr-defined]
            else:
                env.scope = source  # a memory system's agent only reads: search the conversation's memory itself
            stages = Stages([], [], task.question)
        else:
            stages = self.task_spec.stages(self.by_id[task.id], [], setup.config)  # the sessions, then the question
        return Episode(task, distractors, env, setup, index, stages).play()

    def play(self, chunk: Sequence[Task], seed: int | None, progress: PlayProgress) -> list[dict[str, Any]]:
        if not self.ingested:  # every conversation of the run together: one engine call per tick for all of them
            pending = {t.metadata["conversation"] for t in self.workload.items}
            wanted = [c for sample, c in self.workload.conversations.items() if sample in pending]
            self.ingestion.ensure(wanted, progress)
            self.ingested = True
        # a question that reads memory is shown no session: its copy carries none (nothing for the driver to embed)
        played = [replace(t, contexts=[]) if self.reads_memory else t for t in chunk]
        result = self.driver.run(played, {t.id: [] for t in chunk}, rollouts_per_task=1, seed=seed)
        records = score_examples(
            result.trajectories, self.by_id, self.judge, self.offered, stage1_played=self.reads_memory
        )
        for record, task in zip(records, chunk):
            self.add_locomo_fields(record, task)
        for record, (j, reason) in zip(records, j_scores(records, self.judge)):
            record["j"], record["j_reason"] = j, reason
        progress.advance(len(chunk))
        return records

    def add_locomo_fields(self, record: dict[str, Any], task: Task) -> None:
        sample = task.metadata["conversation"]
        record["conversation"] = sample
        record["category"] = task.metadata["category"]
        record.update({k: v for k, v in locomo_scores(record).items() if k != "category"})
        share = 1.0 / self.questions_per_conversation[sample]
        ingest = scale_cost(self.ingestion.state.cost_of(sample), share)
        record["answer_cost"] = record["cost"]
        record["ingest_cost"] = ingest
        record["cost"] = keywise_sum([record["cost"], ingest])

    def committed(self, done: int) -> None:
        pass

    def summary(self) -> dict[str, Any]:
        return {"judge": judge_calls(self.judge, self.before)}


# --------------------------------------------------------------------------------------------- the benchmark


class LocomoBenchmark:
    """`agemem eval locomo` (:class:`agemem.eval.runner.Benchmark`)."""

    name = "locomo"
    unit = "q"
    columns = COLUMNS
    panels = PANELS
    metrics_note = METRICS_NOTE
    headline = "J"

    def __init__(self, task: LocomoTask):
        self.task = task

    def configure(self, config: EvalRunConfig, variant: str) -> EvalRunConfig:
        """``config`` set up for ``variant``, reading LoCoMo: ``data.source=locomo:PATH`` is kept, any other source
        (the one a checkpoint was trained on, HotpotQA's) gives way to ``locomo.data``."""
        configured = apply_variant(config, variant)
        source = configured.data.source if configured.data.source.startswith("locomo:") else "locomo"
        return replace(configured, data=replace(configured.data, source=source))

    def load(self, config: EvalRunConfig) -> LocomoWorkload:
        lm.require_nltk()  # the metrics' stemmer and tokenizers: missing, the run would fail after ingesting
        settings = locomo_settings(config)
        conversations = selected_conversations(config)
        tasks = [task for c in conversations for task in question_tasks(c, settings)]
        if config.data.limit:
            tasks = tasks[: config.data.limit]
        return LocomoWorkload(tasks, {c.sample_id: c for c in conversations})

    def identity(self, config: EvalRunConfig) -> dict[str, Any]:
        settings = locomo_settings(config)
        judge = config.reward.judge
        return {
            "data": {"path": str(Path(locomo_path(config)).expanduser().resolve())},
            "locomo": {**to_dict(settings), "data": None},  # the path is above, resolved
            "sampling": to_dict(config.sampling),
            "context": {
                "max_context_tokens": config.env.context.max_context_tokens,
                "max_prompt_tokens": config.rollout.max_prompt_tokens,
                "max_steps_per_turn": config.rollout.max_steps_per_turn,
                "stage1_max_steps": config.rollout.stage1_max_steps,
            },
            "judge": {"backend": judge.backend, "model": judge.model, "answer_metric": judge.answer_metric},
        }

    def open(self, run: RunContext, workload: LocomoWorkload) -> LocomoSession:
        return LocomoSession(run, workload, self.task)

    def aggregate(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return aggregate(examples)

    def describe(self, config: EvalRunConfig, out: Path) -> dict[str, Any]:
        return {"judge": None, "ingest": ingest_summary(IngestState.read(out / STATE_FILE))}

    def plot_values(self, results: dict[str, Any]) -> dict[str, float | None]:
        by_category = results.get("by_category", {})
        return {
            "J": results["J"],
            "F1": results["F1"],
            "BLEU-1": results["BLEU1"],
            "LoCoMo F1": results["LoCoMo_F1"],
            **{name: by_category.get(str(c), {}).get("J") for c, name in CATEGORY_LABELS.items()},
            **tool_call_values(results["TC"]),
        }

    def title(self, runs: Sequence[dict[str, Any]]) -> str:
        counts = {r["questions"] for r in runs}
        return f"LoCoMo ({counted(counts.pop(), 'question')})" if len(counts) == 1 else "LoCoMo"


def locomo_benchmark(task: LocomoTask) -> LocomoBenchmark:
    """The harness :data:`agemem.tasks.locomo.EVALUATION` names."""
    return LocomoBenchmark(task)

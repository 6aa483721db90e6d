"""The records a rollout reads and writes: the task it plays, and what it did, step by step, token for token.

A :class:`Task` is one question with its Stage-1 material (``contexts``), the ground truth for memory quality
(``supporting_facts``, carrying the sentence text so a storage judge can compare memory contents with what had to
be stored, not with paragraph titles), and, for synthetic tasks, built-in Stage-2 distractors. Tasks serialise to
plain JSON dicts, and lists of tasks to JSONL, so a person can read them and a run can be reproduced from the file.

A :class:`Step` is one LLM call: the prompt ids exactly as the engine saw them and the
completion ids exactly as sampled (never re-tokenised), with the decoded text beside them
so a person can read the JSONL. A :class:`Trajectory` is one three-stage episode.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from agemem.core.configlib import ConfigError
from agemem.core.env import EpisodeStats


@dataclass
class Paragraph:
    title: str
    """what the paragraph is about (a Wikipedia title in HotpotQA, an entity name in synthetic tasks)."""
    sentences: list[str]
    """the paragraph's sentences as given by the source; supporting facts index into this list."""

    @property
    def text(self) -> str:
        """The sentences as one clean, single-spaced string (HotpotQA sentences carry their own leading spaces)."""
        return " ".join(s.strip() for s in self.sentences if s.strip())

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "sentences": list(self.sentences)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Paragraph:
        return cls(title=d["title"], sentences=list(d["sentences"]))


@dataclass
class SupportingFact:
    title: str
    """title of the paragraph holding the fact."""
    sentence_index: int
    """index of the fact's sentence in that paragraph's ``sentences``."""
    text: str
    """the sentence itself (stripped), which is what memory quality is judged against."""

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "sentence_index": self.sentence_index, "text": self.text}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SupportingFact:
        return cls(title=d["title"], sentence_index=d["sentence_index"], text=d["text"])


@dataclass
class Task:
    id: str
    """stable identifier (HotpotQA ``_id``; ``synthetic-{seed}-{index}`` for generated tasks)."""
    question: str
    """the Stage-3 question."""
    answer: str
    """the gold answer, scored by exact match / F1 or a judge."""
    contexts: list[Paragraph]
    """Stage-1 material in the order it is shown."""
    supporting_facts: list[SupportingFact]
    """the sentences the answer needs: ground truth for what the agent should store."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """free-form facts about the task: source, type, level, the attribute asked, ..."""
    distractors: list[str] = field(default_factory=list)
    """built-in Stage-2 distractor texts (synthetic tasks); empty when distractors are drawn elsewhere."""

    def to_json(self) -> dict[str, Any]:
        """A plain JSON-serialisable dict; :meth:`from_json` inverts it exactly."""
        return {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "contexts": [p.to_json() for p in self.contexts],
            "supporting_facts": [f.to_json() for f in self.supporting_facts],
            # deep copy so that editing the dict never edits the task behind it
            "metadata": copy.deepcopy(self.metadata),
            "distractors": list(self.distractors),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Task:
        missing = [key for key in ("id", "question", "answer", "contexts", "supporting_facts") if key not in d]
        if missing:
            raise ConfigError(f"task record lacks {', '.join(map(repr, missing))}; write tasks with Task.to_json()")
        return cls(
            id=d["id"],
            question=d["question"],
            answer=d["answer"],
            contexts=[Paragraph.from_json(p) for p in d["contexts"]],
            supporting_facts=[SupportingFact.from_json(f) for f in d["supporting_facts"]],
            metadata=copy.deepcopy(d.get("metadata", {})),
            distractors=list(d.get("distractors", [])),
        )


def save_tasks(path: str | Path, tasks: Iterable[Task]) -> Path:
    """Write tasks as JSONL, one ``Task.to_json()`` per line (UTF-8, not ASCII-escaped, so it stays readable)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for task in tasks:
            out.write(json.dumps(task.to_json(), ensure_ascii=False) + "\n")
    return path


def load_tasks_jsonl(path: str | Path) -> list[Task]:
    """Read tasks written by :func:`save_tasks`; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{str(path)!r}: no such file; give a JSONL file written by save_tasks()")
    tasks = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{path}:{number} is not JSON ({err}); each line must be one Task.to_json()") from err
            if not isinstance(record, dict):
                raise ConfigError(f"{path}:{number} is a {type(record).__name__}, not a task object")
            try:
                tasks.append(Task.from_json(record))
            except ConfigError as err:
                raise ConfigError(f"{path}:{number}: {err}") from err
    return tasks


StepKind = Literal["action", "summary"]
EndedBy = Literal["answer", "round_limit", "prompt_too_long", "engine_error"]


@dataclass
class Step:
    stage: int
    """AgeMem stage (1, 2, 3) the call was made in."""
    kind: StepKind
    """action: the agent's reply in the episode; summary: the policy writing a Summary_context summary."""
    turn: int
    """index of the user message this step answers, within its stage (0-based)."""
    prompt_ids: list[int]
    """[P] prompt token ids exactly as the engine saw them."""
    completion_ids: list[int]
    """[T] completion token ids exactly as sampled, end-of-turn token included when emitted."""
    logprobs: list[float] | None
    """[T] the engine's log-prob of each sampled token; None when the engine gives none."""
    finish_reason: str
    """stop (end-of-turn token), length (response budget ran out) or error."""
    prompt_text: str
    """the prompt decoded (for people; training uses prompt_ids)."""
    completion_text: str
    """the completion decoded without the end-of-turn token: what the environment parsed."""
    thought: str | None = None
    """the <think> text of an action step."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """parsed calls: name, arguments, error."""
    answer: str | None = None
    """the <answer> text, when the step gave one."""
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    """what each call returned to the agent."""
    context_tokens: int = 0
    """prompt tokens (== len(prompt_ids))."""
    tokens_after: int = 0
    """context tokens once the step's tool results were appended (action steps)."""
    violations: list[str] = field(default_factory=list)
    """format-violation kinds of this completion (see agemem.core.protocol)."""


STEP_FIELDS = fields(Step)


@dataclass
class Trajectory:
    task_id: str
    """the task this rollout played."""
    rollout_index: int
    """k in 0..K-1: its place in the task's GRPO group."""
    question: str
    """the Stage-3 question (for readers)."""
    gold_answer: str
    """the task's reference answer (for readers and rewards)."""
    steps: list[Step]
    """every LLM call, in order."""
    answer: str | None
    """the final Stage-3 answer; None when the agent never answered."""
    ended_by: EndedBy
    """why the episode ended."""
    stats: EpisodeStats
    """the environment's record of memory operations, retrievals, summaries, filters, overflow."""
    final_memory: list[dict[str, Any]] = field(default_factory=list)
    """LTM entries at the end of the episode: memory_id, content, metadata."""
    distractors: list[str] = field(default_factory=list)
    """the Stage-2 messages (shared by the task's K rollouts)."""
    limit_hits: list[dict[str, Any]] = field(default_factory=list)
    """round-limit hits: stage, turn, limit ('turn' or 'stage')."""
    error: str | None = None
    """the engine's error when ended_by == 'engine_error'."""
    reward: dict[str, float] = field(default_factory=dict)
    """reward terms, filled in by rewards/ (empty here)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """free-form: engine, seeds, timings."""

    @property
    def action_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "action"]

    def stage_steps(self, stage: int) -> list[Step]:
        return [s for s in self.steps if s.stage == stage]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view for writing at once: it shares the trajectory's lists and dicts, not copies of them
        (``dataclasses.asdict`` copied every step's token ids, a tenth of a scripted expert's rollout time)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["steps"] = [{f.name: getattr(s, f.name) for f in STEP_FIELDS} for s in self.steps]
        data["stats"] = self.stats.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        data["steps"] = [Step(**s) for s in data["steps"]]
        data["stats"] = EpisodeStats.from_json(data["stats"])
        return cls(**data)


class TrajectoryWriter:
    """Writes one JSON line per finished trajectory, flushed at once: an interrupted run keeps
    everything that finished.

    ``append=False`` (default) starts the file afresh. ``append=True`` continues it (a resumed
    run) after cutting a torn last line, so a killed writer never corrupts the next one's lines.
    """

    def __init__(self, path: str | os.PathLike[str], *, append: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append and self.path.exists():
            _drop_torn_tail(self.path)
        self._file = self.path.open("a" if append else "w", encoding="utf-8")
        self.written = 0

    def write(self, trajectory: Trajectory) -> None:
        self._file.write(json.dumps(trajectory.to_json(), ensure_ascii=False) + "\n")
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line that has no newline (its writer was killed mid-line)."""
    with path.open("rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def read_trajectories(path: str | os.PathLike[str]) -> Iterator[Trajectory]:
    """Stream trajectories from a JSONL file; a torn last line (the run was killed mid-write) is skipped."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as err:
                if not line.endswith("\n") and not handle.read(1):  # the last line, cut short
                    return
                raise ValueError(f"{path}:{number} is not valid JSON ({err}); the trajectory file is corrupt") from err
            yield Trajectory.from_json(data)

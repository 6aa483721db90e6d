"""The task record every loader produces and every episode consumes.

A :class:`Task` is one question with its Stage-1 material (``contexts``), the ground truth
for memory quality (``supporting_facts``, carrying the sentence text so a storage judge can
compare memory contents with what had to be stored, not with paragraph titles), and, for
synthetic tasks, built-in Stage-2 distractors. Tasks serialise to plain JSON dicts, and lists
of tasks to JSONL, so a person can read them and a run can be reproduced from the file.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agemem.core.configlib import ConfigError


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

"""Stream task adapters: HotpotQA, the synthetic stream and ALFWorld behind one :class:`StreamTask` interface.

QA streams (HotpotQA and synthetic):

* query: the question (the synthetic stream asks each of its questions again and again, in paraphrase);
* prompt: the question, with its paragraphs when ``stream.show_context`` (HotpotQA's distractor setting);
* execution: ``Reasoning: <the agent's <think> text>`` and ``Answer: <its answer>`` (:func:`qa_execution`; ReMem:
  the reasoning of its Think operations, then its Act's);
* strict: exact match, or token F1 ≥ ``stream.f1_threshold`` (official HotpotQA normalisation);
* ground truth: the supporting-fact sentences as reasoning and the gold answer;
* task key: the normalised question (synthetic: the question family).

ALFWorld (query: the task sentence; execution: the action trajectory; strict: won) is
:mod:`agemem.eval.stream.alfworld_task`, on the games and text engine of :mod:`agemem.tasks.alfworld`
(the ``alfworld`` extra).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agemem.core.configlib import ConfigError
from agemem.core.prompts import system_prompt, template_tools
from agemem.core.text import normalize_answer
from agemem.eval.stream.agent import Dialogue, memory_turn_message, task_message
from agemem.eval.stream.base import Attempt, Demonstration, StreamItem, StreamTask
from agemem.eval.stream.config import StreamRunConfig
from agemem.eval.stream.remem import (
    QA_ACT,
    QA_ACT_EFFECT,
    QA_INTRO,
    ReMemDialogue,
    ReMemSession,
    remem_system_prompt,
)
from agemem.rewards.judges import exact_match, f1_score

if TYPE_CHECKING:
    from agemem.eval.stream.base import MemoryTools
    from agemem.rollouts.engines.chat import ChatModel
    from agemem.rollouts.records import Task

_ANSWER_LINE = re.compile(r"(?im)^\s*answer\s*:\s*(.*)$")
SYNTHETIC_PARAPHRASES = (
    "{q}",
    "Quick question: {q}",
    "Remind me, {q}",
    "Do you happen to know this? {q}",
    "I forgot something. {q}",
    "Tell me please: {q}",
)


def qa_execution(thought: str | None, answer: str) -> str:
    """``Reasoning: <thought>`` (when there is one) and ``Answer: <answer>``, one per line."""
    reasoning = " ".join((thought or "").split())
    return f"Reasoning: {reasoning}\nAnswer: {answer}" if reasoning else f"Answer: {answer}"


def answer_of(execution: str) -> str | None:
    """The answer an execution states (its last ``Answer:`` line); None when it states none."""
    found = _ANSWER_LINE.findall(execution)
    return found[-1].strip() if found else None


@dataclass
class QAStreamTask:
    """Question answering in a stream: the agent answers each question with demonstrations in its prompt."""

    name: str
    source: list[StreamItem]
    strict_metric: str = "em"
    f1_threshold: float = 0.5
    max_steps: int = 3
    tool_format: str = "agemem"
    system_override: str = ""
    wrong_answers: list[str] = field(default_factory=list)
    """answers to draw a failed execution's answer from (other questions' answers)."""

    def items(self) -> list[StreamItem]:
        return list(self.source)

    def play(
        self,
        item: StreamItem,
        demos: Sequence[Demonstration],
        model: ChatModel,
        tools: MemoryTools | None,
        seed: int | None,
    ) -> Attempt:
        if isinstance(tools, ReMemSession):
            return self.play_remem(item, demos, model, tools, seed)
        offered = tools.offered if tools is not None else ()
        messages = [
            {"role": "system", "content": system_prompt(self.tool_format, self.system_override, offered)},  # type: ignore[arg-type]
            {"role": "user", "content": task_message(item.prompt, demos)},
        ]
        schemas = template_tools(self.tool_format, offered)  # type: ignore[arg-type]
        dialogue = Dialogue(model, messages, offered, tools, schemas, seed)
        parsed = dialogue.until_answer(self.max_steps)
        if parsed is not None and parsed.answer is not None:
            answer: str | None = parsed.answer
            execution = qa_execution(parsed.thought, parsed.answer)
        else:
            answer = None
            execution = dialogue.last_text.strip() or "(no reply)"
        if tools is not None and dialogue.error is None:
            messages.append({"role": "user", "content": memory_turn_message(execution)})
            dialogue.until_answer(self.max_steps)
        return Attempt(
            execution,
            answer,
            None,
            dialogue.calls,
            dialogue.prompt_tokens,
            dialogue.transcript,
            dialogue.error,
        )

    def play_remem(
        self,
        item: StreamItem,
        demos: Sequence[Demonstration],
        model: ChatModel,
        session: ReMemSession,
        seed: int | None,
    ) -> Attempt:
        """ReMem on one question (:meth:`ReMemDialogue.until_answer` over ``remem_max_steps`` steps): the
        execution is its Think operations' reasoning with the Act's, and the answer; without an Act, its last
        reply, as the standard agent's."""
        prompt = remem_system_prompt(QA_INTRO, QA_ACT, QA_ACT_EFFECT, self.tool_format, session.budget)
        messages = [
            {"role": "system", "content": system_prompt(self.tool_format, prompt, session.offered)},  # type: ignore[arg-type]
            {"role": "user", "content": task_message(item.prompt, demos)},
        ]
        schemas = template_tools(self.tool_format, session.offered)  # type: ignore[arg-type]
        dialogue = ReMemDialogue(model, messages, session.offered, session, schemas, seed)
        parsed = dialogue.until_answer(session.budget.max_steps)
        if parsed is not None and parsed.answer is not None:
            answer: str | None = parsed.answer
            execution = qa_execution(" ".join([*dialogue.thoughts, parsed.thought or ""]), parsed.answer)
        else:
            answer = None
            execution = dialogue.last_text.strip() or "(no reply)"
        return Attempt(
            execution, answer, None, dialogue.calls, dialogue.prompt_tokens, dialogue.transcript, dialogue.error
        )

    def strict(self, item: StreamItem, attempt: Attempt) -> float:
        if attempt.answer is None or item.answer is None:
            return 0.0
        if self.strict_metric == "em":
            return exact_match(attempt.answer, item.answer)
        return 1.0 if f1_score(attempt.answer, item.answer) >= self.f1_threshold else 0.0

    def failed_execution(self, item: StreamItem, rng: random.Random) -> str:
        """A guess with a wrong answer: an alternative of the item's own (synthetic: another value of the asked
        attribute), the opposite of a yes/no answer, or another question's answer."""
        gold = normalize_answer(item.answer or "")
        if gold in ("yes", "no"):
            return qa_execution("A guess from a similar case.", "no" if gold == "yes" else "yes")
        pool = item.metadata.get("alternatives") or self.wrong_answers
        options = sorted({a for a in pool if normalize_answer(a) != gold and normalize_answer(a)})
        wrong = rng.choice(options) if options else "unknown"
        return qa_execution("A guess from a similar case.", wrong)


# --------------------------------------------------------------------------------------------- HotpotQA


def hotpotqa_item(task: Task, show_context: bool) -> StreamItem:
    """One HotpotQA question as a stream item (see the module docstring)."""
    prompt = f"Question: {task.question}"
    if show_context:
        paragraphs = "\n".join(f"- {p.title}: {p.text}" for p in task.contexts if p.text)
        prompt += f"\n\nParagraphs:\n{paragraphs}\n\nAnswer the question from the paragraphs."
    facts = " ".join(f.text for f in task.supporting_facts if f.text)
    return StreamItem(
        id=task.id,
        query=task.question,
        prompt=prompt,
        answer=task.answer,
        task_key=normalize_answer(task.question),
        ground_truth=qa_execution(facts, task.answer),
        metadata={"type": task.metadata.get("type"), "level": task.metadata.get("level")},
    )


def hotpotqa_stream(config: StreamRunConfig) -> QAStreamTask:
    """HotpotQA questions of ``data.source`` (``data.limit`` applies first)."""
    from agemem.tasks import load_tasks

    tasks = load_tasks(config)
    if not tasks:
        raise ConfigError(f"data.source={config.data.source!r} gave no questions")
    items = [hotpotqa_item(t, config.stream.show_context) for t in tasks]
    return _qa(config, "hotpotqa", items, [t.answer for t in tasks])


# --------------------------------------------------------------------------------------------- synthetic


def synthetic_items(total: int, families: int, seed: int, show_context: bool) -> list[StreamItem]:
    """``total`` items over ``families`` questions: item i asks family ``i mod families`` in one of
    :data:`SYNTHETIC_PARAPHRASES` (drawn from a stream seeded by ``seed`` and i), so each question recurs in a
    few wordings.

    Each family is a task of :func:`agemem.tasks.synthetic.generate_synthetic_tasks` (seed ``seed``); the first
    eight families ask eight different attributes (city, job, pet, ...), so their questions differ in wording and
    not only in the person's name. The prompt carries the task's facts when ``show_context``.
    """
    from agemem.tasks.synthetic import BY_NAME, generate_synthetic_tasks

    pool = generate_synthetic_tasks(max(4 * families, 32), seed=seed)
    by_attribute: dict[str, list[Task]] = {}
    for task in pool:
        by_attribute.setdefault(task.metadata["attribute"], []).append(task)
    chosen: list[Task] = []
    round_index = 0
    while len(chosen) < families:  # one task per attribute, then a second round, ...
        added = False
        for tasks in by_attribute.values():
            if round_index < len(tasks) and len(chosen) < families:
                chosen.append(tasks[round_index])
                added = True
        if not added:
            raise ConfigError(f"stream.synthetic_families={families} is more than the generator can draw; lower it")
        round_index += 1
    items = []
    for i in range(total):
        family = i % families
        task = chosen[family]
        rng = random.Random(f"stream-synthetic/{seed}/{i}")
        query = rng.choice(SYNTHETIC_PARAPHRASES).format(q=task.question)
        prompt = f"Question: {query}"
        if show_context:
            facts = "\n".join(f"- {p.text}" for p in task.contexts)
            prompt += f"\n\nFacts:\n{facts}"
        attribute = BY_NAME[task.metadata["attribute"]]
        items.append(
            StreamItem(
                id=f"synthetic-stream-{seed}-{i}",
                query=query,
                prompt=prompt,
                answer=task.answer,
                task_key=f"family-{family}",
                ground_truth=qa_execution(task.supporting_facts[0].text, task.answer),
                metadata={
                    "family": family,
                    "attribute": attribute.name,
                    "alternatives": [v for v in attribute.values if v != task.answer],
                },
            )
        )
    return items


def synthetic_stream(config: StreamRunConfig) -> QAStreamTask:
    stream = config.stream
    items = synthetic_items(
        stream.synthetic_tasks, stream.synthetic_families, config.data.synthetic.seed, stream.show_context
    )
    return _qa(config, "synthetic", items, sorted({i.answer or "" for i in items}))


def _qa(config: StreamRunConfig, name: str, items: list[StreamItem], answers: list[str]) -> QAStreamTask:
    stream = config.stream
    return QAStreamTask(
        name,
        items,
        stream.strict_metric,
        stream.f1_threshold,
        stream.max_steps,
        config.env.tool_format,
        config.env.system_prompt,
        answers,
    )


# --------------------------------------------------------------------------------------------- build


def build_task(config: StreamRunConfig) -> StreamTask:
    """The adapter named by ``stream.task``."""
    if config.stream.task == "hotpotqa":
        return hotpotqa_stream(config)
    if config.stream.task == "synthetic":
        return synthetic_stream(config)
    from agemem.eval.stream.alfworld_task import alfworld_stream

    return alfworld_stream(config)

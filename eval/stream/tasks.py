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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agemem.core.configlib import ConfigError
from agemem.core.prompts import system_prompt, template_tools
from agemem.core.text import normalize_answer
from agemem.eval.stream.agent import Dialogue, memory_turn_message, task_message
from agemem.eval.stream.base import Attempt, Demonstration, StreamTask
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
from agemem.tasks.stream import StreamItem, qa_execution

if TYPE_CHECKING:
    from agemem.eval.stream.base import MemoryTools
    from agemem.rollouts.engines.chat import ChatModel

_ANSWER_LINE = re.compile(r"(?im)^\s*answer\s*:\s*(.*)$")


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
    """The stream ``stream.task`` names: the items its environment registers (:class:`agemem.tasks.stream.StreamSpec`),
    played as questions or as games."""
    from agemem.tasks import source_of, stream_of

    name = config.stream.task
    spec = stream_of(name)
    if spec.kind == "qa":  # `--data dev.json` of a QA stream is that environment's file (hotpotqa:dev.json)
        config = replace(config, data=replace(config.data, source=source_of(name, config.data.source)))
    items = spec.items(config)
    if not items:
        raise ConfigError(f"stream.task={name!r} gave no items; check its data settings (data.source, {name}.split)")
    if spec.kind == "qa":
        return _qa(config, name, items, [item.answer or "" for item in items])
    from agemem.eval.stream.alfworld_task import game_stream

    return game_stream(config, name, items)

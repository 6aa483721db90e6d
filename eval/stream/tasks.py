"""Stream task adapters: HotpotQA, the synthetic stream and ALFWorld behind one :class:`StreamTask` interface.

QA streams (HotpotQA and synthetic):

* query: the question (the synthetic stream asks each of its questions again and again, in paraphrase);
* prompt: the question, with its paragraphs when ``stream.show_context`` (HotpotQA's distractor setting);
* execution: ``Reasoning: <the agent's <think> text>`` and ``Answer: <its answer>`` (:func:`qa_execution`; ReMem:
  the reasoning of its Think operations, then its Act's);
* strict: exact match, or token F1 ≥ ``stream.f1_threshold`` (official HotpotQA normalisation);
* ground truth: the supporting-fact sentences as reasoning and the gold answer;
* task key: the normalised question (synthetic: the question family).

Games (:class:`GameStreamTask`; ALFWorld registers its stream: query: the task sentence; execution: the action
trajectory; strict: won) play the text-game episode of :mod:`agemem.tasks.games`, ALFWorld on the games and text
engine of :mod:`agemem.tasks.alfworld` (the ``alfworld`` extra).

Every task is one episode on the environment's turn loop (:class:`~agemem.rollouts.episode.Episode`, a game's
:class:`~agemem.tasks.games.GameEpisode`) over a :class:`~agemem.core.env.MemoryEnv` whose tools run on the
stream's bank, driven one reply at a time by :class:`~agemem.rollouts.chat_driver.ChatDriver`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.core.text import normalize_answer
from agemem.eval.stream.agent import StreamPlay, memory_turn_message, play_episode, task_message
from agemem.eval.stream.base import Attempt, Demonstration, StreamTask
from agemem.eval.stream.config import StreamRunConfig
from agemem.eval.stream.remem import (
    GAME_ACT,
    GAME_ACT_EFFECT,
    QA_ACT,
    QA_ACT_EFFECT,
    QA_INTRO,
    ReMemSession,
    remem_system_prompt,
)
from agemem.rewards.judges import exact_match, f1_score
from agemem.rollouts.episode import Episode, Stages
from agemem.rollouts.records import Task
from agemem.tasks.stream import StreamItem, game_execution, qa_execution
from agemem.tasks.textgame import GameConfig, GameRef, GameSuite, TextGame

if TYPE_CHECKING:
    from agemem.core.env import MemoryEnv
    from agemem.eval.stream.base import MemoryTools
    from agemem.rollouts.engines.chat import ChatModel
    from agemem.rollouts.episode import EpisodeSetup
    from agemem.rollouts.records import Step
    from agemem.tasks.games import GameResult

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
    wrong_answers: list[str] = field(default_factory=list)
    """answers to draw a failed execution's answer from (other questions' answers)."""
    play_settings: StreamPlay = field(default_factory=StreamPlay)
    """what the episodes share (tokenizer, env and rollout settings)."""

    def items(self) -> list[StreamItem]:
        return list(self.source)

    def play(
        self,
        item: StreamItem,
        demos: Sequence[Demonstration],
        model: ChatModel,
        tools: MemoryTools,
        seed: int | None,
    ) -> Attempt:
        """One episode on the environment's turn loop: the task (demonstrations, then the prompt) is the question's
        turn, answered within ``max_steps`` replies; when the tools offer Add_memory (the policy addition) a memory
        turn follows, as its debrief (:func:`~agemem.eval.stream.agent.memory_turn_message`). ReMem: its
        operations within ``remem_max_steps`` replies, its session's status after each, no memory turn; the
        execution is its Think operations' reasoning with the Act's."""
        remem = tools if isinstance(tools, ReMemSession) else None
        env_config = self.play_settings.env_config
        if remem is not None:
            replies = remem.budget.max_steps
            prompt = remem_system_prompt(QA_INTRO, QA_ACT, QA_ACT_EFFECT, env_config.tool_format, remem.budget)
        else:  # env.system_prompt replaces the standard agent's system message ("" : the built-in one)
            replies, prompt = self.max_steps, env_config.system_prompt
        memory_turn = remem is None and "Add_memory" in tools.offered
        stages = Stages(
            [],
            [],
            task_message(item.prompt, demos),
            debrief=(lambda steps: memory_turn_message(self._execution(steps, remem))) if memory_turn else None,
            debrief_replies=self.max_steps,
        )
        task = Task(item.id, item.query, item.answer or "", [], [], dict(item.metadata))
        played = play_episode(
            self.play_settings,
            model,
            seed,
            tools,
            prompt,
            replies,
            lambda env, setup: Episode(task, [], env, setup, 0, stages=stages).play(),
        )
        steps = played.result.steps
        answered = self._answering(steps)
        return Attempt(
            self._execution(steps, remem),
            answered.answer if answered is not None else None,
            None,
            played.replies,
            played.prompt_tokens,
            played.transcript,
            played.result.error,
        )

    @staticmethod
    def _answering(steps: Sequence[Step]) -> Step | None:
        """The reply that answered the task (the memory turn's replies come after it), if one did."""
        return next((s for s in steps if s.kind == "action" and s.turn == 0 and s.answer is not None), None)

    def _execution(self, steps: Sequence[Step], remem: ReMemSession | None) -> str:
        """``Reasoning: … / Answer: …`` of the answering reply (ReMem: its Thinks' reasoning first); without an
        answer, the last reply as it was written."""
        answered = self._answering(steps)
        if answered is None or answered.answer is None:
            task_turn = [s for s in steps if s.kind == "action" and s.turn == 0]
            return (task_turn[-1].completion_text.strip() if task_turn else "") or "(no reply)"
        reasoning = " ".join([*remem.thoughts, answered.thought or ""]) if remem is not None else answered.thought
        return qa_execution(reasoning, answered.answer)

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
        answers,
        StreamPlay(config.env, config.rollout),
    )


# --------------------------------------------------------------------------------------------- games


@dataclass
class GameStreamTask:
    """A text game as a stream (TraceRetain's ALFWorld setting): each item is one game of ``suite`` (its
    ``payload``), played as ``agemem eval NAME`` plays it, in a :class:`~agemem.tasks.games.GameEpisode` (the suite's
    system prompt and command handling; at most ``max_env_steps`` commands, ``max_replies_per_step`` replies per
    command, an inadmissible command costs the step), with the retrieved records before the game's first message.

    * execution: the action trajectory, one ``> command`` line and the game's reply per environment step, then
      ``Outcome: done`` or ``Outcome: not done``;
    * strict: the game reports the task won.

    With the policy addition the agent may call Add_memory / Delete_memory between commands, and in a memory turn
    after the game (the episode's debrief). ReMem thinks and refines its memory before each command, each command
    one step with its own budgets (``stream.remem_max_steps`` replies; its session's status after each reply).
    """

    source: list[StreamItem]
    suite: GameSuite
    settings: GameConfig
    play_settings: StreamPlay = field(default_factory=StreamPlay)
    open_game: Callable[[GameRef], TextGame] | None = None
    """how a game is opened (default: the suite's)."""

    @property
    def name(self) -> str:
        return self.suite.name

    def items(self) -> list[StreamItem]:
        return list(self.source)

    def play(
        self,
        item: StreamItem,
        demos: Sequence[Demonstration],
        model: ChatModel,
        tools: MemoryTools,
        seed: int | None,
    ) -> Attempt:
        from agemem.tasks.games import GameEpisode, game_system_prompt

        remem = tools if isinstance(tools, ReMemSession) else None
        memory_turn = remem is None and "Add_memory" in tools.offered
        # ReMem's step is a command: its replies per command are its own (Think and Refine do not take the game's)
        replies = remem.budget.max_steps if remem is not None else self.settings.max_replies_per_step
        settings = replace(self.settings, max_replies_per_step=replies, debrief_replies=replies if memory_turn else 0)
        tool_format = self.play_settings.env_config.tool_format
        prompt = game_system_prompt(
            self.suite,
            () if remem else tools.offered,
            tool_format,
            max_env_steps=settings.max_env_steps,
            show_admissible=settings.show_admissible,
            debrief=memory_turn,
        )
        if remem is not None:  # the game's own description (the first paragraph); ReMem's replaces its reply format
            prompt = remem_system_prompt(
                prompt.split("\n\n", 1)[0], GAME_ACT, GAME_ACT_EFFECT, tool_format, remem.budget
            )
            remem.decision = "this command"

        def debrief(so_far: GameResult) -> str:
            outcome = "The task was completed." if so_far.won else "The task was not completed."
            return memory_turn_message(game_trajectory_text(so_far), outcome)

        def episode(env: MemoryEnv, setup: EpisodeSetup) -> Generator[Any, Any, GameResult]:
            return GameEpisode(
                self.suite,
                item.payload,
                env,
                setup,
                settings,
                open_game=self.open_game,
                first_message=lambda text: task_message(text, demos),
                debrief=debrief,
            ).play()

        played = play_episode(self.play_settings, model, seed, tools, prompt, replies, episode)
        result = played.result
        return Attempt(
            game_trajectory_text(result),
            None,
            result.won,
            played.replies,
            played.prompt_tokens,
            played.transcript,
            result.error,
        )

    def strict(self, item: StreamItem, attempt: Attempt) -> float:
        return 1.0 if attempt.won else 0.0

    def failed_execution(self, item: StreamItem, rng: random.Random) -> str:
        """A trajectory that wanders and stops at the step limit: a few visits, no success."""
        places = [item.metadata.get("receptacle") or "countertop", "drawer", "cabinet", "shelf", "table"]
        lines = []
        for _ in range(rng.randint(2, 4)):
            place = f"{rng.choice(places)} {rng.randint(1, 4)}"
            lines.append(f"> go to {place}\nYou arrive at {place}. You see nothing useful.")
        return game_execution(lines, won=False)


def game_trajectory_text(result: GameResult) -> str:
    """A game's execution: each environment step's ``> command`` (``(no command)`` when none was given) and what
    the game said, then the outcome."""
    lines = [f"> {step['command'] or '(no command)'}\n{step['observation']}" for step in result.transcript]
    return game_execution(lines, result.won)


def game_stream(config: StreamRunConfig, name: str, items: list[StreamItem]) -> GameStreamTask:
    """The game stream ``name`` over ``items`` (each a game of the suite in its ``payload``)."""
    from agemem.tasks.games import game_settings, get_suite

    suite = get_suite(name)
    return GameStreamTask(items, suite, game_settings(config, suite), StreamPlay(config.env, config.rollout))


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
    return game_stream(config, name, items)

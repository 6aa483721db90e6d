"""The three-stage AgeMem episode (paper Algorithms 1, 3, 4, 5) as straight-line code.

An episode is a generator: it yields a :class:`GenerationRequest` whenever it needs the
policy to write something and receives the :class:`Completion`; it returns the finished
:class:`Trajectory`. It never calls an engine itself, so the driver can batch the requests
of many episodes into one engine call per tick.

    Stage 1  the task's facts arrive as casual user turns; the agent may store them in LTM
    reset    STM is cleared (the system prompt stays); LTM persists
    Stage 2  distractor turns pile up in STM; the agent should filter or summarise
    Stage 3  the question joins the Stage-2 context; the agent retrieves and answers

Under ``rollout.stage_tools=paper`` each stage offers only its own tools (:data:`~agemem.core.tools.PAPER_STAGE_TOOLS`):
the system prompt is re-rendered for the set at each stage start (the first message of the context, so the
Stage-3 prompt differs from the Stage-2 context from its first tokens on) and a call outside it is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agemem.core.chat import encode_chat
from agemem.core.context import Message
from agemem.core.env import MemoryEnv, StepEvents, StepResult
from agemem.core.summarizers import LLMSummarizer, SummarizerError
from agemem.core.tools import PAPER_STAGE_TOOLS
from agemem.rollouts.config import RolloutConfig
from agemem.rollouts.engines.base import Completion
from agemem.rollouts.messages import stage1_messages
from agemem.rollouts.records import EndedBy, Step, StepKind, Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agemem.rollouts.records import Task


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    """[P] token ids to continue, rendered with the policy's chat template."""
    messages: list[dict[str, Any]]
    """the same prompt as chat messages (for engines that talk to chat endpoints)."""
    kind: StepKind
    """action (an agent step) or summary (the policy writing a Summary_context summary)."""
    tools: list[dict[str, Any]] | None = None
    """the tool schemas the prompt was rendered with (None for a summary): what a chat model is handed beside
    the messages (:class:`agemem.rollouts.chat_driver.ChatDriver`)."""


EpisodeRun = Generator[GenerationRequest, Completion, Trajectory]


@dataclass
class Stages:
    """What an episode shows in each stage (a task's registration says, ``agemem.tasks.base.TaskSpec.stages``)."""

    facts: list[str]
    """Stage-1 user turns (the material the agent may store)."""
    distractors: list[str]
    """Stage-2 user turns."""
    question: str
    """the Stage-3 user turn."""
    debrief: Callable[[list[Step]], str] | None = None
    """the user turn after the question's turn, written from the steps so far (the streaming benchmark's memory
    turn: keep what this task taught, with the memory tools); None: the episode ends with the question's turn."""
    debrief_replies: int = 0
    """replies the agent has in the debrief turn (it ends at an ``<answer>``)."""


def qa_stages(task: Task, distractors: list[str], config: RolloutConfig) -> Stages:
    """The three stages of a question-answering task: its paragraphs, its distractors, its question."""
    facts = stage1_messages(task, config.stage1_mode, config.paragraphs_per_turn) if config.stage1 else []
    return Stages(facts, list(distractors), task.question)


def known_texts(task: Task, distractors: list[str], config: RolloutConfig) -> list[str]:
    """Texts an episode of ``task`` is likely to embed, known before it starts: its Stage-1 messages and their
    paragraphs (what Add_memory stores), its distractors and its question (what Retrieve_memory asks)."""
    stages = qa_stages(task, distractors, config)
    return [*stages.facts, *(p.text for p in task.contexts if p.text), *stages.distractors, stages.question]


@dataclass
class EpisodeSetup:
    """What every episode of a run shares."""

    tokenizer: PreTrainedTokenizerBase
    stop_token_ids: tuple[int, ...]
    """end-of-turn ids, stripped from completions before the environment parses them."""
    config: RolloutConfig
    policy_summaries: bool
    """Summary_context text is written by the policy through the driver (summarizer.backend=policy)."""


class EpisodeOverError(Exception):
    def __init__(self, reason: EndedBy, error: str | None = None):
        super().__init__(reason)
        self.reason, self.error = reason, error


class Episode:
    """One rollout of one task: ``trajectory = yield from Episode(...).play()``."""

    def __init__(
        self,
        task: Task,
        distractors: list[str],
        env: MemoryEnv,
        setup: EpisodeSetup,
        rollout_index: int,
        stages: Stages | None = None,
    ):
        self.task = task
        self.distractors = distractors
        self.stages = stages
        """what each stage shows; None: :func:`qa_stages` of the task."""
        self.env = env
        self.setup = setup
        self.config = setup.config
        self.rollout_index = rollout_index
        self.steps: list[Step] = []
        self.limit_hits: list[dict[str, Any]] = []
        self._stage_steps = {1: 0, 2: 0, 3: 0}

    def play(self) -> EpisodeRun:
        env, config = self.env, self.config
        answer, ended_by, error = None, "round_limit", None
        try:
            # Stage 1: LTM construction (skipped by the no-memory baseline, rollout.stage1=false).
            stages = self.stages or qa_stages(self.task, self.distractors, config)
            yield from self.take_in(stages.facts)
            # Reset between Stage 1 and Stage 2: STM only (the full-context baseline keeps it).
            if not config.keep_stage1_context:
                env.reset_context()
            # Stage 2: STM under distractors.
            self._enter_stage(2)
            for turn, text in enumerate(stages.distractors):
                env.add_user(text, kind="distractor")
                yield from self._answer_turn(2, turn)
            # Stage 3: the question, appended to the Stage-2 context.
            self._enter_stage(3)
            env.add_user(stages.question, question=True)
            answer = yield from self._answer_turn(3, 0)
            ended_by = "answer" if answer is not None else "round_limit"
            if stages.debrief is not None:
                yield from self._debrief(stages.debrief(self.steps), stages.debrief_replies, turn=1)
        except EpisodeOverError as over:
            ended_by, error = over.reason, over.error
        return self._trajectory(answer, ended_by, error)

    def take_in(self, facts: list[str]) -> Generator[GenerationRequest, Completion, None]:
        """Stage 1: ``facts`` arrive as user turns, each answered by the agent (which may store it), or only handed
        to a memory system that writes memory itself (``rollout.stage1_agent=false``). No reset, no question: a
        caller that feeds a long conversation session by session (``agemem eval locomo``) calls it once a session
        on one environment. Raises :class:`EpisodeOverError` when a prompt passes ``rollout.max_prompt_tokens`` or
        the engine fails."""
        env, config = self.env, self.config
        self._enter_stage(1)
        for turn, text in enumerate(facts):
            env.add_user(text, kind="fact")
            if not config.stage1_agent:
                continue  # a memory system took the turn in (env.add_user); the agent has no tools to act with
            if config.stage1_mode == "turns" and config.introspective_top_k:
                env.introspect(text, config.introspective_top_k)
            yield from self._answer_turn(1, turn)

    def _enter_stage(self, stage: int) -> None:
        """Start ``stage``; under rollout.stage_tools=paper, offer only its tools from now on."""
        self.env.set_stage(stage)
        if self.config.stage_tools == "paper":
            self.env.offer(PAPER_STAGE_TOOLS[stage], where=f"in Stage {stage}")

    # ------------------------------------------------------------ one turn
    def _answer_turn(self, stage: int, turn: int) -> Generator[GenerationRequest, Completion, str | None]:
        """Agent steps replying to the latest user message until an <answer> or a round limit."""
        stage_budget = {1: self.config.stage1_max_steps, 2: self.config.stage2_max_steps}.get(
            stage, self.config.stage3_max_steps
        )
        turn_budget = self.config.stage3_max_steps if stage == 3 else self.config.max_steps_per_turn
        for _ in range(turn_budget):
            if self._stage_steps[stage] >= stage_budget:
                self.limit_hits.append({"stage": stage, "turn": turn, "limit": "stage"})
                return None
            self._stage_steps[stage] += 1
            result = yield from self._act(stage, turn)
            if result.done:
                return result.answer
        self.limit_hits.append({"stage": stage, "turn": turn, "limit": "stage" if stage == 3 else "turn"})
        return None

    def _debrief(self, text: str, replies: int, turn: int) -> Generator[GenerationRequest, Completion, None]:
        """A user turn after the task (``kind="debrief"``), then up to ``replies`` agent replies until an
        ``<answer>``: where the agent stores what the task taught it."""
        self.env.add_user(text, kind="debrief")
        for _ in range(replies):
            result = yield from self._act(self.env.stage, turn)
            if result.done:
                return

    def _act(self, stage: int, turn: int) -> Generator[GenerationRequest, Completion, StepResult]:
        self.env.rag_retrieve()  # the -RAG ablation (env.rag_top_k > 0): memories for the latest message
        messages = self.env.prompt_messages()
        prompt_ids = encode_chat(self.setup.tokenizer, messages, self.env.tools)
        self._check_prompt(prompt_ids)
        completion = yield GenerationRequest(prompt_ids, messages, "action", self.env.tools)
        step = self._record(stage, turn, "action", prompt_ids, completion)
        events = self.env.step_events(step.completion_text, prompt_tokens=len(prompt_ids))
        result = yield from self._serve_summaries(events, stage, turn)
        parsed = result.parsed
        step.thought, step.answer = parsed.thought, parsed.answer
        step.tool_calls = [{"name": c.name, "arguments": c.arguments, "error": c.error} for c in parsed.tool_calls]
        step.tool_results = [{"name": r.name, "ok": r.ok, **r.payload} for r in result.tool_results]
        step.tokens_after = result.tokens_after
        step.violations = parsed.violation_kinds()
        return result

    # ------------------------------------------------------------ summaries
    def _serve_summaries(
        self, events: StepEvents, stage: int, turn: int
    ) -> Generator[GenerationRequest, Completion, StepResult]:
        """Run the env step, answering each Summary_context request (through the policy when it summarises)."""
        try:
            request = next(events)
            while True:
                try:
                    text = yield from self._summary_text(request.messages, stage, turn)
                except SummarizerError as err:
                    request = events.throw(err)
                else:
                    request = events.send(text)
        except StopIteration as finished:
            return finished.value

    def _summary_text(
        self, span: list[Message], stage: int, turn: int
    ) -> Generator[GenerationRequest, Completion, str]:
        summarizer = self.env.resources.summarizer
        if not self.setup.policy_summaries:
            return summarizer.summarize(span)
        assert isinstance(summarizer, LLMSummarizer)
        messages = summarizer.prompt(span)
        prompt_ids = encode_chat(self.setup.tokenizer, messages)
        if self.config.max_prompt_tokens and len(prompt_ids) > self.config.max_prompt_tokens:
            raise SummarizerError(f"the span is too long to summarise ({len(prompt_ids)} prompt tokens)")
        completion = yield GenerationRequest(prompt_ids, messages, "summary")
        if completion.finish_reason == "error":
            raise SummarizerError(f"the engine failed: {completion.error}")
        step = self._record(stage, turn, "summary", prompt_ids, completion)
        return summarizer.finish(step.completion_text)

    # ------------------------------------------------------------ records
    def _check_prompt(self, prompt_ids: list[int]) -> None:
        if self.config.max_prompt_tokens and len(prompt_ids) > self.config.max_prompt_tokens:
            raise EpisodeOverError(
                "prompt_too_long",
                f"prompt of {len(prompt_ids)} tokens > max_prompt_tokens={self.config.max_prompt_tokens}",
            )

    def _record(self, stage: int, turn: int, kind: StepKind, prompt_ids: list[int], completion: Completion) -> Step:
        if completion.finish_reason == "error":
            raise EpisodeOverError("engine_error", completion.error or "the engine returned an error")
        step = Step(
            stage=stage,
            kind=kind,
            turn=turn,
            prompt_ids=list(prompt_ids),
            completion_ids=list(completion.token_ids),
            logprobs=None if completion.logprobs is None else list(completion.logprobs),
            finish_reason=completion.finish_reason,
            prompt_text=self.setup.tokenizer.decode(prompt_ids),
            completion_text=self._completion_text(completion),
            context_tokens=len(prompt_ids),
        )
        self.steps.append(step)
        return step

    def _completion_text(self, completion: Completion) -> str:
        if completion.text is not None:  # chat endpoints: their own text is the truth
            return completion.text
        ids = completion.token_ids
        if ids and ids[-1] in self.setup.stop_token_ids:
            ids = ids[:-1]
        return self.setup.tokenizer.decode(ids)

    def _trajectory(self, answer: str | None, ended_by: EndedBy, error: str | None) -> Trajectory:
        return Trajectory(
            task_id=self.task.id,
            rollout_index=self.rollout_index,
            question=self.task.question,
            gold_answer=self.task.answer,
            steps=self.steps,
            answer=answer,
            ended_by=ended_by,
            stats=self.env.stats,
            final_memory=[e.to_json() for e in self.env.ltm.entries(scope=self.env.scope)],
            distractors=list(self.distractors),
            limit_hits=self.limit_hits,
            error=error,
        )

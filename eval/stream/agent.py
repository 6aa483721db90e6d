"""The agent side of a stream: the demonstrations in its prompt, the memory tools on the stream's bank, and the
episode it plays on the environment's turn loop.

* :class:`~agemem.rollouts.engines.chat.EngineChat` (re-exported here): chat messages → one completion through any
  engine. A stream is strictly sequential (task t's memory decides what task t+1 sees), so tasks run one at a time,
  each episode driven by :class:`~agemem.rollouts.chat_driver.ChatDriver`.
* :func:`render_demonstrations`: the retrieved records as in-context demonstrations, each with its memory id.
* :class:`BankTools`: the memory tools on the stream's bank, executed by the training executor
  (:func:`agemem.core.tools.execute` over :class:`~agemem.eval.stream.bank.BankMemory`); with the ``policy``
  addition the agent gets ``Add_memory`` / ``Delete_memory`` (how a trained AgeMem checkpoint manages the
  experience memory itself), otherwise no tools.
* :class:`StreamPlay`: what the tasks' episodes share (the tokenizer, the env and rollout settings), and
  :meth:`StreamPlay.env`: a :class:`~agemem.core.env.MemoryEnv` whose tool calls run on the bank. Replies are
  parsed, tools run, results and the format feedback appended by the env, as in training and evaluation.
* :func:`play_episode`: one task's episode on that env, driven reply by reply; :func:`transcript`: every reply of an
  episode with its tool calls and their results (the step log's).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agemem.core.chat import ChatTemplateTokenCounter, load_tokenizer
from agemem.core.config import EnvConfig
from agemem.core.env import EnvResources, MemoryEnv, ReplyNote
from agemem.core.ltm import LongTermMemory
from agemem.core.memory import DEFAULT_SCOPE
from agemem.core.summarizers import ExtractiveSummarizer
from agemem.core.tools import MemoryEvent, Payload, ToolCall, execute
from agemem.eval.stream.bank import BankMemory, MemoryBank, Record
from agemem.eval.stream.base import Demonstration, MemoryTools
from agemem.rollouts.chat_driver import ChatDriver
from agemem.rollouts.config import RolloutConfig
from agemem.rollouts.engines.chat import ChatModel, ChatReply, EngineChat
from agemem.rollouts.episode import EpisodeSetup

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agemem.rollouts.records import Step

__all__ = [
    "BankTools",
    "ChatDriver",
    "ChatModel",
    "ChatReply",
    "EngineChat",
    "Played",
    "StreamPlay",
    "play_episode",
    "transcript",
]

MEMORY_TOOLS = ("Add_memory", "Delete_memory")
"""the tools of the policy addition."""


# --------------------------------------------------------------------------------------------- prompts

DEMONSTRATIONS_HEADER = (
    "Records of past tasks similar to this one, from your long-term memory (most relevant first). "
    "Use them when they help; they may contain mistakes."
)


def render_demonstrations(demos: Sequence[Demonstration]) -> str:
    """The demonstrations block of a task prompt (empty without demonstrations)."""
    if not demos:
        return ""
    blocks = [
        f"[{i}] memory_id: {d.record_id} (similarity {d.similarity:.2f})\nTask: {d.query}\nExecution: {d.execution}"
        + (f"\nFeedback: {d.feedback}" if d.feedback else "")
        for i, d in enumerate(demos, 1)
    ]
    return DEMONSTRATIONS_HEADER + "\n\n" + "\n\n".join(blocks)


def task_message(prompt: str, demos: Sequence[Demonstration]) -> str:
    """The user message of a task: the demonstrations, then the task."""
    shown = render_demonstrations(demos)
    return f"{shown}\n\nNow your task.\n{prompt}" if shown else prompt


def memory_turn_message(execution: str, outcome: str | None = None) -> str:
    """The policy addition's memory turn, after the task: what the agent did, and the tools to keep or drop it."""
    observed = f"\n{outcome}" if outcome else ""
    return (
        f"The task is over. Your execution was:\n{execution}{observed}\n\n"
        "Decide what your long-term memory should keep for later tasks. If this experience will help with similar "
        "tasks, store it with Add_memory: its content is what a later similar task will be shown as this task's "
        "execution. Remove records shown above that are wrong or misleading with Delete_memory (their memory_id). "
        "Then reply with <answer>OK</answer>."
    )


# --------------------------------------------------------------------------------------------- memory tools


@dataclass
class BankTools:
    """The memory tools on the stream's bank during one task: a :class:`~agemem.core.tools.ToolSession`.

    ``offered``: Add_memory and Delete_memory for the policy addition, none for an agent the runner manages the
    memory for. ``write(content, metadata)`` stores a record of the current task whose execution is ``content`` (the
    runner adds the noisy copies of a noisy-write stress; None where Add_memory is not offered, as in ReMem's Refine);
    ``Delete_memory`` removes a record by id when ``confirmation`` is true. Execution is the training
    environment's (same handlers, same messages); only what the agent is shown of a success is the stream's own
    (see :meth:`settle`).
    """

    bank: MemoryBank
    write: Callable[[str, dict[str, Any]], Record] | None = None
    offered: tuple[str, ...] = MEMORY_TOOLS
    scope: str = DEFAULT_SCOPE
    default_top_k: int = 3
    memory: BankMemory = field(init=False)

    def __post_init__(self) -> None:
        self.memory = BankMemory(self.bank, self.write)

    @property
    def added(self) -> list[Record]:
        """Records the agent's Add_memory calls wrote (one per call; a noisy write's copies are the runner's)."""
        return self.memory.written

    @property
    def deleted(self) -> list[Record]:
        """Records the agent's Delete_memory calls removed."""
        return self.memory.removed

    def run(self, call: ToolCall) -> dict[str, Any]:
        result = execute(self, call)
        assert not inspect.isgenerator(result), "no tool the bank offers waits for text"
        return result.payload

    def metadata_for(self, tool: str, metadata: dict[str, Any] | None, memory_type: str | None = None) -> Payload:
        """The agent's metadata as it gave it; ``memory_type`` joins it when set (a record has no stage)."""
        stored = dict(metadata or {})
        if memory_type:
            stored["memory_type"] = memory_type
        return stored

    def settle(self, event: MemoryEvent) -> Payload:
        """The stream's results, unchanged since before the executor was shared (logged transcripts and the
        policies evaluated on them saw these): a stored record without metadata, a deletion without the record."""
        result = event.result
        payload: Payload = {"ok": result.ok, "message": result.message}
        if result.ok and result.op != "delete":
            payload["memories"] = [{"memory_id": e.id, "content": e.content} for e in result.entries]
        return payload


# --------------------------------------------------------------------------------------------- the episode


@dataclass
class StreamPlay:
    """What every episode of a stream shares: how prompts are tokenised (the env measures its context with it) and
    the ``env`` / ``rollout`` settings of the run; the system prompt and the tools are each task's."""

    env_config: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    tokenizer: PreTrainedTokenizerBase | None = None
    """for models without one of their own (an :class:`EngineChat` renders with its model's); None:
    ``env.context.tokenizer``, loaded once."""

    def setup(self, model: ChatModel, replies: int) -> EpisodeSetup:
        """The episode setup for ``model``, with ``replies`` replies for the task's turn (the stream's only
        stage: ``rollout.stage3_max_steps``); no prompt cap, the engine has its own. Prompts are rendered with the
        model's tokenizer when it has one, so the engine gets the episode's ids as they are."""
        tokenizer = model.tokenizer if isinstance(model, EngineChat) else self.tokenizer
        if tokenizer is None:
            tokenizer = self.tokenizer = load_tokenizer(self.env_config.context.tokenizer)
        rollout = replace(self.rollout, stage_tools="all", stage3_max_steps=replies, max_prompt_tokens=0)
        return EpisodeSetup(tokenizer, (), rollout, policy_summaries=False)

    def env(self, tools: MemoryTools, setup: EpisodeSetup, system: str, note: ReplyNote | None = None) -> MemoryEnv:
        """A :class:`~agemem.core.env.MemoryEnv` for one task: system message ``system`` (its ``{tools}`` filled
        with the offered tools' schemas), tool calls run by ``tools`` on the bank (the env's own LTM stays empty:
        the bank is this agent's long-term memory), ``note`` after each reply (None: the format feedback)."""
        encoder = tools.bank.encoder
        config = replace(self.env_config, tools=list(tools.offered), system_prompt=system, rag_top_k=0)
        resources = EnvResources(
            config,
            encoder,
            LongTermMemory(encoder),
            ExtractiveSummarizer(config.summarizer.max_summary_chars),  # Summary_context is not a stream tool
            ChatTemplateTokenCounter(setup.tokenizer),
        )
        return MemoryEnv(resources, runner=tools, note=note)


@dataclass
class Played:
    """What one stream episode left: its result (a trajectory or a game's), its replies in the transcript's shape,
    and what the model calls cost."""

    result: Any
    transcript: list[dict[str, Any]]
    replies: int
    prompt_tokens: int


def play_episode(
    settings: StreamPlay,
    model: ChatModel,
    seed: int | None,
    tools: MemoryTools,
    system: str,
    replies: int,
    episode: Callable[[MemoryEnv, EpisodeSetup], Generator[Any, Any, Any]],
) -> Played:
    """Play one task: the env for ``tools`` (ReMem's status after each reply when ``tools`` is ReMem's session), the
    episode ``episode(env, setup)`` builds, driven one reply at a time on ``model`` under ``seed``."""
    note = getattr(tools, "note", None)  # ReMem's session; the bank tools leave the format feedback
    operations = getattr(tools, "operations", ())
    setup = settings.setup(model, replies)
    env = settings.env(tools, setup, system, note=note)
    driver = ChatDriver(model, seed, setup.tokenizer)
    result = driver.play(episode(env, setup))
    return Played(result, transcript(result.steps, operations), driver.calls, driver.prompt_tokens)


def transcript(steps: Sequence[Step], operations: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every reply of an episode: its text, its tool calls each with its result, its format violations and its
    answer; ``operations``: ReMem's operation of each reply, in order."""
    entries = []
    for position, step in enumerate(s for s in steps if s.kind == "action"):
        calls = [
            {"name": call["name"], "arguments": call["arguments"], **{k: v for k, v in result.items() if k != "name"}}
            for call, result in zip(step.tool_calls, step.tool_results, strict=True)
        ]
        entry = {
            "reply": step.completion_text,
            "tool_calls": calls,
            "violations": step.violations,
            "answer": step.answer,
        }
        if position < len(operations):
            entry["operation"] = operations[position]
        entries.append(entry)
    return entries

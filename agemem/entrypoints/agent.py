"""``MemoryAgent``: run an exported AgeMem policy as a chat agent with persistent memory.

    agent = MemoryAgent.from_pretrained("exports/agemem-7b", memory="memory.sqlite")
    reply = agent.chat("Remember that my sister lives in Oslo.")
    reply.text, [event.name for step in reply.steps for event in step.tool_events]

Each user message is one turn: the policy sees the short-term context (system prompt, the conversation,
tool results) and acts until it answers, up to ``max_steps_per_turn`` replies. Its tool calls run in
the same :class:`~agemem.core.env.MemoryEnv` it was trained in:

* long-term memory is a :class:`~agemem.core.memory_store.SQLiteLongTermMemory` file (every change committed
  before the call returns), so what it stores survives restarts; ``memory=None`` keeps it in RAM;
* short-term memory is the context, managed by the policy with ``Summary_context`` / ``Filter_context``;
  when the context still outgrows ``env.context.max_context_tokens``, the rounds before the current one
  are summarised (with the env's summarizer: by default the policy itself) before the next reply.

Malformed replies are never an exception: the policy gets the environment's format feedback and tries
again within its step budget. A failing model or endpoint raises :class:`AgentError` with the cause.
The policy runs locally with transformers, or on an OpenAI-compatible endpoint such as
``vllm serve <export dir>`` (prompts are rendered here with the export's chat template).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agemem
from agemem.core.configlib import ConfigError, from_dict, to_dict, validate_tree

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from agemem.core.config import EnvConfig
    from agemem.core.encoders import Encoder
    from agemem.core.env import RetrievalRecord, StepResult
    from agemem.core.ltm import MemoryEntry
    from agemem.rollouts.engines.base import SamplingParams
    from agemem.rollouts.engines.chat import ChatModel, ChatReply
    from agemem.tasks.config import TaskRunConfig

EXPORT_FORMAT = "agemem-export/1"
"""``format`` of ``agemem.json``: bumped when the agent settings change incompatibly."""
AGENT_FILE = "agemem.json"
"""the agent settings file of an export directory."""
DEFAULT_MEMORY = "memory.sqlite"
"""the LTM file :meth:`MemoryAgent.from_pretrained` opens when none is named."""
_NO_ANSWER = (
    "(no answer: the step budget ran out; ask again, or raise it: agemem chat --max-steps N, "
    "MemoryAgent(max_steps_per_turn=N))"
)


class AgentError(RuntimeError):
    """The policy could not be run: the model or endpoint failed."""


@dataclass
class ToolEvent:
    name: str
    arguments: dict[str, Any]
    ok: bool
    result: dict[str, Any]
    """the payload the policy saw (ok, message, tool-specific fields)."""


@dataclass
class AgentStep:
    """One reply of the policy within a turn."""

    text: str
    """the raw reply."""
    thought: str | None
    tool_events: list[ToolEvent] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """format problems the environment reported back (malformed JSON, no answer and no call, ...)."""
    answer: str | None = None
    automatic: bool = False
    """not a reply: memories the environment showed the policy before it acted (introspection, RAG)."""


@dataclass
class AgentReply:
    answer: str | None
    """the policy's answer; None when it used up its steps without one."""
    steps: list[AgentStep]
    context_tokens: int
    """short-term context size after the turn (chat template included)."""

    @property
    def text(self) -> str:
        return self.answer if self.answer is not None else _NO_ANSWER


class MemoryAgent:
    """A chat agent: the policy, the memory environment it was trained in, and a persistent LTM.

    ``settings`` is an export's ``agemem.json`` (:func:`agemem.entrypoints.export.agent_settings`); ``chat`` turns chat
    messages into one reply; ``user`` names the LTM scope (one memory bank per user in one file).
    ``on_step`` is called after every reply of the policy (the chat command prints tool calls with it).
    """

    def __init__(
        self,
        chat: ChatModel,
        tokenizer: PreTrainedTokenizerBase,
        settings: dict[str, Any],
        *,
        memory: str | Path | None = DEFAULT_MEMORY,
        encoder: Encoder | None = None,
        user: str = "default",
        max_steps_per_turn: int | None = None,
        on_step: Callable[[AgentStep], None] | None = None,
        seed: int = 0,
    ):
        from agemem.core.chat import ChatTemplateTokenCounter
        from agemem.core.config import EnvConfig
        from agemem.core.encoders import build_encoder
        from agemem.core.env import EnvResources, MemoryEnv
        from agemem.core.memory_store import open_memory
        from agemem.core.summarizers import build_summarizer

        self.chat_model = chat
        self.settings = settings
        env_config = from_dict(EnvConfig, settings["env"], prefix="env.")
        validate_tree(env_config, "env.")
        self.env_config: EnvConfig = env_config
        self.max_steps_per_turn = max_steps_per_turn or int(settings.get("max_steps_per_turn", 4))
        if self.max_steps_per_turn < 1:
            raise ValueError(f"max_steps_per_turn={self.max_steps_per_turn} must be >= 1")
        self.introspective_top_k = int(settings.get("introspective_top_k", 0))
        self.on_step = on_step
        self.seed = seed
        self._calls = 0
        encoder = encoder or build_encoder(env_config.encoder)
        ltm_settings = env_config.ltm
        self.ltm = open_memory(
            memory,
            encoder,
            max_top_k=ltm_settings.max_top_k,
            max_entry_chars=ltm_settings.max_entry_chars,
            id_style=ltm_settings.id_style,
        )
        summarizer = build_summarizer(env_config.summarizer, policy_generate=self._policy_summary)
        resources = EnvResources(env_config, encoder, self.ltm, summarizer, ChatTemplateTokenCounter(tokenizer))
        self._new_env = lambda: MemoryEnv(resources, scope=user)
        self.env = self._new_env()

    # ------------------------------------------------------------------------------------ constructors
    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        *,
        endpoint: str | None = None,
        served_model: str | None = None,
        api: str = "completions",
        device: str = "auto",
        temperature: float | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> MemoryAgent:
        """The agent of an ``agemem export`` directory: the model loaded with transformers on ``device``, or,
        with ``endpoint`` (an OpenAI-compatible API root such as ``http://localhost:8000/v1``), served there as
        ``served_model`` (default: the directory path, the name ``vllm serve <dir>`` gives it)."""
        from agemem.core.chat import load_tokenizer

        directory = Path(directory).expanduser()
        settings = load_agent_settings(directory)
        tokenizer = load_tokenizer(str(directory))
        if endpoint is not None:
            from agemem.rollouts.engines.openai_engine import OpenAIEngine

            engine = OpenAIEngine(endpoint, served_model or str(directory), tokenizer, api=api, concurrency=1)  # type: ignore[arg-type]
        else:
            from agemem.rollouts.engines.transformers_engine import TransformersEngine

            engine = TransformersEngine(load_exported_model(directory, device), tokenizer, batch_size=1)
        return cls._over_engine(engine, tokenizer, settings, temperature, max_tokens, **kwargs)

    @classmethod
    def from_loaded(
        cls,
        directory: str | Path,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> MemoryAgent:
        """The agent of an export directory's settings over a model already in memory."""
        from agemem.rollouts.engines.transformers_engine import TransformersEngine

        settings = load_agent_settings(directory)
        engine = TransformersEngine(model, tokenizer, batch_size=1)
        return cls._over_engine(engine, tokenizer, settings, temperature, max_tokens, **kwargs)

    @classmethod
    def _over_engine(cls, engine, tokenizer, settings, temperature, max_tokens, **kwargs: Any) -> MemoryAgent:
        from agemem.rollouts.engines.chat import EngineChat

        sampling = agent_sampling(settings, temperature, max_tokens)
        return cls(EngineChat(engine, tokenizer, sampling), tokenizer, settings, **kwargs)

    # ------------------------------------------------------------------------------------ conversation
    def chat(self, message: str) -> AgentReply:
        """One user turn: the policy acts (tool calls run as it makes them) until it answers."""
        from agemem.core.env import drive_step

        if not isinstance(message, str) or not message.strip():
            raise ValueError("message must be a non-empty string")
        self.env.add_user(message)
        steps: list[AgentStep] = []
        if self.introspective_top_k:  # what memory holds about the message, shown before the policy acts
            self._report(steps, _recall_step(self.env.introspect(message, self.introspective_top_k)))
        for _ in range(self.max_steps_per_turn):
            self._fit_context()
            # an export trained with env.rag_top_k > 0 is shown memories before every reply
            self._report(steps, _recall_step(self.env.rag_retrieve()))
            reply = self._reply(self.env.prompt_messages(), self.env.tools)
            # the prompt's length is already known: the env need not render the context once more to count it
            events = self.env.step_events(reply.text, reply.prompt_tokens or None)
            result = drive_step(events, self.env.resources.summarizer.summarize)
            self._report(steps, _agent_step(reply.text, result))
            if result.done:
                return AgentReply(result.answer, steps, self.env.context_tokens())
        return AgentReply(None, steps, self.env.context_tokens())

    def new_conversation(self) -> None:
        """Forget the short-term context (a fresh conversation); long-term memory stays."""
        self.env = self._new_env()

    def memories(self) -> list[MemoryEntry]:
        """The user's long-term memories, oldest first."""
        return self.ltm.entries(scope=self.env.scope)

    def close(self) -> None:
        """Release the memory file (everything stored is already on disk)."""
        close = getattr(self.ltm, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> MemoryAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ internals
    def _report(self, steps: list[AgentStep], step: AgentStep | None) -> None:
        if step is None:
            return
        steps.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def _reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> ChatReply:
        from agemem.rollouts.engines.base import derive_seed

        self._calls += 1
        reply = self.chat_model(messages, tools, derive_seed(self.seed, self._calls))
        if reply.error is not None:
            raise AgentError(f"the policy could not reply: {reply.error}")
        return reply

    def _policy_summary(self, messages: list[dict[str, str]]) -> str:
        """``summarizer.backend=policy``: the policy writes its own summaries, as in training."""
        return self._reply(messages, None).text

    def _fit_context(self) -> None:
        """Keep the context within ``env.context.max_context_tokens``: summarise the rounds before the latest."""
        from agemem.core.summarizers import SummarizerError

        context = self.env.context
        if self.env.context_tokens() <= self.env_config.context.max_context_tokens:
            return
        latest = max((m.round for m in context.messages), default=0)
        older = [m for m in context.eligible() if m.round < latest]
        if not older:
            return  # one round alone is over budget: nothing older to fold (the env records the overflow)
        try:
            text = self.env.resources.summarizer.summarize(older)
        except (SummarizerError, AgentError) as err:
            text = f"(earlier conversation dropped: it could not be summarised: {err})"
        context.replace_with_summary(older, text)


def agent_sampling(settings: dict[str, Any], temperature: float | None, max_tokens: int | None) -> SamplingParams:
    """The export's trained sampling settings, with the caller's temperature and reply length."""
    from agemem.rollouts.build import sampling_params
    from agemem.rollouts.config import SamplingConfig

    config = from_dict(SamplingConfig, settings.get("sampling", {}), prefix="sampling.")
    if temperature is not None:
        config = dataclasses.replace(config, temperature=temperature)
    if max_tokens is not None:
        config = dataclasses.replace(config, max_tokens=max_tokens)
    validate_tree(config, "sampling.")
    return sampling_params(config)


def load_exported_model(directory: Path, device: str = "auto") -> PreTrainedModel:
    """The export's weights with plain transformers; an unmerged ``adapter/`` is applied and merged for speed."""
    from transformers import AutoModelForCausalLM

    from agemem.rollouts.policy import resolve_device

    model = AutoModelForCausalLM.from_pretrained(directory, dtype="auto")
    if (directory / "adapter" / "adapter_config.json").is_file():
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, directory / "adapter").merge_and_unload()
    return model.to(resolve_device(device)).eval()


def _recall_step(record: RetrievalRecord | None) -> AgentStep | None:
    """Memories the environment retrieved for the policy, as one automatic step (None when nothing was shown)."""
    if record is None:
        return None
    memories = [
        {"memory_id": i, "content": c, "score": round(s, 4)}
        for i, c, s in zip(record.memory_ids, record.contents, record.scores)
    ]
    count = f"{len(memories)} memor{'y' if len(memories) == 1 else 'ies'}"
    payload = {"ok": True, "message": f"{count} shown before the reply", "memories": memories}
    event = ToolEvent("Retrieve_memory", {"query": record.query, "top_k": record.top_k}, True, payload)
    return AgentStep("", None, [event], automatic=True)


def _agent_step(text: str, result: StepResult) -> AgentStep:
    parsed = result.parsed
    events = [
        ToolEvent(call.name, dict(call.arguments), tool.ok, tool.payload)
        for call, tool in zip(parsed.tool_calls, result.tool_results, strict=False)
    ]
    return AgentStep(text, parsed.thought, events, [v.detail or v.kind for v in parsed.violations], result.answer)


# --------------------------------------------------------------------------------------------- agemem.json


def agent_settings(config: TaskRunConfig, source: dict[str, Any]) -> dict[str, Any]:
    """The content of ``agemem.json``: how to run the policy as it was trained."""
    env = to_dict(config.env)
    env["context"]["tokenizer"] = ""  # the export's own tokenizer counts the context
    return {
        "format": EXPORT_FORMAT,
        "agemem_version": agemem.__version__,
        "env": env,
        "sampling": to_dict(config.sampling),
        "max_steps_per_turn": max(config.rollout.max_steps_per_turn, config.rollout.stage3_max_steps),
        # memories shown for each incoming message, as Stage 1 showed them in training (0: off)
        "introspective_top_k": config.rollout.introspective_top_k if config.rollout.stage1_mode == "turns" else 0,
        "source": source,
    }


def load_agent_settings(directory: str | Path) -> dict[str, Any]:
    """``agemem.json`` of an exported directory, checked."""
    path = Path(directory) / AGENT_FILE
    if not path.is_file():
        raise ConfigError(
            f"{str(directory)!r} has no {AGENT_FILE}: it is not an AgeMem export; run `agemem export --checkpoint "
            "<run> --out <dir>` first (a plain model directory lacks the tools, prompt and env settings)"
        )
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ConfigError(f"{path} is not valid JSON ({err}); export the checkpoint again") from err
    if data.get("format") != EXPORT_FORMAT:
        raise ConfigError(f"{path} has format {data.get('format')!r}; this agemem reads {EXPORT_FORMAT!r}")
    return data

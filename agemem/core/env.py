"""MemoryEnv: LTM + STM + the memory tools behind one ``step(model_text)``.

The tools run through the one executor of :mod:`agemem.core.tools`; the env is its :class:`~agemem.core.tools.
ContextSession`: it stamps what an Add stores (stage, source), books every verb in :class:`EpisodeStats`, and owns
the short-term context the Summary_context / Filter_context handlers act on.

One env is one episode's view. The heavy, shareable parts (encoder, tokenizer, the LTM
store, the summarizer) live in :class:`EnvResources` and are built once; many envs share
them, each with its own LTM ``scope`` (an independent memory bank).
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from agemem.core.chat import ChatTemplateTokenCounter, TokenCounter, load_tokenizer
from agemem.core.config import EnvConfig
from agemem.core.context import Message, ShortTermContext, Summarizer
from agemem.core.encoders import Encoder, build_encoder
from agemem.core.ltm import DEFAULT_SCOPE, LongTermMemory, MemoryResult
from agemem.core.memory import COST_KEYS, MemoryStore, ObservingMemory, cost_delta
from agemem.core.prompts import system_prompt, template_tools
from agemem.core.protocol import BAD_ARGUMENTS, UNKNOWN_TOOL, ParsedResponse, Violation, parse_response
from agemem.core.summarizers import ChatGenerate, SummarizerError, build_summarizer
from agemem.core.tools import NAME_ALIASES, TOOLS, MemoryEvent, Payload, ToolCall, ToolResult, execute

__all__ = [
    "ENV_OWNED_KEYS",
    "FORMAT_HINT",
    "EnvResources",
    "EpisodeStats",
    "FilterRecord",
    "MemoryEnv",
    "MemoryOpRecord",
    "ReplyNote",
    "RetrievalRecord",
    "StepEvents",
    "StepRecord",
    "StepResult",
    "SummaryRecord",
    "SummaryRequest",
    "ToolResult",
    "ToolRunner",
    "drive_step",
    "feedback_violations",
    "format_feedback",
    "message_origin",
]

# Per-call problems already reach the agent as that call's error result; the rest get one
# format-feedback message.
_CALL_LEVEL = (UNKNOWN_TOOL, BAD_ARGUMENTS)
ENV_OWNED_KEYS = ("stage", "source")
FORMAT_HINT = (
    'Reply with <think>…</think> then <tool_call>[{"name": …, "arguments": {…}}]</tool_call> or <answer>…</answer>.'
)


@dataclass
class MemoryOpRecord:
    op: str
    """add, update or delete."""
    stage: int
    step: int
    ok: bool
    memory_id: str | None
    content: str
    """the new content (add/update) or the deleted content; the attempted content when not ok."""
    previous_content: str | None = None
    """content before an update."""
    error: str | None = None


@dataclass
class RetrievalRecord:
    stage: int
    step: int
    query: str
    top_k: int
    memory_ids: list[str]
    contents: list[str]
    scores: list[float]


@dataclass
class SummaryRecord:
    stage: int
    step: int
    span: str
    replaced_contents: list[str]
    summary: str
    replaced_origins: list[str] = field(default_factory=list)
    """where each replaced message came from (:func:`message_origin`)."""
    tokens_before: int | None = None
    """context tokens just before the summary replaced the span (None: not measured, e.g. an older record)."""
    tokens_after: int | None = None
    """context tokens just after (the call's own result not yet appended): the summary shortened the context when
    this is below ``tokens_before``."""


@dataclass
class FilterRecord:
    stage: int
    step: int
    criteria: str
    removed_contents: list[str]
    similarities: list[float]
    removed_origins: list[str] = field(default_factory=list)
    """where each removed message came from (:func:`message_origin`)."""
    tokens_before: int | None = None
    """context tokens just before the filter removed anything (None: not measured, e.g. an older record)."""
    tokens_after: int | None = None
    """context tokens just after (the call's own result not yet appended)."""


@dataclass
class StepRecord:
    stage: int
    step: int
    prompt_tokens: int
    """context tokens the model saw when it produced this step (chat template included)."""
    tokens_after: int
    """context tokens after the step's tool results were appended."""
    tool_calls: list[str]
    failed_calls: list[str]
    violations: list[str]
    answered: bool


@dataclass
class EpisodeStats:
    """Everything later reward terms need to know about what the agent did."""

    memory_ops: list[MemoryOpRecord] = field(default_factory=list)
    retrievals: list[RetrievalRecord] = field(default_factory=list)
    """Retrieve_memory calls the agent made."""
    introspections: list[RetrievalRecord] = field(default_factory=list)
    """retrievals made for the agent: before it answered an incoming message (Stage-1 turns mode), and before
    every step with env.rag_top_k (the -RAG ablation)."""
    summaries: list[SummaryRecord] = field(default_factory=list)
    filters: list[FilterRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    tool_counts: Counter[str] = field(default_factory=Counter)
    overflow: bool = False
    """the context exceeded max_context_tokens at some point (a prompt, or after a step's tool results)."""
    first_overflow_step: int | None = None
    """the step during which the context first exceeded the budget."""
    overflow_steps: list[int] = field(default_factory=list)
    """steps whose prompt (what the model saw) exceeded the budget."""
    max_context_tokens: int = 0
    resets: list[int] = field(default_factory=list)
    """the step count at each reset of the short-term context (``reset_context``): a Summary/Filter at a step
    <= a reset's was thrown away by it."""
    prompt_context: list[dict[str, Any]] | None = None
    """the context messages (system prompt excluded: role, kind, name, content) the agent saw at its latest step;
    at the episode's end, those of the step the answer-time terms judge (the answering step). None: not recorded."""
    summary_failures: int = 0
    """Summary_context calls whose summariser failed (an endpoint down or an empty summary): the agent saw a
    tool error, and training counts them (``episode/summary_failures``)."""
    memory_system_cost: dict[str, float] = field(default_factory=dict)
    """what an external memory system (the baseline variants) spent on this episode: LLM calls, prompt and
    completion tokens, seconds (:data:`agemem.core.memory.COST_KEYS`); empty when the agent manages memory."""

    def ops(self, op: str, stage: int | None = None, ok: bool | None = True) -> list[MemoryOpRecord]:
        return [
            r
            for r in self.memory_ops
            if r.op == op and (stage is None or r.stage == stage) and (ok is None or r.ok == ok)
        ]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tool_counts"] = dict(self.tool_counts)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeStats:
        """Inverse of :meth:`to_json` (trajectories read back from JSONL)."""
        records = {
            "memory_ops": MemoryOpRecord,
            "retrievals": RetrievalRecord,
            "introspections": RetrievalRecord,
            "summaries": SummaryRecord,
            "filters": FilterRecord,
            "steps": StepRecord,
        }
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name in records:
                value = [records[f.name](**item) for item in value]
            elif f.name == "tool_counts":
                value = Counter(value)
            kwargs[f.name] = value
        return cls(**kwargs)


@dataclass
class StepResult:
    parsed: ParsedResponse
    tool_results: list[ToolResult]
    done: bool
    """an answer was given: the turn (and in Stage 3 the episode) is over."""
    answer: str | None
    prompt_tokens: int
    tokens_after: int


@dataclass
class SummaryRequest:
    """Yielded by :meth:`MemoryEnv.step_events` when Summary_context needs text for ``messages``.

    The caller sends back the summary text, or throws :class:`SummarizerError` into the
    generator; the rollout driver uses this to batch policy-written summaries with the
    other episodes' generation requests.
    """

    messages: list[Message]


StepEvents = Generator[SummaryRequest, str, StepResult]


class ToolRunner(Protocol):
    """Runs the agent's tool calls on a memory of its own instead of the env's executor on the LTM: the streaming
    benchmark's tools on its experience bank (``agemem.eval.stream.agent.BankTools``, ReMem's Refine)."""

    offered: tuple[str, ...]
    """the tools the agent may call, in the order its prompt lists them."""

    def run(self, call: ToolCall) -> Payload:
        """Execute one parsed call; the result has the executor's shape (``ok``, ``message``, ...)."""
        ...


class ReplyNote(Protocol):
    """What the agent is told after a reply besides its tool results, in place of the format feedback (ReMem's
    status after every operation): the tool message's text, or None for nothing."""

    def __call__(self, parsed: ParsedResponse) -> str | None: ...


def drive_step(events: StepEvents, summarize: Callable[[list[Message]], str]) -> StepResult:
    """Run a :meth:`MemoryEnv.step_events` generator to the end, answering summary requests inline."""
    try:
        request = next(events)
        while True:
            try:
                text = summarize(request.messages)
            except Exception as err:  # the env turns SummarizerError into a tool error
                request = events.throw(err)
            else:
                request = events.send(text)
    except StopIteration as finished:
        return finished.value


@dataclass
class EnvResources:
    """The shareable parts of an environment, built once per process."""

    config: EnvConfig
    encoder: Encoder
    ltm: LongTermMemory
    summarizer: Summarizer
    token_counter: TokenCounter

    @classmethod
    def build(
        cls,
        config: EnvConfig,
        *,
        policy_generate: ChatGenerate | None = None,
        encoder: Encoder | None = None,
        tokenizer: Any = None,
    ) -> EnvResources:
        encoder = encoder or build_encoder(config.encoder)
        tokenizer = tokenizer or load_tokenizer(config.context.tokenizer)
        ltm = LongTermMemory(
            encoder,
            max_top_k=config.ltm.max_top_k,
            max_entry_chars=config.ltm.max_entry_chars,
            id_style=config.ltm.id_style,
        )
        return cls(
            config,
            encoder,
            ltm,
            build_summarizer(config.summarizer, policy_generate),
            ChatTemplateTokenCounter(tokenizer),
        )


class MemoryEnv:
    def __init__(
        self,
        resources: EnvResources,
        *,
        scope: str = DEFAULT_SCOPE,
        runner: ToolRunner | None = None,
        note: ReplyNote | None = None,
    ):
        self.resources = resources
        self.config = resources.config
        self.ltm = resources.ltm
        self.scope = scope
        self.runner = runner
        """who runs the tool calls: None, the env itself on the LTM (training, evaluation); a
        :class:`ToolRunner` on a memory of its own (the streaming benchmark), which also says what is offered."""
        self.note = note
        """what follows a reply besides its tool results: None, the format feedback (:func:`format_feedback`)
        when the reply broke the format without answering; a :class:`ReplyNote` (ReMem's status)."""
        self.offered = runner.offered if runner else tuple(name for name in TOOLS if name in self.config.tools)
        """the tools this episode's agent may call (env.tools, in canonical order; a runner's own)."""
        self.tools = template_tools(self.config.tool_format, self.offered)
        prompt = system_prompt(
            self.config.tool_format, self.config.system_prompt, self.offered, auto_retrieval=self.config.rag_top_k > 0
        )
        self.context = ShortTermContext(prompt)
        self.stage = 1
        self.stats = EpisodeStats()
        self._step = 0
        self._last_rag: tuple[Message, tuple[str, ...]] | None = None
        self.task_query: str | None = None
        """what the task is about now, as the episode says it (a game: its goal and latest observation); the
        retrieval before each step searches with it under ``env.rag_query=task``. None: the latest user message."""
        self._withheld: tuple[tuple[str, ...], str] | None = None
        """(env.tools not offered now, where) while :meth:`offer` holds a stage's set; None: all of env.tools."""

    @property
    def memory(self) -> MemoryStore:
        """The LTM the memory tools act on (a :class:`~agemem.core.tools.ToolSession`'s store)."""
        return self.ltm

    @property
    def default_top_k(self) -> int:
        return self.config.ltm.default_top_k

    # ----------------------------------------------------------- episode flow
    def set_stage(self, stage: int) -> None:
        if stage not in (1, 2, 3):
            raise ValueError(f"stage must be 1, 2 or 3, got {stage}")
        self.stage = stage

    def reset_context(self) -> None:
        """Clear STM except the system prompt; LTM persists (between Stage 1 and Stage 2)."""
        self.context.reset()
        self.stats.resets.append(self._step)

    def offer(self, tools: tuple[str, ...] | None, *, where: str = "") -> None:
        """Offer only ``tools`` (those of env.tools among them) from now on; None: all of env.tools again.

        ``rollout.stage_tools=paper`` calls it at each stage start. The system prompt (the context's first message)
        and the chat template's tools are re-rendered for the set, and the built-in prompt says the tools change
        during the conversation. A call to a tool of env.tools outside the set is an ``unknown_tool`` violation like
        any invalid call: it runs nothing, and its error result says it is not available ``where`` (e.g.
        "in Stage 2") and names the tools that are.
        """
        configured = tuple(name for name in TOOLS if name in self.config.tools)
        self.offered = configured if tools is None else tuple(name for name in configured if name in tools)
        withheld = tuple(name for name in configured if name not in self.offered)
        self._withheld = None if tools is None else (withheld, where)
        self.tools = template_tools(self.config.tool_format, self.offered)
        prompt = system_prompt(
            self.config.tool_format,
            self.config.system_prompt,
            self.offered,
            auto_retrieval=self.config.rag_top_k > 0,
            staged=tools is not None and bool(configured),  # no tools at all (the baselines): nothing changes
        )
        self.context.messages[0] = Message("system", prompt, kind="system", protected=True)

    def add_user(
        self, text: str, *, kind: str = "chat", question: bool = False, observed: str | None = None
    ) -> Message:
        """A user turn. ``question=True`` marks the live task question, which is protected.

        A memory system that writes memory itself (:class:`~agemem.core.memory.ObservingMemory`) observes every
        user turn but the question (the question is what it is searched with, not something to remember):
        ``observed`` is what it is handed instead of ``text`` ("" hands it nothing), e.g. a game's observation
        without the list of commands appended for the agent.
        """
        message = self.context.append(
            "user", text, stage=self.stage, kind="question" if question else kind, protected=question
        )
        if not question:
            self.observe(text if observed is None else observed)
        return message

    def observe(self, text: str) -> None:
        """Hand ``text`` to a memory system that writes memory itself (nothing happens otherwise, or for "")."""
        if text and isinstance(self.ltm, ObservingMemory):
            self._metered(self.ltm.observe, text, scope=self.scope)

    def _metered(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a memory-system call and book what it spent on this episode (calls are synchronous, so the
        difference of the system's running totals is this call's cost even when episodes share the system)."""
        if not isinstance(self.ltm, ObservingMemory):
            return call(*args, **kwargs)
        before = self.ltm.spent()
        try:
            return call(*args, **kwargs)
        finally:
            spent = cost_delta(self.ltm.spent(), before)
            totals = self.stats.memory_system_cost
            for key in COST_KEYS:
                totals[key] = totals.get(key, 0.0) + spent[key]

    def fit_context(self, budget_tokens: int, incoming: str = "") -> list[Message]:
        """Drop the oldest rounds of the short-term context until it and a user message ``incoming`` fit in
        ``budget_tokens`` (a conversation too long for any context: what the agent did not store or summarise
        in time is gone). The system prompt and protected messages stay, and without ``incoming`` the newest
        round. Returns what was dropped, oldest first."""
        arriving = [{"role": "user", "content": incoming}] if incoming else []
        dropped: list[Message] = []
        while self.resources.token_counter.count(self.context.as_chat() + arriving, self.tools) > budget_tokens:
            gone = self.context.drop_oldest_round(keep_newest=not incoming)  # the incoming message is the newest
            if not gone:
                break
            dropped += gone
        return dropped

    def prompt_messages(self) -> list[dict[str, Any]]:
        return self.context.as_chat()

    def context_tokens(self) -> int:
        return self.resources.token_counter.count(self.context.as_chat(), self.tools)

    def introspect(self, text: str, top_k: int, *, source: str = "introspection") -> RetrievalRecord | None:
        """Retrieve the top-k LTM entries for an incoming message and show them to the agent.

        The paper's introspective retrieval in Stage 1: before the agent answers a message, what
        it already stored about it is put in context, so it can Update instead of duplicating.
        Nothing is shown when the scope holds no memories yet. ``source`` labels the tool message
        (``introspection``, or ``rag`` for :meth:`rag_retrieve`).
        """
        result = self.ltm.retrieve(text, top_k, scope=self.scope)
        if not (result.ok and result.entries):
            return None
        self._show_retrieval(result, source)
        record = self._retrieval_record(text, top_k, result)
        self.stats.introspections.append(record)
        return record

    def rag_retrieve(self) -> RetrievalRecord | None:
        """The -RAG ablation's step (``env.rag_top_k`` > 0): before the agent's step, show the top-k LTM
        entries for the latest user message, or for :attr:`task_query` under ``env.rag_query=task`` where the
        episode sets one; call it before rendering every prompt.

        The same entries are not shown twice for the same message (a second step on a message sees a new
        block only when memory changed in between). Nothing happens when rag_top_k is 0, when there is no
        user message yet, or when the scope holds no memories.
        """
        top_k = self.config.rag_top_k
        latest = next((m for m in reversed(self.context.messages) if m.role == "user" and m.kind != "summary"), None)
        if not top_k or latest is None:
            return None
        query = self.task_query if self.config.rag_query == "task" and self.task_query else latest.content
        result = self._metered(self.ltm.retrieve, query, top_k, scope=self.scope)
        if not (result.ok and result.entries):
            return None
        shown = (latest, tuple(e.id for e in result.entries))  # one block per message, whatever the query
        if self._last_rag is not None and self._last_rag[0] is shown[0] and self._last_rag[1] == shown[1]:
            return None
        self._last_rag = shown
        if self.config.rag_replace:  # only the latest retrieval stays: a memory that changes per message would pile up
            self.context.messages = [m for m in self.context.messages if m.kind != "rag"]
        self._show_retrieval(result, "rag")
        record = self._retrieval_record(query, top_k, result)
        self.stats.introspections.append(record)
        return record

    def _show_retrieval(self, result: MemoryResult, source: str) -> None:
        payload = {"tool": "Retrieve_memory", "source": source, **result.to_observation()}
        payload["message"] = f"memories related to the message above ({len(result.entries)})"
        self.context.append(
            "tool", json.dumps(payload, ensure_ascii=False), stage=self.stage, kind=source, name="Retrieve_memory"
        )

    def step(self, model_text: str) -> StepResult:
        """Parse, run every tool call in order, append results, report whether an answer ended the turn."""
        return drive_step(self.step_events(model_text), self.resources.summarizer.summarize)

    def step_events(self, model_text: str, prompt_tokens: int | None = None) -> StepEvents:
        """:meth:`step` as a generator that yields a :class:`SummaryRequest` whenever a summary is needed.

        ``prompt_tokens``: the length of the prompt the caller already encoded from
        :meth:`prompt_messages` (saves rendering the whole context once more per step).
        """
        self._step += 1
        prompt_tokens = self._measure(prompt_tokens)
        if prompt_tokens > self.config.context.max_context_tokens:
            self.stats.overflow_steps.append(self._step)
        self.stats.prompt_context = [
            {"role": m.role, "kind": m.kind, "name": m.name, "content": m.content} for m in self.context.messages[1:]
        ]
        parsed = parse_response(model_text, self.offered)
        if self._withheld is not None:
            _explain_withheld(parsed, *self._withheld, self.offered)
        assistant = self.context.append(
            "assistant", model_text if isinstance(model_text, str) else "", stage=self.stage, kind="action"
        )
        self.context.begin_step(assistant)
        try:
            results = []
            for call in parsed.tool_calls:  # one result per call, appended as it finishes
                results.append((yield from self._run(call)))
                self.context.append("tool", results[-1].to_text(), stage=self.stage, kind="tool_result", name=call.name)
            done = parsed.answer is not None
            if self.note is not None:
                told = self.note(parsed)
                if told is not None:
                    self.context.append("tool", told, stage=self.stage, kind="note")
            elif (feedback := feedback_violations(parsed)) and not done:
                self.context.append(
                    "tool", format_feedback([v.detail for v in feedback]), stage=self.stage, kind="format_error"
                )
        finally:
            self.context.end_step()
        tokens_after = self._measure()
        self._record_step(parsed, results, prompt_tokens, tokens_after, done)
        return StepResult(parsed, results, done, parsed.answer, prompt_tokens, tokens_after)

    # ------------------------------------------------------------- tools
    def _run(self, call: ToolCall) -> Generator[SummaryRequest, str, ToolResult]:
        self.stats.tool_counts[call.name] += 1
        if self.runner is not None:
            payload = self.runner.run(call)
            return ToolResult(call.name, bool(payload["ok"]), payload)
        outcome = execute(self, call)
        if inspect.isgenerator(outcome):  # Summary_context waits for its text
            outcome = yield from outcome
        return outcome

    def metadata_for(self, tool: str, metadata: dict[str, Any] | None, memory_type: str | None = None) -> Payload:
        """The agent's metadata without the keys the env owns; an Add also gets its type, source and stage."""
        metadata = _agent_metadata(metadata)
        if tool == "Add_memory":
            metadata["memory_type"] = memory_type or metadata.get("memory_type", "general")
            metadata["source"] = "agent"
            metadata["stage"] = self.stage  # rewards score Stage-1 storage, so the agent may not set it
        return metadata

    def settle(self, event: MemoryEvent) -> Payload:
        """Book a memory verb in the episode's stats (rewards read them); the agent sees the store's result."""
        result, arguments = event.result, event.arguments
        if result.op == "retrieve":
            if result.ok:
                self.stats.retrievals.append(self._retrieval_record(arguments["query"], arguments["top_k"], result))
        else:
            previous = event.previous.content if event.previous else None
            memory_id = arguments.get("memory_id")
            self._record_op(result, arguments.get("content", ""), previous=previous, memory_id=memory_id)
        return result.to_observation(echo_changes=self.config.ltm.echo_changes)

    def summary_context(self, span: str) -> Generator[SummaryRequest, str, Payload]:
        """Summary_context: yields the span's messages for their summary, then puts it in their place."""
        selected = self.context.select_span(span)
        if not selected:
            message = "nothing to summarise: the span holds no messages that may be summarised"
            return {"ok": False, "message": message}
        try:
            text = yield SummaryRequest(selected)
        except SummarizerError as err:
            self.stats.summary_failures += 1
            return {"ok": False, "message": f"summary failed: {err}"}
        tokens_before = self.context_tokens()
        summary = self.context.replace_with_summary(selected, text)
        self.stats.summaries.append(
            SummaryRecord(
                self.stage,
                self._step,
                span,
                [m.content for m in selected],
                summary.content,
                replaced_origins=[message_origin(m) for m in selected],
                tokens_before=tokens_before,
                tokens_after=self.context_tokens(),
            )
        )
        # the summary already stands in the span's place in the context: echoing it here would put it there twice
        # and cost a summary's tokens on every later prompt (a summary then saved little: bench/pressures.py)
        tokens = f"{tokens_before} -> {self.context_tokens()} context tokens"
        return {"ok": True, "message": f"replaced {len(selected)} message(s) with a summary ({tokens})"}

    def filter_context(self, criteria: str) -> Payload:
        """Filter_context: drops the messages similar to ``criteria``."""
        tokens_before = self.context_tokens()
        removed = self.context.filter(criteria, self.resources.encoder, self.config.context.filter_threshold)
        self.stats.filters.append(
            FilterRecord(
                self.stage,
                self._step,
                criteria,
                [m.content for m, _ in removed],
                [s for _, s in removed],
                removed_origins=[message_origin(m) for m, _ in removed],
                tokens_before=tokens_before,
                tokens_after=self.context_tokens(),
            )
        )
        previews = [m.content[:60] for m, _ in removed]
        message = f"removed {len(removed)} message(s)" if removed else "no message matched the criteria closely enough"
        return {"ok": True, "message": message, "removed": previews}

    # ------------------------------------------------------------ records
    def _record_op(
        self, result: MemoryResult, content: str, previous: str | None = None, memory_id: str | None = None
    ) -> None:
        entry = result.entries[0] if result.entries else None
        self.stats.memory_ops.append(
            MemoryOpRecord(
                op=result.op,
                stage=self.stage,
                step=self._step,
                ok=result.ok,
                memory_id=entry.id if entry else memory_id,
                content=entry.content if entry else content,
                previous_content=previous,
                error=None if result.ok else result.message,
            )
        )

    def _retrieval_record(self, query: str, top_k: int, result: MemoryResult) -> RetrievalRecord:
        ids, contents = [e.id for e in result.entries], [e.content for e in result.entries]
        return RetrievalRecord(self.stage, self._step, query, top_k, ids, contents, result.scores)

    def _measure(self, known_tokens: int | None = None) -> int:
        tokens = self.context_tokens() if known_tokens is None else known_tokens
        stats = self.stats
        stats.max_context_tokens = max(stats.max_context_tokens, tokens)
        if tokens > self.config.context.max_context_tokens and not stats.overflow:
            stats.overflow, stats.first_overflow_step = True, self._step
        return tokens

    def _record_step(
        self, parsed: ParsedResponse, results: list[ToolResult], prompt_tokens: int, tokens_after: int, done: bool
    ) -> None:
        for violation in parsed.violations:
            self.stats.violations.append({"stage": self.stage, "step": self._step, **asdict(violation)})
        self.stats.steps.append(
            StepRecord(
                self.stage,
                self._step,
                prompt_tokens,
                tokens_after,
                [r.name for r in results],
                [r.name for r in results if not r.ok],
                parsed.violation_kinds(),
                done,
            )
        )


def _explain_withheld(parsed: ParsedResponse, withheld: tuple[str, ...], where: str, offered: tuple[str, ...]) -> None:
    """Say why a call to a tool of env.tools that the current stage does not offer was refused (its error and its
    unknown_tool violation), instead of calling the tool unknown."""
    available = (
        f"the tools available now are {', '.join(offered)}"
        if offered
        else "no tools are available now; answer directly"
    )
    for call in parsed.tool_calls:
        name = NAME_ALIASES.get(call.name, call.name)
        if call.error is None or not call.error.startswith("unknown tool") or name not in withheld:
            continue
        refused = f"{name} is not available {where or 'now'}; {available}"
        for violation in parsed.violations:
            if violation.kind == UNKNOWN_TOOL and violation.detail == call.error:
                violation.detail = refused
        call.error = refused


def message_origin(message: Message) -> str:
    """Where a context message came from, as the reward terms read it: its kind (``chat``, ``fact``, ``distractor``,
    ``summary``, ``action`` for the agent's replies, ``introspection``, ``rag``, ``format_error``, ...), and for a
    tool call's result ``tool_result:<tool name>``."""
    return f"tool_result:{message.name}" if message.kind == "tool_result" else message.kind


def _agent_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The agent's metadata without the keys the environment owns (stage, source)."""
    return {k: v for k, v in (metadata or {}).items() if k not in ENV_OWNED_KEYS}


def format_feedback(details: Sequence[str], note: str = "") -> str:
    """The tool message that tells the agent its reply broke the response format (the environment's, and the
    streaming agent's); ``note`` follows the hint (ReMem: the steps left)."""
    message = f"format error: {'; '.join(details)}. {FORMAT_HINT}" + (f" {note}" if note else "")
    return json.dumps({"tool": "format_check", "ok": False, "message": message}, ensure_ascii=False)


def feedback_violations(parsed: ParsedResponse) -> list[Violation]:
    """The reply's format violations the agent is told about; a bad tool call's own result already says what was
    wrong with it."""
    return [v for v in parsed.violations if v.kind not in _CALL_LEVEL]

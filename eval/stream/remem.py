"""ReMem (Evo-Memory, Wei et al. 2025, arXiv 2511.20857): an agent that reasons, acts and refines its experience
memory in one loop.

A task starts as ExpRAG's does: the ``top_k`` most similar records are shown with it, each an experience of
input, output and feedback (the task, what was done, whether it succeeded). Then the agent works in steps, a step
ending with an Act (a QA task is one step; a game, one step per command); within a step every reply is one
operation, and Think and Refine may repeat up to their per-step caps:

* **Think**: ``<think>…</think>`` alone. The reasoning stays in the working context; nothing is executed.
* **Refine**: ``<tool_call>`` with memory operations on the stream's bank: ``Retrieve_memory`` (more records, by a
  query of the agent's), ``Add_memory`` (a new record of this task, e.g. a lesson learned so far),
  ``Update_memory`` (rewrite a record, e.g. a raw execution into a reusable lesson), ``Merge_memory`` (several
  records into one) and ``Delete_memory`` (a record judged wrong or useless). They run through the training
  executor (:func:`agemem.core.tools.execute` over :class:`~agemem.eval.stream.bank.BankMemory`, as the policy
  addition's :class:`~agemem.eval.stream.agent.BankTools` do), and the edits persist after the task.
* **Act**: ``<answer>…</answer>``: the final answer (QA) or the next game command (ALFWorld).

Anything else is a malformed reply: the agent gets the environment's format feedback. Every reply but an Act is
followed by a status message with the replies and the Think / Refine operations left in the step. After the task
the runner writes the experience by the addition rule (ExpRAG: ``add_all``), as for every agent.

The loop is the environment's (:class:`~agemem.core.env.MemoryEnv` in an episode, as every stream agent plays):
the session runs the Refine calls (the env's :class:`~agemem.core.env.ToolRunner`) and writes the status after each
reply (its :class:`~agemem.core.env.ReplyNote`).

* :class:`ReMemBudget`: the limits of ``stream.remem_*``;
* :class:`ReMemCounts`: what one task did (per task in ``steps.jsonl``; summed in ``results.json``);
* :func:`operation_of`: which operation a parsed reply is;
* :class:`ReMemSession`: the Refine tools on the bank within the budget, the status after each reply, and the
  task's counts;
* :func:`remem_system_prompt`: the three operations and their syntax.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agemem.core.env import feedback_violations, format_feedback
from agemem.core.protocol import NO_ACTION, ParsedResponse
from agemem.core.tools import ToolCall
from agemem.eval.stream.agent import BankTools
from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.config import StreamConfig

Operation = Literal["think", "refine", "act", "malformed"]
REFINE_KINDS = {
    "Retrieve_memory": "retrieve",
    "Add_memory": "add",
    "Update_memory": "update",
    "Merge_memory": "merge",
    "Delete_memory": "delete",
}
"""Refine's memory tools, by the kind its counts file them under."""
REFINE_TOOLS: tuple[str, ...] = tuple(REFINE_KINDS)
REMEM_PROTOCOL = "evo-memory: per-step Think/Refine caps; Refine retrieves, adds, updates, merges, deletes"
"""what a ReMem run's identity records of how ReMem plays (a run of the earlier per-task ReMem does not resume)."""


# --------------------------------------------------------------------------------------------- budget and counts


@dataclass(frozen=True)
class ReMemBudget:
    max_think: int = 3
    """Think operations per step."""
    max_refine: int = 4
    """Refine operations (memory tool calls run) per step."""
    refine_top_k: int = 3
    """records one Retrieve_memory returns at most."""
    max_steps: int = 8
    """replies per step (a QA task; a game command), each one operation."""

    @classmethod
    def from_config(cls, settings: StreamConfig) -> ReMemBudget:
        return cls(
            settings.remem_max_think, settings.remem_max_refine, settings.remem_refine_top_k, settings.remem_max_steps
        )


@dataclass
class ReMemCounts:
    """ReMem's operations on one task."""

    think: int = 0
    """Think operations taken."""
    think_refused: int = 0
    """Think replies beyond ``max_think`` (treated as malformed)."""
    refine: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REFINE_KINDS.values(), 0))
    """memory tool calls run on the bank, by kind (retrieve / add / update / merge / delete), whatever their
    result."""
    refine_failed: int = 0
    """Refine calls whose result was an error (bad arguments, a tool not offered, an unknown id, an unconfirmed
    deletion), run or not; refusals are counted apart."""
    refine_refused: int = 0
    """Refine calls beyond ``max_refine`` in their step (not run)."""
    refine_steps: int = 0
    """steps in which at least one Refine call ran."""
    acts: int = 0
    """Act operations (QA: 1 when the task was answered; ALFWorld: the commands sent)."""
    malformed: int = 0
    """replies that were none of the three operations (refused Thinks not included)."""

    @property
    def refine_ops(self) -> int:
        return sum(self.refine.values())

    def to_json(self, deleted: list[str], updated: list[str]) -> dict[str, Any]:
        """The counts with the records Refine deleted and rewrote (ids, in order)."""
        return {
            "think": self.think,
            "think_refused": self.think_refused,
            "refine": dict(self.refine),
            "refine_ops": self.refine_ops,
            "refine_failed": self.refine_failed,
            "refine_refused": self.refine_refused,
            "refine_steps": self.refine_steps,
            "acts": self.acts,
            "malformed": self.malformed,
            "deleted": list(deleted),
            "updated": list(updated),
        }


def operation_of(parsed: ParsedResponse) -> Operation:
    """The operation a reply is: an answer makes it an Act (its tool calls still run, as they do for the standard
    agent); tool calls without one a Refine; a thought with nothing else (no answer, no call, no other format
    violation) a Think; anything else is malformed."""
    if parsed.answer is not None:
        return "act"
    if parsed.tool_calls:
        return "refine"
    if parsed.thought and set(parsed.violation_kinds()) == {NO_ACTION}:
        return "think"
    return "malformed"


# --------------------------------------------------------------------------------------------- Refine's tools


@dataclass
class ReMemSession:
    """ReMem on one task: its Refine operations on the bank (a :class:`~agemem.eval.stream.base.MemoryTools`), the
    status after each reply (:meth:`note`), its per-step budget and its counts. The runner makes one per task and
    passes it to the task's episode as its memory tools; the episode sets :attr:`decision`;
    the runner reads what Refine added, deleted and rewrote afterwards. ``write(content, metadata)`` writes
    Add_memory's record of the current task (None: Add_memory is not offered)."""

    bank: MemoryBank
    budget: ReMemBudget = field(default_factory=ReMemBudget)
    write: Callable[[str, dict[str, Any]], Record] | None = None
    counts: ReMemCounts = field(default_factory=ReMemCounts)
    updated_ids: list[str] = field(default_factory=list)
    """records Refine rewrote (updated, or kept by a merge), in order of their first rewrite."""
    decision: str = "this task"
    """what a step leads to, in the status messages ("this command" in a game)."""
    turn_steps: int = 0
    """replies in the current step so far."""
    step_think: int = 0
    """Think operations in the current step."""
    step_refine: int = 0
    """Refine calls run in the current step."""
    thoughts: list[str] = field(default_factory=list)
    """the Think operations' reasoning, in order (a QA record's reasoning)."""
    operations: list[str] = field(default_factory=list)
    """every reply's operation, in order (the transcript's)."""
    offered: tuple[str, ...] = field(init=False)
    tools: BankTools = field(init=False)

    def __post_init__(self) -> None:
        self.offered = REFINE_TOOLS if self.write is not None else tuple(t for t in REFINE_TOOLS if t != "Add_memory")
        self.tools = BankTools(self.bank, self.write, offered=self.offered, default_top_k=self.budget.refine_top_k)

    @property
    def added(self) -> list[Record]:
        """Records Refine's Add_memory wrote."""
        return self.tools.added

    @property
    def deleted(self) -> list[Record]:
        """Records Refine removed from the bank (a merge's included)."""
        return self.tools.deleted

    @property
    def refine_left(self) -> int:
        return max(0, self.budget.max_refine - self.step_refine)

    @property
    def think_left(self) -> int:
        return max(0, self.budget.max_think - self.step_think)

    def run(self, call: ToolCall) -> dict[str, Any]:
        """Run one Refine call within the step's budget: the executor's result, or a refusal once the step's budget
        is spent (an invalid call or a tool not offered gets the executor's error and does not spend the budget)."""
        runs = call.valid and call.name in self.offered
        if runs and not self.refine_left:
            self.counts.refine_refused += 1
            message = f"no Refine operation left in this step ({self.budget.max_refine} per step); Think or Act"
            return {"ok": False, "message": message}
        if runs and call.name == "Retrieve_memory" and "top_k" in call.arguments:
            capped = min(int(call.arguments["top_k"]), self.budget.refine_top_k)
            call = dataclasses.replace(call, arguments={**call.arguments, "top_k": capped})
        payload = self.tools.run(call)
        if runs:
            self.counts.refine[REFINE_KINDS[call.name]] += 1
            self.counts.refine_steps += self.step_refine == 0
            self.step_refine += 1
        if not payload["ok"]:
            self.counts.refine_failed += 1
        elif call.name in ("Update_memory", "Merge_memory"):
            kept = call.arguments["memory_id"] if call.name == "Update_memory" else call.arguments["memory_ids"][0]
            if kept not in self.updated_ids:
                self.updated_ids.append(kept)
        return payload

    def note(self, parsed: ParsedResponse) -> str | None:
        """Book a reply's operation and tell the agent where it stands (nothing after an Act).

        A step is the replies up to one Act (the whole task on a QA stream, one game command in a game), at most
        ``budget.max_steps``: each is a Think (``<think>`` alone: the reasoning stays in the context; one beyond
        ``max_think`` in the step is refused as a malformed reply), a Refine (``<tool_call>``: its calls ran within
        the step's ``max_refine``, :meth:`run`), an Act (``<answer>``) or malformed (the environment's format
        feedback). Every reply but an Act ends with a status message: the replies left in the step, the Thinks and
        Refine operations left in it. An Act, or a step's last reply, starts the next step with fresh budgets.
        """
        self.turn_steps += 1
        counts = self.counts
        operation = operation_of(parsed)
        details = [v.detail for v in feedback_violations(parsed)]
        if operation == "think" and not self.think_left:
            counts.think_refused += 1
            operation = "malformed"
            details = [f"no Think operation left in this step ({self.budget.max_think} per step); Refine or Act"]
        elif operation == "think":
            counts.think += 1
            self.step_think += 1
            self.thoughts.append(str(parsed.thought))
            details = []
        elif operation == "malformed":
            counts.malformed += 1
        self.operations.append(operation)
        told = None
        if operation == "act":
            counts.acts += 1
        else:
            status = self.status()
            if details:
                told = format_feedback(details, status)
            else:
                done = "Thought noted." if operation == "think" else "Refine done."
                told = json.dumps({"tool": "remem", "ok": True, "message": f"{done} {status}"}, ensure_ascii=False)
        if operation == "act" or self.turn_steps >= self.budget.max_steps:  # the step is over: a fresh one follows
            self.turn_steps = self.step_think = self.step_refine = 0
        return told

    def status(self) -> str:
        """``Step s of n for <decision> (k left). Think operations left: …; Refine operations left: ….`` and the
        choice of operations (all counts within the current step)."""
        limit = self.budget.max_steps
        return (
            f"Step {self.turn_steps} of {limit} for {self.decision} ({limit - self.turn_steps} left). Think operations "
            "left: "
            f"{self.think_left}; Refine operations left: {self.refine_left}. Reply with one operation: Think, "
            "Refine or Act."
        )

    def updates(self) -> list[dict[str, Any]]:
        """The rewritten records still in the bank, as they stand now: what the step log keeps so that a resumed
        run rebuilds the same bank (a record rewritten and then deleted is only a deletion)."""
        records = [self.bank.get(i) for i in self.updated_ids]
        return [{"id": r.id, "execution": r.execution, "metadata": r.metadata} for r in records if r is not None]

    def to_json(self) -> dict[str, Any]:
        return self.counts.to_json([r.id for r in self.deleted], self.updated_ids)


# --------------------------------------------------------------------------------------------- the prompt

QA_INTRO = (
    "You are an agent that solves a stream of tasks, one at a time, with a long-term memory of past tasks that "
    "outlives each task."
)
QA_ACT = "your final answer"
QA_ACT_EFFECT = "This ends the task: act when you are ready, before your steps run out."
GAME_ACT = "one game command, e.g. go to countertop 1"
GAME_ACT_EFFECT = (
    "The command is sent to the game, which replies with what you observe, and the next step begins. Think and "
    "Refine do not move the game."
)


def remem_system_prompt(intro: str, act: str, act_effect: str, tool_format: str, budget: ReMemBudget) -> str:
    """ReMem's system message: ``intro`` (the task), the memory, the three operations with their exact syntax and
    budgets, then where the Refine tools' schemas go (``{tools}`` in ``agemem`` tool format, as
    :func:`agemem.core.prompts.system_prompt` fills it)."""
    memory = (
        "Your long-term memory holds records of past tasks: the task, what was done on it and the feedback it got "
        "(whether it succeeded). The records most similar to the current task are shown with it, each with its "
        "memory_id. Records can be wrong or misleading; keeping the memory useful for later tasks is part of your job."
    )
    operations = f"""Work in steps; a step ends when you Act. Within a step each reply is exactly one of three \
operations, and you may Think and Refine several times before you Act:
Think: <think>your reasoning</think> and nothing else. Nothing is executed; your reasoning stays in view for \
the next replies. At most {budget.max_think} per step.
Refine: <think>why</think><tool_call>[{{"name": "<tool name>", "arguments": {{...}}}}, ...]</tool_call> to \
edit your memory: Retrieve_memory with a query shows up to {budget.refine_top_k} more records; Add_memory with \
content stores a new record of this task, for example a lesson learned so far; Update_memory with a memory_id \
and new content rewrites a record, for example into a short lesson that will help with later tasks; \
Merge_memory with memory_ids and content turns several records into one; Delete_memory with a memory_id and \
"confirmation": true removes a record that is wrong or useless. At most {budget.max_refine} memory operations \
per step; the results come back in the next message.
Act: <think>your reasoning</think><answer>{act}</answer>. {act_effect}
A step has at most {budget.max_steps} replies; after every reply but an Act you are told how many are left \
and which operations. Never put a tool call and an answer in the same reply, and write nothing outside the \
tags."""
    tools = (
        "Available tools (JSON schemas):\n{tools}"
        if tool_format == "agemem"
        else "Your tools are listed below. You may put each call in its own <tool_call> block."
    )
    return "\n\n".join([intro, memory, operations, tools])

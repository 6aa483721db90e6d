"""A scripted, deliberately imperfect expert for synthetic memory tasks: the SFT warm start's teacher.

The expert reads the conversation the policy would see and writes an AgeMem-format response.
Its good habits are the memory skills GRPO should strengthen, each taken only with some
probability so that the imitating policy has room to improve:

* Stage 1: each fact paragraph is stored with ``Add_memory`` with probability ``store_fact``
  (all kept paragraphs go in one tool call); otherwise it just acknowledges;
* Stage 2: a distractor is stored with probability ``store_distractor`` (a bad habit: a
  look-alike in LTM competes with the real fact at retrieval time); otherwise, with probability
  ``summarise_context``, the context read so far is compressed once the message is read (``Summary_context``
  over all of it), which keeps a long Stage 2 inside a prompt budget;
* Stage 1, a changed fact (tasks with ``data.synthetic.revisions``): with probability ``update_stale`` it looks
  the fact up (``Retrieve_memory`` with the change) and rewrites the entry that states the old value
  (``Update_memory``, the old sentence replaced by the change), or with ``maintenance='replace'`` overwrites it with
  the changed sentence alone, or with ``maintenance='delete'`` deletes that entry and stores the change as it came
  (``Delete_memory`` and ``Add_memory``), or with ``maintenance='overwrite'`` overwrites, without a lookup, the
  entry its own earlier ``Add_memory`` stored the old value in (its id read from that call's result in the Stage-1
  context) with the change message as it came (``Update_memory``; with ``data.synthetic.restate_unchanged`` the
  message restates the person's other facts, so nothing is lost); otherwise, or when nothing stored
  states it, the change is stored like any fact (``store_fact``, or ``store_change`` when set), beside the stale
  entry. With
  ``lookup_stored_only`` it looks up only what its own earlier ``Add_memory`` stored;
* Stage 3: it calls ``Retrieve_memory`` with the question with probability ``retrieve``, then
  answers from what it can see: the first sentence stating the asked person's value (in a retrieval, the
  best match: a stale memory ranked above its change is read), else the value of the closest look-alike
  sentence (the confusion a careless reader makes), else ``unknown``.

A habit needs its tool: given the stage tool sets the episode offers (``rollout.stage_tools=paper``), the expert
never calls a tool its stage does not offer, so its demonstrations never teach a refused call (under the
paper's sets no distractor can be stored: Stage 2 offers only Filter/Summary).

Every decision is a function of (``seed``, task, decision), never of call order, so the same
tasks always give the same demonstrations whatever the batching.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agemem.rollouts.engines.base import Completion, SamplingParams
from agemem.tasks.synthetic import BY_NAME, news_title

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agemem.rollouts.records import Task

UNKNOWN_ANSWER = "unknown"


def parse_chatml(text: str) -> list[dict[str, str]]:
    """Split a rendered ChatML prompt back into role/content messages (the generation prompt dropped).

    Tool results come back as ``user`` messages whose content holds ``<tool_response>`` blocks.
    """
    text = text.removesuffix("<|im_start|>assistant\n")
    messages = []
    for block in text.split("<|im_start|>")[1:]:
        role, _, rest = block.partition("\n")
        messages.append({"role": role, "content": rest.split("<|im_end|>")[0]})
    return messages


def is_tool_response(message: dict[str, str]) -> bool:
    return message["role"] == "user" and message["content"].startswith("<tool_response>")


def tool_call_text(thought: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    payload = json.dumps([{"name": name, "arguments": arguments} for name, arguments in calls], ensure_ascii=False)
    return f"<think>{thought}</think><tool_call>{payload}</tool_call>"


def answer_text(thought: str, answer: str) -> str:
    return f"<think>{thought}</think><answer>{answer}</answer>"


@dataclass(frozen=True)
class ExpertHabits:
    """How often the expert does the right thing (each in [0, 1])."""

    store_fact: float = 0.5
    """probability of storing each Stage-1 paragraph."""
    store_distractor: float = 0.25
    """probability of storing a Stage-2 distractor (a mistake)."""
    retrieve: float = 0.6
    """probability of retrieving before answering the Stage-3 question."""
    update_stale: float = 0.0
    """probability of updating the stored entry a later Stage-1 message makes stale (revised tasks)."""
    maintenance: str = "update"
    """how a stale entry is brought up to date: ``update`` rewrites it (Update_memory with the old sentence
    replaced); ``replace`` overwrites it with the changed sentence alone, the lookup's query (Update_memory; the
    entry's other facts are lost); ``delete`` deletes it and stores the change as it came (Delete_memory and
    Add_memory in one reply); ``overwrite`` needs no lookup: it overwrites the entry its own earlier Add_memory
    stored the old value in, the id read from that call's result, with the change as it is stored (Update_memory,
    in reply to the change)."""
    lookup_stored_only: bool = False
    """look a change up only when an earlier ``Add_memory`` of this conversation stored the sentence it changes (the
    call sits in the same Stage-1 context), so every lookup finds the stale entry; otherwise it looks up whether or
    not it stored it, and a lookup may return another person's entry."""
    summarise_context: float = 0.0
    """probability of summarising the context after a Stage-2 distractor it did not store."""
    store_change: float | None = None
    """probability of storing a change it does not bring an entry up to date with; None: ``store_fact``, as any
    Stage-1 message (``store_fact=0, store_change=1`` is the shortcut of storing only the changes)."""
    seed: int = 0
    """seed of the expert's coin flips."""
    quote_evidence: bool = False
    """the answer's thought quotes the sentence the value is read from ("X has a pet gecko."), so the answer
    is a copy of the word that follows the quoted words in the retrieved memory."""
    quote_style: str = "sentence"
    """with ``quote_evidence``: ``sentence`` quotes it whole; ``clause`` quotes it without the person's name
    ("Memory: has a pet gecko."), so the quote starts at a fixed place instead of with a name to pick."""
    whole_message: bool = False
    """store a Stage-1 message as it came (lead-in included) in one entry instead of its bare paragraphs:
    the content to copy then starts right after the user tag, which a small model finds without searching."""

    def __post_init__(self) -> None:
        if self.quote_style not in QUOTE_STYLES:
            raise ValueError(f"quote_style={self.quote_style!r} is not one of {QUOTE_STYLES}")
        if self.maintenance not in MAINTENANCE_STYLES:
            raise ValueError(f"maintenance={self.maintenance!r} is not one of {MAINTENANCE_STYLES}")
        for name in ("store_fact", "store_distractor", "retrieve", "update_stale", "summarise_context", "store_change"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value} is a probability; use a value in [0, 1]")


class SyntheticExpert:
    """``expert(conversation) -> response text`` for the synthetic tasks it was built with.

    ``stage_tools``: the tools each stage offers (stage -> names, as
    :data:`~agemem.core.tools.PAPER_STAGE_TOOLS`); None when every tool is offered everywhere. The expert
    knows the stage from what it answers: a fact paragraph is Stage 1, a distractor Stage 2, the question Stage 3.
    """

    def __init__(
        self, tasks: Sequence[Task], habits: ExpertHabits, stage_tools: Mapping[int, Sequence[str]] | None = None
    ):
        self.habits = habits
        self.stage_tools = stage_tools
        self._paragraphs: dict[str, tuple[Task, str]] = {}
        self._distractors: dict[str, Task] = {}
        self._questions: dict[str, Task] = {}
        self._changes: dict[str, tuple[Task, dict[str, str], str]] = {}  # change text -> (task, change, title)
        for task in tasks:
            if task.metadata.get("source") != "synthetic":
                raise ValueError(f"task {task.id!r} is not synthetic; the expert knows only rollouts/synthetic tasks")
            for paragraph in task.contexts:
                self._paragraphs[paragraph.text] = (task, paragraph.title)
            for change in task.metadata.get("revisions", []):
                text = BY_NAME[change["attribute"]].revise(change["entity"], change["new"])
                self._changes[text] = (task, change, news_title(change["entity"]))
            for text in task.distractors:
                self._distractors[text] = task
            self._questions[task.question] = task

    def __call__(self, conversation: list[dict[str, str]]) -> str:
        users = [i for i, m in enumerate(conversation) if m["role"] == "user" and not is_tool_response(m)]
        if not users:  # Filter_context removed what it was answering: nothing left to do
            return answer_text("Nothing to do.", "OK")
        message = conversation[users[-1]]["content"]
        acted = any(m["role"] == "assistant" for m in conversation[users[-1] + 1 :])
        if message in self._questions:
            return self._answer_question(self._questions[message], conversation, acted)
        if message in self._distractors:
            task = self._distractors[message]
            if (
                not acted
                and self._offers(2, "Add_memory")
                and self._flip(task, f"distractor:{message}", self.habits.store_distractor)
            ):
                return tool_call_text("Worth keeping.", [("Add_memory", {"content": message})])
            if (
                not acted
                and self._offers(2, "Summary_context")
                and self._flip(task, f"summarise:{message}", self.habits.summarise_context)
            ):
                return tool_call_text("Keep the context short.", [("Summary_context", {"span": "all"})])
            return answer_text("Noted.", "OK")
        changed = [item for text, item in self._changes.items() if text in message]
        stated = [title for text, (_, title) in self._paragraphs.items() if text in message]
        if changed and len(stated) == len(changed):  # a message of changes only (one message per change)
            before, after = conversation[: users[-1]], conversation[users[-1] + 1 :]
            return self._bring_up_to_date(*changed[0], message, before, after)
        facts = [(text, owner) for text, owner in self._paragraphs.items() if text in message]
        if acted or not facts or not self._offers(1, "Add_memory"):
            return answer_text("Noted.", "OK")
        facts.sort(key=lambda item: message.index(item[0]))
        kept = [text for text, (task, title) in facts if self._flip(task, f"fact:{title}", self.habits.store_fact)]
        if not kept:
            return answer_text("Not needed.", "OK")
        if self.habits.whole_message:
            return tool_call_text("Worth keeping.", [("Add_memory", {"content": message})])
        return tool_call_text("Worth keeping.", [("Add_memory", {"content": text}) for text in kept])

    def _bring_up_to_date(
        self,
        task: Task,
        change: dict[str, str],
        title: str,
        message: str,
        before: list[dict[str, str]],
        after: list[dict[str, str]],
    ) -> str:
        """A Stage-1 message changing a fact: look it up, then rewrite the stale entry (or store the change)."""
        attribute = BY_NAME[change["attribute"]]
        current = attribute.revise(change["entity"], change["new"])
        stale = attribute.state(change["entity"], change["old"])
        calls = [name for m in after if m["role"] == "assistant" for name in called_tools(m["content"])]
        if calls and calls[-1] != "Retrieve_memory":  # updated or stored: done with this message
            return answer_text("Noted.", "OK")
        stored_change = message if self.habits.whole_message else current
        if not calls:
            wants = self._flip(task, f"update:{title}", self.habits.update_stale)
            if self.habits.maintenance in WITHOUT_LOOKUP:  # the stale entry's id is in the context already
                entry = stored_entry(before, stale)
                if wants and entry is not None and self._offers(1, MAINTENANCE_TOOL[self.habits.maintenance]):
                    return MAINTENANCE[self.habits.maintenance](entry, stale, current, stored_change)
                wants = False
            if self.habits.lookup_stored_only:
                wants = wants and stored_earlier(before, stale)
            maintains = MAINTENANCE_TOOL[self.habits.maintenance]
            if wants and self._offers(1, "Retrieve_memory") and self._offers(1, maintains):
                return tool_call_text(
                    "This changes something I may have stored.", [("Retrieve_memory", {"query": current})]
                )
        else:  # the lookup came back: bring the entry that states the old value up to date, if one does
            for memory in retrieved_memories(after[-1]["content"]):
                if stale in memory.get("content", ""):
                    return MAINTENANCE[self.habits.maintenance](memory, stale, current, stored_change)
        store_change = self.habits.store_fact if self.habits.store_change is None else self.habits.store_change
        if self._offers(1, "Add_memory") and self._flip(task, f"fact:{title}", store_change):
            return tool_call_text("Worth keeping.", [("Add_memory", {"content": stored_change})])
        return answer_text("Not needed.", "OK")

    def _answer_question(self, task: Task, conversation: list[dict[str, str]], acted: bool) -> str:
        if not acted and self._offers(3, "Retrieve_memory") and self._flip(task, "retrieve", self.habits.retrieve):
            return tool_call_text("Check memory.", [("Retrieve_memory", {"query": task.question})])
        visible = "\n".join(m["content"] for m in conversation[1:])
        evidence = visible_evidence(task, visible)
        if evidence is None:
            return answer_text("Answer.", UNKNOWN_ANSWER)
        value, sentence = evidence
        # quoting the sentence turns reading into copying: the value follows the quoted words in context
        thought = evidence_thought(sentence, self.habits.quote_style) if self.habits.quote_evidence else "Answer."
        return answer_text(thought, value)

    def _offers(self, stage: int, tool: str) -> bool:
        return self.stage_tools is None or tool in self.stage_tools[stage]

    def _flip(self, task: Task, decision: str, probability: float) -> bool:
        digest = hashlib.blake2b(f"{self.habits.seed}:{task.id}:{decision}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") / 2**64 < probability


QUOTE_STYLES = ("sentence", "clause")


def rewrite_entry(memory: dict[str, Any], stale: str, current: str, stored_change: str) -> str:
    """``update``: Update_memory the stale entry with its old sentence replaced by the change."""
    update = {"memory_id": memory["memory_id"], "content": memory["content"].replace(stale, current)}
    return tool_call_text("Out of date: rewrite it.", [("Update_memory", update)])


def replace_entry(memory: dict[str, Any], stale: str, current: str, stored_change: str) -> str:
    """``replace``: Update_memory the stale entry with the changed sentence alone, the lookup's own query (a near
    copy; the entry's other facts are lost)."""
    update = {"memory_id": memory["memory_id"], "content": current}
    return tool_call_text("Out of date: replace it.", [("Update_memory", update)])


def delete_and_store(memory: dict[str, Any], stale: str, current: str, stored_change: str) -> str:
    """``delete``: Delete_memory the stale entry and Add_memory the change as it is stored, in one reply (a short id
    to copy, no rewrite to compose)."""
    delete = {"memory_id": memory["memory_id"], "confirmation": True}
    return tool_call_text(
        "Out of date: replace it.", [("Delete_memory", delete), ("Add_memory", {"content": stored_change})]
    )


def overwrite_entry(memory: dict[str, Any], stale: str, current: str, stored_change: str) -> str:
    """``overwrite``: Update_memory the entry an earlier Add_memory stored the old value in with the change as it is
    stored, in reply to the change (no lookup: the id is the one that Add's result named)."""
    update = {"memory_id": memory["memory_id"], "content": stored_change}
    return tool_call_text("Out of date: overwrite it.", [("Update_memory", update)])


MAINTENANCE = {
    "update": rewrite_entry,
    "replace": replace_entry,
    "delete": delete_and_store,
    "overwrite": overwrite_entry,
}
"""how the expert brings a stale entry up to date (``ExpertHabits.maintenance``): the entry its lookup retrieved,
or for the styles in :data:`WITHOUT_LOOKUP` the one its earlier Add_memory stored."""
MAINTENANCE_TOOL = {
    "update": "Update_memory",
    "replace": "Update_memory",
    "delete": "Delete_memory",
    "overwrite": "Update_memory",
}
"""the tool each maintenance needs its stage to offer."""
WITHOUT_LOOKUP = frozenset({"overwrite"})
"""maintenance styles that find the stale entry's id in the context (an earlier Add_memory's result), not by a
Retrieve_memory."""
MAINTENANCE_STYLES = tuple(MAINTENANCE)
_LEADING_NAME = re.compile(r"^[A-Z][a-z]+ [A-Z][a-z]+(?:'s)?")


def evidence_thought(sentence: str, style: str) -> str:
    """The thought quoting ``sentence`` before answering: the sentence itself, or (``clause``) "Memory:"
    and the sentence without its leading name ("Memory: favourite colour is teal."), whose words and value
    follow one another in the memory as in the quote."""
    if style == "sentence":
        return sentence
    return "Memory:" + _LEADING_NAME.sub("", sentence)


def visible_answer(task: Task, visible: str) -> str:
    """What a reader of ``visible`` answers: the asked person's value of the asked attribute if a
    sentence states it, else the value stated for the most similar-looking name, else ``unknown``."""
    evidence = visible_evidence(task, visible)
    return evidence[0] if evidence is not None else UNKNOWN_ANSWER


def visible_evidence(task: Task, visible: str) -> tuple[str, str] | None:
    """``(value, sentence)`` :func:`visible_answer` reads its answer from, or None when nothing states it: of the
    sentences stating (or changing) the asked attribute, one about the asked person if any, else the most
    similar-looking name's; among equals the first in ``visible`` (a retrieval lists its best match first)."""
    attribute = BY_NAME[task.metadata["attribute"]]
    entity = task.metadata["entity"]
    stated = []
    for template in (attribute.fact, attribute.revision):
        if template is None:
            continue
        pattern = re.escape(template).replace(re.escape("{entity}"), r"(?P<entity>[A-Z][a-z]+ [A-Z][a-z]+)")
        values = "(?P<value>" + "|".join(map(re.escape, attribute.values)) + ")"
        pattern = pattern.replace(re.escape("{value}"), values)
        stated += [(m.start(), m["entity"], m["value"], m.group(0)) for m in re.finditer(pattern, visible)]
    if not stated:
        return None
    stated.sort()  # max keeps the first of equals: the earliest
    _, _, value, sentence = max(
        stated, key=lambda pnvs: (pnvs[1] == entity, difflib.SequenceMatcher(None, pnvs[1], entity).ratio())
    )
    return value, sentence


def stored_earlier(conversation: list[dict[str, str]], sentence: str) -> bool:
    """Whether an assistant reply of ``conversation`` called ``Add_memory`` with ``sentence`` in its content."""
    encoded = json.dumps(sentence)[1:-1]  # as it stands inside the call's JSON
    return any(
        m["role"] == "assistant" and "Add_memory" in called_tools(m["content"]) and encoded in m["content"]
        for m in conversation
    )


def stored_entry(conversation: list[dict[str, str]], sentence: str) -> dict[str, str] | None:
    """``{"memory_id", "content"}`` of the entry an earlier successful ``Add_memory`` of ``conversation`` stored
    ``sentence`` in (the last such), its id read from that call's result ("stored 1 memory entry: m2"); None
    when no Add stored it."""
    found = None
    for reply, results in itertools.pairwise(conversation):
        if reply["role"] != "assistant" or not is_tool_response(results):
            continue
        adds = [call.get("arguments") for call in tool_calls(reply["content"]) if call.get("name") == "Add_memory"]
        added = [p for p in tool_payloads(results["content"]) if p.get("tool") == "Add_memory"]
        for arguments, payload in zip(adds, added):  # one result per call, in the calls' order
            content = arguments.get("content") if isinstance(arguments, dict) else None
            named = re.search(r"entr(?:y|ies): (\S+)$", str(payload.get("message", "")))
            if isinstance(content, str) and sentence in content and payload.get("ok") and named:
                found = {"memory_id": named.group(1), "content": content}
    return found


def tool_calls(text: str) -> list[dict[str, Any]]:
    """The calls (``{"name", "arguments"}``) of an AgeMem response's ``<tool_call>`` (none when it has none or it
    does not parse)."""
    found = re.search(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
    try:
        calls = json.loads(found.group(1)) if found else []
    except ValueError:
        return []
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def called_tools(text: str) -> list[str]:
    """The tool names of an AgeMem response's ``<tool_call>`` (none when it has none or it does not parse)."""
    return [call.get("name", "") for call in tool_calls(text)]


def tool_payloads(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of a tool-response message's ``<tool_response>`` blocks, in their order (an unparsable
    block is skipped)."""
    payloads = []
    for block in re.findall(r"<tool_response>(.*?)</tool_response>", text, re.DOTALL):
        try:
            payload = json.loads(block)
        except ValueError:
            continue
        if isinstance(payload, dict):
            payloads.append(payload)
    return payloads


def retrieved_memories(text: str) -> list[dict[str, Any]]:
    """The memories listed in a tool-response message (``<tool_response>`` blocks of JSON), in their order."""
    return [m for payload in tool_payloads(text) for m in payload.get("memories", []) if isinstance(m, dict)]


@dataclass
class ExpertEngine:
    """An engine whose 'model' is a scripted expert: prompts are decoded back to the conversation,
    and the expert's text is encoded with the policy's tokenizer (plus the end-of-turn id), so
    the demonstrations are token sequences the policy can be trained on directly."""

    tokenizer: PreTrainedTokenizerBase
    expert: Callable[[list[dict[str, str]]], str]
    end_of_turn_id: int
    name: str = "expert"

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        completions = []
        for ids in prompts:
            text = self.expert(parse_chatml(self.tokenizer.decode(list(ids))))
            token_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.end_of_turn_id]
            completions.append(Completion(token_ids, None, "stop"))
        return completions

"""A scripted engine for rollout tests: canned completions chosen by a policy function that
reads the conversation (the prompt ids decoded back to chat messages by the tokenizer's
own template markers), so tests check the episode and driver, not a model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agemem.core.summarizers import SUMMARY_INSTRUCTIONS
from agemem.recipes.learn.expert import parse_chatml
from agemem.rollouts.engines.base import Completion, SamplingParams

IM_END = 151645  # <|im_end|> in the Qwen2.5 tokenizer


@dataclass
class ScriptedEngine:
    """Answers each prompt with ``policy(messages decoded from the prompt ids, call_index)``."""

    tokenizer: Any
    policy: Callable[[list[dict[str, str]]], str]
    name: str = "scripted"
    calls: list[list[str]] = field(default_factory=list)
    """per engine call, the kind of each request: 'summary' or 'action'."""
    fail_on: Callable[[list[dict[str, str]]], bool] | None = None
    summarise: Callable[[str], str] = lambda transcript: "The gist of it."
    """the summary written for a Summary_context request, given the transcript it asked to summarise."""

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        out, kinds = [], []
        for ids in prompts:
            conversation = parse_chatml(self.tokenizer.decode(list(ids)))
            is_summary = conversation[0]["content"] == SUMMARY_INSTRUCTIONS
            kinds.append("summary" if is_summary else "action")
            if self.fail_on is not None and self.fail_on(conversation):
                out.append(Completion([], None, "error", error="scripted failure"))
                continue
            text = self.summarise(_transcript(conversation[-1]["content"])) if is_summary else self.policy(conversation)
            token_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [IM_END]
            out.append(Completion(token_ids, [-0.25] * len(token_ids), "stop"))
        self.calls.append(kinds)
        return out


def _transcript(request: str) -> str:
    found = re.search(r"Transcript:\n(.*)\n\nSummary:", request, re.S)
    return found.group(1) if found else request


def call(name: str, **arguments: Any) -> str:
    return "<think>scripted</think><tool_call>" + json.dumps([{"name": name, "arguments": arguments}]) + "</tool_call>"


def answer(text: str) -> str:
    return f"<think>scripted</think><answer>{text}</answer>"


def tool_payloads(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The JSON payloads of the tool responses among ``messages``, in order."""
    payloads = []
    for message in messages:
        for body in re.findall(r"<tool_response>\s*(.*?)\s*</tool_response>", message["content"], re.S):
            try:
                payloads.append(json.loads(body))
            except json.JSONDecodeError:
                continue
    return payloads


def last_user(conversation: list[dict[str, str]]) -> int | None:
    users = [i for i, m in enumerate(conversation) if m["role"] == "user" and "<tool_response>" not in m["content"]]
    return users[-1] if users else None


NOOP_CRITERIA = "zebra xylophone quasar"
"""filter criteria that match no message: a Filter_context that removes nothing."""
STAGE3_PLANS = {
    None: ("retrieve", "answer"),
    "noop_filter": ("retrieve", "answer"),
    "self_update": ("retrieve", "update_same", "answer"),
    "delete_readd": ("retrieve", "delete", "readd", "answer"),
    "retrieval_spam": ("retrieve", "retrieve", "retrieve", "answer"),
}
"""what the agent does after the question, per reward-farming habit (``farm``)."""


class MemoryAgent:
    """Stage 1: store each fact message, then acknowledge. Stage 2: acknowledge (or filter /
    summarise). Stage 3: retrieve with the question, then answer with the best memory's hint.

    ``farm`` adds a habit that collects reward terms without doing their work: ``noop_filter`` (a Filter_context
    that removes nothing on every distractor), ``self_update`` (rewrite the retrieved memory with its own text),
    ``delete_readd`` (delete the retrieved memory and add it back), ``retrieval_spam`` (retrieve three times)."""

    def __init__(
        self,
        tasks,
        *,
        stage1: str = "store",
        stage2: str = "ack",
        answers: dict[str, str] | None = None,
        never_answer: bool = False,
        farm: str | None = None,
    ):
        self.questions = {t.question: t for t in tasks}
        self.distractors = {d for t in tasks for d in t.distractors}
        self.stage1 = stage1
        self.stage2 = stage2
        self.answers = answers or {t.question: t.answer for t in tasks}
        self.never_answer = never_answer
        self.plan = STAGE3_PLANS[farm]
        self.farm = farm

    def __call__(self, conversation: list[dict[str, str]]) -> str:
        index = last_user(conversation)
        if index is None:  # Filter_context removed the message being answered
            return answer("OK")
        message = conversation[index]["content"]
        replies = conversation[index + 1 :]
        acted = any(m["role"] == "assistant" for m in replies)
        if message in self.questions:
            done = sum(m["role"] == "assistant" for m in replies)
            move = self.plan[min(done, len(self.plan) - 1)]
            if move == "answer":
                return call("Retrieve_memory", query=message) if self.never_answer else answer(self.answers[message])
            if move == "retrieve":
                return call("Retrieve_memory", query=message)
            retrieved = [m for p in tool_payloads(replies) for m in p.get("memories", [])]
            if not retrieved:  # nothing to maintain: answer as the honest agent does
                return answer(self.answers[message])
            first = retrieved[0]
            if move == "update_same":
                return call("Update_memory", memory_id=first["memory_id"], content=first["content"])
            if move == "delete":
                return call("Delete_memory", memory_id=first["memory_id"], confirmation=True)
            return call("Add_memory", content=first["content"])
        if message in self.distractors or self.stage2 == "any":
            if self.farm == "noop_filter" and not acted:
                return call("Filter_context", criteria=NOOP_CRITERIA)
            if acted or self.stage2 == "ack":
                return answer("OK")
            if self.stage2 == "filter":
                return call("Filter_context", criteria=message)
            if self.stage2 == "store":
                return call("Add_memory", content=message)
            return call("Summary_context", span="all")
        if acted or self.stage1 == "ack":
            return answer("OK")
        return call("Add_memory", content=message)


def play_expert(
    tokenizer,
    tasks,
    habits,
    stage_tools="all",
    paragraphs_per_turn=3,
    max_prompt_tokens=0,
    encoder=None,
    id_style="hash",
):
    """The synthetic expert plays each task once through the real driver and env (word-set encoder),
    with ``paragraphs_per_turn`` paragraphs in each Stage-1 message (3: a task's people in one); ``stage_tools``
    is ``rollout.stage_tools``, told to the expert as the recipe tells it; ``max_prompt_tokens`` caps a prompt;
    ``encoder`` replaces the word-set encoder; ``id_style`` is ``env.ltm.id_style``."""
    from agemem.core.chat import end_of_turn_ids
    from agemem.core.tools import PAPER_STAGE_TOOLS
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.recipes.learn.expert import ExpertEngine, SyntheticExpert
    from agemem.rollouts.build import build_driver, build_resources
    from tests.conftest import WordSetEncoder

    config = AgeMemConfig()
    config.env.system_prompt = "Manage your memory."
    config.env.summarizer.backend = "extractive"
    config.env.ltm.id_style = id_style
    config.rollout.rollouts_per_task = 1
    config.rollout.paragraphs_per_turn = paragraphs_per_turn
    config.rollout.introspective_top_k = 0
    config.rollout.stage_tools = stage_tools
    config.rollout.max_prompt_tokens = max_prompt_tokens
    config.rollout.stage2_max_steps = max(10, 2 * max(len(t.distractors) for t in tasks))  # a call and a reply each
    offered = PAPER_STAGE_TOOLS if stage_tools == "paper" else None
    engine = ExpertEngine(tokenizer, SyntheticExpert(tasks, habits, offered), end_of_turn_ids(tokenizer)[0])
    driver = build_driver(
        config.rollout,
        config.sampling,
        engine,
        tokenizer,
        build_resources(config.env, tokenizer, encoder or WordSetEncoder()),
        progress=False,
    )
    return driver.run(tasks, {t.id: t.distractors for t in tasks}).trajectories

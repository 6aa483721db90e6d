"""Addition rules and the evaluators behind them (Xiong et al., §memory addition).

After each task the addition rule decides whether the task's (query, execution) becomes a record:

| rule | adds the execution when | evaluator |
|---|---|---|
| ``fixed`` | never: the bank stays the initial one | — |
| ``add_all`` | always | — |
| ``coarse`` | ``J(query, execution) ≥ coarse_threshold``: a judge that sees no gold answer | :class:`CoarseJudge` |
| ``strict`` | it is correct against the ground truth (QA: EM, or F1 ≥ threshold; ALFWorld: won) | ``strict`` |
| ``policy`` | never by rule: the agent stores and deletes records itself with Add_memory / Delete_memory | — |

The evaluator's score of a task is also its *downstream utility*: what history-based deletion and the
utility-based retention credit to each record that task retrieved (``stream.evaluator``; by default the
addition's own evaluator, strict for rules without one).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agemem.core.files import atomic_open
from agemem.core.httpclient import ChatClient, HTTPRequestError
from agemem.eval.stream.config import StreamConfig, StreamRunConfig
from agemem.rewards.config import JudgeConfig
from agemem.rewards.judges import parse_score

if TYPE_CHECKING:
    from collections.abc import Callable

# --------------------------------------------------------------------------------------------- evaluators


@dataclass(frozen=True)
class Outcome:
    """How one task went, as the rules see it."""

    strict: float
    """ground-truth correctness (1/0)."""
    coarse: float | None = None
    """the coarse judge's score in [0, 1], when the run uses it."""


class CoarseJudge(Protocol):
    """Scores an execution of a query in [0, 1] without the gold answer."""

    name: str

    def score(self, query: str, execution: str) -> float: ...


_NO_ANSWER = re.compile(r"^\s*(?:none|n/?a|unknown|i\s*(?:do not|don't)\s*know|no answer|cannot (?:be )?answer.*)\W*$")


def stated_answer(execution: str) -> str | None:
    """The text after the last ``Answer:`` of an execution; None when there is none."""
    found = re.findall(r"(?im)^\s*answer\s*:\s*(.*)$", execution)
    return found[-1].strip() if found else None


class RuleCoarseJudge:
    """The offline coarse judge: 1 when the execution states an answer that is not a refusal (``Answer: X`` with X
    not empty, ``unknown``, ``n/a``, ``I don't know``, ...) or, for action trajectories, when it reports the task
    done (a line ``Outcome: done``), else 0. It checks form, never correctness: the gold answer is not used."""

    name = "rule:stated-answer"

    def score(self, query: str, execution: str) -> float:
        if re.search(r"(?im)^\s*outcome\s*:\s*done\b", execution):
            return 1.0
        answer = stated_answer(execution)
        return 1.0 if answer and not _NO_ANSWER.match(answer.lower()) else 0.0


COARSE_RUBRIC = (
    "You grade an agent's execution of a task without knowing the correct answer. Judge from the task and the "
    "execution alone whether the execution solves the task correctly: the reasoning should be consistent and "
    "support the final answer or action, and the answer should address what was asked. "
    "Reply with one line and nothing else: 'Score: X', where X is a number from 0 to 1 "
    "(0 = certainly wrong, 1 = certainly correct)."
)


def coarse_messages(query: str, execution: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": COARSE_RUBRIC},
        {"role": "user", "content": f"Task: {query}\n\nExecution:\n{execution}\n\nScore:"},
    ]


@dataclass
class ModelCoarseJudge:
    """A chat model asked :data:`COARSE_RUBRIC`; a failed request or a reply without a score falls back to
    :class:`RuleCoarseJudge` (counted). With ``cache_dir`` every reply is kept by model and prompt."""

    complete: Callable[[list[dict[str, str]]], str]
    name: str
    cache_dir: str = ""
    fallback: CoarseJudge = field(default_factory=RuleCoarseJudge)
    counters: dict[str, int] = field(
        default_factory=lambda: {"requests": 0, "cache_hits": 0, "errors": 0, "unparsable": 0, "fallbacks": 0}
    )

    def score(self, query: str, execution: str) -> float:
        messages = coarse_messages(query, execution)
        reply = self._reply(messages)
        value = None if reply is None else parse_score(reply)
        if reply is not None and value is None:
            self.counters["unparsable"] += 1
        if value is None:
            self.counters["fallbacks"] += 1
            return self.fallback.score(query, execution)
        return value

    def _reply(self, messages: list[dict[str, str]]) -> str | None:
        path = None
        if self.cache_dir:
            key = hashlib.sha256(json.dumps([self.name, messages], sort_keys=True).encode()).hexdigest()
            path = Path(self.cache_dir) / f"{key}.json"
            if path.is_file():
                try:
                    reply = str(json.loads(path.read_text())["reply"])
                    self.counters["cache_hits"] += 1
                    return reply
                except (OSError, ValueError, KeyError):
                    pass
        self.counters["requests"] += 1
        try:
            reply = self.complete(messages)
        except HTTPRequestError:
            self.counters["errors"] += 1
            return None
        if path is not None:
            with atomic_open(path) as handle:
                json.dump({"model": self.name, "reply": reply}, handle)
        return reply


def build_coarse_judge(config: JudgeConfig) -> CoarseJudge:
    """The coarse judge of ``reward.judge``: rules offline; an OpenAI-compatible endpoint or a local model
    asked the coarse rubric, with the rule judge as their fallback."""
    if config.backend == "rule":
        return RuleCoarseJudge()
    if config.backend == "openai":
        client = ChatClient.from_settings(config)
        return ModelCoarseJudge(client, f"llm:{config.model}", config.cache_dir)
    from agemem.core.summarizers import TransformersChatGenerator
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy

    model, tokenizer = load_policy(PolicyConfig(model=config.model, device=config.device, dtype=config.dtype))
    generate = TransformersChatGenerator(model, tokenizer, max_new_tokens=config.max_tokens, temperature=0.0)
    return ModelCoarseJudge(generate, f"transformers:{config.model}")


def evaluator_name(config: StreamConfig) -> str:
    """``stream.evaluator`` resolved: ``auto`` is the addition's own evaluator (coarse for coarse, else strict)."""
    if config.evaluator != "auto":
        return config.evaluator
    return "coarse" if config.addition == "coarse" else "strict"


def uses_coarse(config: StreamConfig) -> bool:
    return config.addition == "coarse" or evaluator_name(config) == "coarse"


def utility(outcome: Outcome, evaluator: str) -> float:
    """The task's downstream utility: the evaluator's score (strict: 1/0; coarse: the judge's score)."""
    if evaluator == "coarse":
        if outcome.coarse is None:
            raise ValueError("the coarse evaluator needs the coarse judge's score")
        return outcome.coarse
    return outcome.strict


# --------------------------------------------------------------------------------------------- rules


class AdditionRule(Protocol):
    name: str

    def admit(self, outcome: Outcome) -> bool:
        """Whether the task's execution becomes a record."""
        ...


class FixedAddition:
    name = "fixed"

    def admit(self, outcome: Outcome) -> bool:
        return False


class AddAll:
    name = "add_all"

    def admit(self, outcome: Outcome) -> bool:
        return True


class StrictAddition:
    """Adds correct executions only (ground truth)."""

    name = "strict"

    def admit(self, outcome: Outcome) -> bool:
        return outcome.strict >= 1.0


@dataclass
class CoarseAddition:
    """Adds executions the coarse judge scores at least ``threshold`` (no gold answer involved)."""

    threshold: float
    name: str = "coarse"

    def admit(self, outcome: Outcome) -> bool:
        if outcome.coarse is None:
            raise ValueError("coarse addition needs the coarse judge's score")
        return outcome.coarse >= self.threshold


class PolicyAddition:
    """The agent writes records itself through Add_memory during the task; the rule adds nothing."""

    name = "policy"

    def admit(self, outcome: Outcome) -> bool:
        return False


def build_addition(config: StreamConfig) -> AdditionRule:
    rules: dict[str, AdditionRule] = {
        "fixed": FixedAddition(),
        "add_all": AddAll(),
        "strict": StrictAddition(),
        "coarse": CoarseAddition(config.coarse_threshold),
        "policy": PolicyAddition(),
    }
    return rules[config.addition]


def coarse_judge_for(config: StreamRunConfig) -> CoarseJudge | None:
    """The coarse judge when the run needs one (coarse addition or evaluator), else None."""
    return build_coarse_judge(config.reward.judge) if uses_coarse(config.stream) else None

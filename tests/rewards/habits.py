"""Neutral habits and the scripted agents they are inserted into, played through the real driver and environment
(real Qwen tokenizer, word-set encoder) and scored with the rule judge: the property test
(``tests/rewards/test_neutral_habits.py``) and ``bench/reward_gaming.py`` use them.

A *neutral habit* is a tool call (or a short run of them) whose effect is erased before the answer, or that leaves
memory and the answer-time context unchanged up to formatting and duplicates. :data:`HABITS` generates them: every
tool, in every stage where it makes sense, each kind of no-op:

* ``Filter_context`` that removes nothing; that removes only the agent's own acknowledgements (in Stage 1 the reset
  erases it; in Stages 2 and 3 the context keeps the call and its result instead of a few "OK"s, so it is not
  strictly neutral there, but it is bookkeeping of the agent's own output and must not pay either);
* ``Summary_context`` in Stage 1 (erased by the reset); a summary that restates its span word for word (longer by
  its header, the same content);
* ``Retrieve_memory`` in Stage 1 (erased), or repeated in Stage 3 (the same memories twice);
* ``Update_memory`` with the same text, or with a cosmetic change (case, the final ".", spacing);
* ``Delete_memory`` then ``Add_memory`` of the same text; an ``Add_memory`` of a stored fact (a duplicate), kept
  or deleted again in any stage; an ``Add_memory`` of junk deleted in the same stage;
* junk stored in Stage 1 (an ``Add_memory`` no fact shares a word with) and cleaned up later: deleted in Stage 2 or
  3, or rewritten (``Update_memory``) into a copy of a stored fact in Stage 1, 2 or 3. The final memory is the
  honest agent's up to duplicates; the junk lowered R_storage, and under ``effects`` the clean-up's R_maintenance
  gives back exactly that (:func:`agemem.rewards.terms.maintenance_reward_effective`), no more.

Agents of different quality (:data:`AGENTS`) each play the tasks without a habit and with one; the test asserts
that no habit raises any agent's total reward on any task under ``reward.terms=effects``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from agemem.core.configlib import load_config
from agemem.core.ltm import LongTermMemory
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rewards.composite import score_trajectories
from agemem.rewards.judges import RuleJudge
from agemem.rollouts.build import build_driver, build_resources, distractors_for
from agemem.rollouts.messages import stage1_messages
from tests.conftest import WordSetEncoder
from tests.rollouts.scripted import NOOP_CRITERIA, ScriptedEngine, answer, call, tool_payloads

JUNK = "zebra xylophone quasar nebula"
"""an entry no fact or question shares a word with."""
OWN_ACKS = "think scripted answer OK"
"""filter criteria that match the agent's acknowledgements (``<think>scripted <label></think><answer>OK</answer>``:
cosine 4 / sqrt(4 x 5) = 0.89 under the word-set encoder) and nothing else it saw (its calls share two words of
ten or more with it: cosine <= 2 / sqrt(4 x 10) = 0.32)."""
GIST = "The gist of it."

AGENTS: dict[str, dict[str, str]] = {
    # stage1: store every Stage-1 message, or only the first; stage2: acknowledge, filter or store each distractor
    "never manages": {"stage1": "store", "stage2": "ack"},
    "manages well": {"stage1": "store", "stage2": "filter"},
    "stores everything": {"stage1": "store", "stage2": "store"},
    "stores little": {"stage1": "first", "stage2": "ack"},
}


@dataclass(frozen=True)
class Habit:
    name: str
    stage: int
    """the stage the habit acts in (its last call)."""
    moves: tuple[str, ...]
    """the agent's extra moves at the habit's turn, before the turn's last reply (ack or answer)."""
    setup: tuple[str, ...] = ()
    """extra moves at the last Stage-1 turn, before its ack (a duplicate to delete later)."""
    neutral: bool = True
    """false: the habit changes the answer-time context or memory (the bench measures it; the property test,
    which asserts on neutral habits, leaves it out)."""

    @property
    def label(self) -> str:
        return f"{self.name} (Stage {self.stage})"


def _habits() -> list[Habit]:
    habits = []
    for stage in (1, 2, 3):
        habits += [
            Habit("filter removing nothing", stage, ("filter_nothing",)),
            Habit("filter of its own acknowledgements", stage, ("filter_acks",)),
            Habit("summary restating its span", stage, ("summary_verbatim",)),
            Habit("update with the same text", stage, ("update_same",)),
            Habit("update dropping the final '.'", stage, ("update_period",)),
            Habit("delete and re-add the same text", stage, ("delete_best", "readd_best")),
            Habit("duplicate a fact in Stage 1, delete the copy", stage, ("delete_dup",), setup=("add_dup",)),
            Habit("add junk and delete it", stage, ("add_junk", "delete_junk")),
            Habit("add junk in Stage 1, rewrite it as a copy of a fact", stage, ("update_junk_copy",), ("add_junk",)),
        ]
    habits += [Habit("add junk in Stage 1, delete it", stage, ("delete_junk",), ("add_junk",)) for stage in (2, 3)]
    habits += [
        Habit("summary", 1, ("summary_gist",)),
        Habit("retrieve", 1, ("retrieve_message",)),
        Habit("retrieve again", 3, ("retrieve_question",)),
        Habit("update in lower case", 3, ("update_lower",)),
        Habit("update with doubled spaces", 3, ("update_spacing",)),
    ]
    return habits


HABITS: list[Habit] = _habits()
NOT_NEUTRAL: list[Habit] = [
    # a fact stored twice and kept: memory is unchanged up to duplicates, but in Stage 3 the copy takes a place in
    # the top-k retrieval that another memory had, so the answer-time context holds one memory fewer
    Habit("duplicate a fact, keep both", 1, (), setup=("add_dup",), neutral=False),
    # a real Stage-2 summary: it replaces the distractors with "The gist of it." (management, not a no-op)
    Habit("summary of the distractors", 2, ("summary_gist",), neutral=False),
]


def _cosmetic(kind: str, text: str) -> str:
    if kind == "update_lower":
        return text.lower()
    if kind == "update_period":
        return text[:-1] if text.endswith(".") else text + "."
    if kind == "update_spacing":
        return "  ".join(text.split())
    return text


@dataclass
class HabitAgent:
    """Plays each task as its profile says (:data:`AGENTS`), plus one habit at the habit's turn: the last Stage-1
    turn, the last Stage-2 turn, or in Stage 3 between the retrieval and the answer. It remembers the memory ids its
    adds returned (per task), as an agent that reads its tool results would.

    Each reply's ``<think>`` carries one word that says where the agent is (``q<task>s<stage>u<turn>m<move>``), so
    it finds its place again when a summary or a filter took the message it was answering out of the context."""

    tasks: Sequence[Any]
    stage1_texts: dict[str, list[str]]
    """task id -> its Stage-1 messages, in order."""
    stage1: str = "store"
    stage2: str = "ack"
    habit: Habit | None = None
    memories: dict[str, dict[str, str]] = field(default_factory=dict)
    """task id -> memory id -> content, from the Add_memory results it saw."""

    def __post_init__(self):
        self.turn_texts: dict[tuple[int, int, int], str] = {}
        for q, task in enumerate(self.tasks):
            self.turn_texts.update({(q, 1, u): text for u, text in enumerate(self.stage1_texts[task.id])})
            self.turn_texts.update({(q, 2, u): text for u, text in enumerate(task.distractors)})
            self.turn_texts[(q, 3, 0)] = task.question
        self.turn_of = {text: where for where, text in self.turn_texts.items()}
        self.last_turn = {(q, s): u for q, s, u in self.turn_texts}  # insertion order: the last turn wins

    # ------------------------------------------------------------------ plan
    def __call__(self, conversation: list[dict[str, str]]) -> str:
        q, stage, turn, done = self._position(conversation)
        task = self.tasks[q]
        self._remember(task.id, conversation)
        plan = self._plan(stage, turn, self.last_turn[(q, stage)])
        move = min(done, len(plan) - 1)
        label = f"q{q}s{stage}u{turn}m{move}"
        return self._move(plan[move], task, self.turn_texts[(q, stage, turn)]).replace("scripted", f"scripted {label}")

    def _position(self, conversation: list[dict[str, str]]) -> tuple[int, int, int, int]:
        """(task index, stage, turn, moves already made in the turn): from the latest user message it knows, or from
        the label of its latest reply when that came later (the message may have been summarised or filtered)."""
        for message in reversed(conversation):
            if message["role"] == "user" and message["content"] in self.turn_of:
                return (*self.turn_of[message["content"]], 0)
            label = re.search(r"scripted q(\d+)s(\d)u(\d+)m(\d+)", message["content"])
            if message["role"] == "assistant" and label:
                q, stage, turn, move = (int(g) for g in label.groups())
                return q, stage, turn, move + 1
        raise ValueError("no message of a known turn and no labelled reply in the conversation")

    def _plan(self, stage: int, turn: int, last_turn: int) -> list[str]:
        if stage == 1:
            plan = ["add_message"] if self.stage1 == "store" or turn == 0 else []
            plan.append("ack")
        elif stage == 2:
            plan = {"ack": [], "filter": ["filter_message"], "store": ["add_message"]}[self.stage2] + ["ack"]
        else:
            plan = ["retrieve_question", "answer"]
        habit = self.habit
        if habit is not None and stage == 1 and turn == last_turn:
            plan[-1:-1] = habit.setup
        if habit is not None and stage == habit.stage and turn == last_turn:
            plan[-1:-1] = habit.moves
        return plan

    # ----------------------------------------------------------------- moves
    def _remember(self, task_id: str, conversation: list[dict[str, str]]) -> None:
        for payload in tool_payloads(conversation):
            if payload.get("tool") == "Add_memory" and payload.get("ok"):
                for memory in payload.get("memories", []):
                    self.memories.setdefault(task_id, {})[memory["memory_id"]] = memory["content"]

    def _best(self, task) -> tuple[str, str]:
        """The first entry it stored that carries the task's supporting fact (else its first entry)."""
        entries = list(self.memories.get(task.id, {}).items())
        facts = [f.text for f in task.supporting_facts if f.text]
        bearing = [(i, c) for i, c in entries if any(f in c for f in facts)]
        return (bearing or entries)[0]

    def _move(self, move: str, task, message: str) -> str:
        simple: dict[str, Callable[[], str]] = {
            "ack": lambda: answer("OK"),
            "answer": lambda: answer(task.answer),
            "add_message": lambda: call("Add_memory", content=message),
            "filter_message": lambda: call("Filter_context", criteria=message),
            "retrieve_question": lambda: call("Retrieve_memory", query=task.question),
            "retrieve_message": lambda: call("Retrieve_memory", query=message),
            "filter_nothing": lambda: call("Filter_context", criteria=NOOP_CRITERIA),
            "filter_acks": lambda: call("Filter_context", criteria=OWN_ACKS),
            "summary_gist": lambda: call("Summary_context", span="all"),
            "summary_verbatim": lambda: call("Summary_context", span="all"),
            "add_junk": lambda: call("Add_memory", content=JUNK),
        }
        if move in simple:
            return simple[move]()
        best_id, best = self._best(task)
        if move.startswith("update_"):
            return call("Update_memory", memory_id=best_id, content=_cosmetic(move, best))
        if move == "delete_best":
            return call("Delete_memory", memory_id=best_id, confirmation=True)
        if move in ("readd_best", "add_dup"):
            return call("Add_memory", content=best)
        entries = self.memories[task.id]
        if move == "delete_dup":
            copy = [i for i, c in entries.items() if c == best and i != best_id][-1]
            return call("Delete_memory", memory_id=copy, confirmation=True)
        if move in ("delete_junk", "update_junk_copy"):
            junk = [i for i, c in entries.items() if c == JUNK][-1]
            if move == "update_junk_copy":
                return call("Update_memory", memory_id=junk, content=best)
            return call("Delete_memory", memory_id=junk, confirmation=True)
        raise ValueError(f"unknown move {move!r}")

    def summary_text(self, transcript: str) -> str:
        """What it writes when asked for a summary: the span word for word under the verbatim habit, else a gist."""
        moves = self.habit.moves if self.habit else ()
        return transcript if "summary_verbatim" in moves else GIST


OVERRIDES = [
    "distractors.generator=task",
    "distractors.cache_dir=",
    "rollout.paragraphs_per_turn=1",
    "rollout.rollouts_per_task=1",
    # room for a habit's extra calls: no habit may reach a round limit (its penalty is not what is tested)
    "rollout.max_steps_per_turn=8",
    "rollout.stage1_max_steps=64",
    "rollout.stage2_max_steps=64",
    "rollout.stage3_max_steps=8",
    # a budget the system prompt (~1.1k tokens) and the facts fit in, as tests/rewards/agents.py
    "env.context.max_context_tokens=4000",
]


def _decimal_id(ltm: LongTermMemory, scope: str, content: str) -> str:
    """``mem_`` + 8 decimal digits (the Qwen tokenizer splits digits one by one: always the same number of tokens).

    The store's ids are ``mem_`` + 8 hex digits of a hash of (scope, sequence number, content), so one extra add
    renumbers every later id, and 8 hex digits take 4 to 8 tokens: a habit that adds (a duplicate, junk, a re-add)
    moves the answer-time context by a few tokens of id either way, and R_compression with it (up to 6e-4 of total
    seen). Ids of a constant token count keep that lottery out of what the property test compares."""
    taken = ltm._scope(scope).entries
    sequence = 0
    while True:
        sequence += 1
        digest = hashlib.sha1(f"{scope}\x00{len(taken)}\x00{sequence}\x00{content}".encode()).hexdigest()
        entry_id = f"mem_{int(digest[:12], 16) % 10**8:08d}"
        if entry_id not in taken:
            return entry_id


def play(tasks, tokenizer, agent: str, habit: Habit | None = None, overrides: Sequence[str] = ()):
    """Agent ``agent`` (:data:`AGENTS`) plays ``tasks`` once each with ``habit`` (None: without one): the
    trajectories, in task order. Memory ids are :func:`_decimal_id`'s."""
    config = load_config(AgeMemConfig, overrides=[*OVERRIDES, *overrides])
    rollout = config.rollout
    stage1_texts = {t.id: stage1_messages(t, rollout.stage1_mode, rollout.paragraphs_per_turn) for t in tasks}
    policy = HabitAgent(tasks, stage1_texts, habit=habit, **AGENTS[agent])
    return play_policy(tasks, tokenizer, policy, overrides, summarise=policy.summary_text)


def play_policy(
    tasks,
    tokenizer,
    policy: Callable[[list[dict[str, str]]], str],
    overrides: Sequence[str] = (),
    *,
    summarise: Callable[[str], str] = lambda transcript: GIST,
):
    """Any scripted ``policy`` (conversation -> reply) plays ``tasks`` once each through the real driver and env
    under :data:`OVERRIDES` (then ``overrides``): the trajectories, in task order."""
    config = load_config(AgeMemConfig, overrides=[*OVERRIDES, *overrides])
    encoder = WordSetEncoder()
    resources = build_resources(config.env, tokenizer, encoder=encoder)
    engine = ScriptedEngine(tokenizer, policy, name="habits", summarise=summarise)
    driver = build_driver(config.rollout, config.sampling, engine, tokenizer, resources, progress=False)
    with mock.patch.object(LongTermMemory, "_new_id", _decimal_id):
        return driver.run(tasks, distractors_for(config.distractors, tasks, encoder)).trajectories


def score(trajectories, tasks, terms: str) -> list[dict[str, float]]:
    """The breakdown of each trajectory under ``reward.terms=terms`` (rule judge; T_max as :func:`play` sets it)."""
    config = load_config(AgeMemConfig, overrides=[*OVERRIDES, f"reward.terms={terms}"])
    return score_trajectories(
        trajectories, {t.id: t for t in tasks}, RuleJudge(), config.reward, config.env.context.max_context_tokens
    )


def calls_made(trajectory) -> int:
    """Tool calls the agent made in a trajectory (a habit adds at least one)."""
    return sum(trajectory.stats.tool_counts.values())

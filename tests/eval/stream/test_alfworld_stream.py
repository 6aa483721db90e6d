"""The ALFWorld stream: the game episode of the adapter on a scripted game (no engine needed), the items of the real
games under tests/data/alfworld, and the tiny random policy through the command line on two real games (needs
the `alfworld` extra; skipped without it)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agemem.eval.stream.agent import BankTools, ChatReply
from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.base import Demonstration
from agemem.eval.stream.runner import read_steps
from agemem.eval.stream.tasks import GameStreamTask
from agemem.tasks.alfworld import (
    SUITE,
    AlfworldConfig,
    Game,
    GameState,
    alfworld_item,
    discover_games,
    task_key,
    task_sentence,
)
from tests.conftest import WordSetEncoder

DATA = Path(__file__).resolve().parents[2] / "data" / "alfworld"


@dataclass
class ScriptedGame:
    """A two-room game: ``go to desk 1`` then ``take pen 1 from desk 1`` wins."""

    game: Game
    said: list[str] = field(default_factory=list)
    closed: bool = False

    def reset(self) -> GameState:
        return GameState("You are in a room. Your task is to: put a pen in drawer.", ["go to desk 1", "look"], False)

    def step(self, command: str) -> GameState:
        self.said.append(command)
        if command == "go to desk 1":
            return GameState("On the desk 1, you see a pen 1.", ["take pen 1 from desk 1", "look"], False)
        return GameState("You pick up the pen 1. You won!", [], True)

    def close(self) -> None:
        self.closed = True


class Replies:
    """A chat model that answers from a list and records the messages it was shown."""

    def __init__(self, *replies: str):
        self.replies = list(replies)
        self.seen: list[list[dict]] = []

    def __call__(self, messages, tools, seed) -> ChatReply:
        self.seen.append([dict(m) for m in messages])
        return ChatReply(self.replies.pop(0), prompt_tokens=10)


def _task(games: list[ScriptedGame]) -> GameStreamTask:
    settings = AlfworldConfig(max_env_steps=5, max_replies_per_step=2)
    return GameStreamTask([], SUITE, settings, open_game=lambda game: games.pop(0))


def _item():
    game = discover_games(str(DATA), "valid_seen")[0]
    return alfworld_item(game)


def test_items_carry_the_task_sentence_and_key_of_each_real_game():
    games = discover_games(str(DATA), "valid_seen")
    assert [task_sentence(g) for g in games] == [
        "put a book in sofa",
        "look at alarmclock under the desklamp",
        "put two book in desk",
    ]
    assert task_key(games[1]) == "look_at_obj_in_light|alarmclock|desklamp"
    item = alfworld_item(games[0])
    assert item.query == "put a book in sofa" and item.ground_truth is None and item.ground_truth_fn is not None


def test_the_game_loop_sends_commands_and_reports_the_outcome():
    game = ScriptedGame(_item().payload)
    model = Replies(
        "I will look around",  # no command: a format error costs a reply, not the step
        "<think>go</think><answer>Go to Desk 1.</answer>",
        "<answer>open drawer 9</answer>",  # not admissible: costs the step
        "<answer>take pen 1 from desk 1</answer>",
    )
    demo = Demonstration("mem_00000001", "put a pen in drawer", "> go to desk 1\nOutcome: done", 0.9)
    no_tools = BankTools(MemoryBank(WordSetEncoder()), offered=())
    attempt = _task([game]).play(_item(), [demo], model, no_tools, seed=3)
    assert attempt.won is True and game.said == ["go to desk 1", "take pen 1 from desk 1"] and game.closed
    assert attempt.execution.splitlines()[0] == "> go to desk 1" and attempt.execution.endswith("Outcome: done")
    assert '> open drawer 9\nNothing happens: "open drawer 9" is not an admissible command' in attempt.execution
    first = model.seen[0][1]["content"]
    assert "memory_id: mem_00000001" in first and "Your task is to: put a pen in drawer." in first
    assert "Admissible commands: go to desk 1, look" in first
    assert _task([]).strict(_item(), attempt) == 1.0 and attempt.replies == 4


def test_the_policy_addition_gets_a_memory_turn_after_the_game():
    game = ScriptedGame(_item().payload)
    model = Replies(
        "<answer>go to desk 1</answer>",
        "<answer>take pen 1 from desk 1</answer>",
        '<tool_call>[{"name": "Add_memory", "arguments": {"content": "go to desk 1, take the pen"}}]</tool_call>',
        "<answer>OK</answer>",
    )
    bank = MemoryBank(WordSetEncoder())
    written = []

    def write(content, metadata):
        record = Record(f"mem_{len(written):08d}", "put a pen in drawer", content, "t", 0, "policy")
        written.append(bank.add(record))
        return record

    attempt = _task([game]).play(_item(), [], model, BankTools(bank, write), seed=None)
    assert attempt.won and [r.execution for r in written] == ["go to desk 1, take the pen"]
    memory_turn = model.seen[2][-1]["content"]
    assert memory_turn.startswith("The task is over.") and "The task was completed." in memory_turn
    assert '"name": "Add_memory"' in model.seen[0][0]["content"]


def test_a_failed_copy_is_a_trajectory_that_does_not_finish():
    execution = _task([]).failed_execution(_item(), random.Random(0))
    assert execution.startswith("> go to ") and execution.endswith("Outcome: not done")


def _alfworld_missing() -> str:
    try:
        from agemem.tasks.alfworld import require_alfworld

        require_alfworld()
    except Exception as err:  # the extra is not installed
        return str(err)
    return ""


@pytest.mark.skipif(bool(_alfworld_missing()), reason=_alfworld_missing() or "alfworld installed")
def test_tiny_policy_runs_a_short_alfworld_stream(tmp_path):
    from agemem.entrypoints.cli import main

    out = tmp_path / "alfworld"
    argv = ["eval", "stream", "--task", "alfworld", "--data-dir", str(DATA), "--model", "tiny-random-qwen2"]
    argv += ["--limit", "2", "--out", str(out), "sampling.max_tokens=4", "logging.progress=false"]
    assert main([*argv, "alfworld.max_env_steps=2", "alfworld.max_replies_per_step=1"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "alfworld" and results["tasks"] == 2 and results["accuracy"] == 0.0
    steps = read_steps(out)
    assert [s["won"] for s in steps] == [False, False] and all(s["error"] is None for s in steps)
    assert steps[1]["retrieved"][0]["task_key"] == "pick_and_place_simple|book|sofa"
    assert all(s["execution"].endswith("Outcome: not done") for s in steps)
    assert steps[0]["precision"] == 0.0  # nothing stored yet

"""The text-game seam on a toy suite registered by the test (no extra needed): a counter game whose goal is to
reach 3. It checks what every game benchmark inherits: the episode (strict and non-strict valid actions, games the
environment ends, the best progress kept), the run's SR / PR / score per task type, the headline column, the
training task and its reward, and resume."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import load_config
from agemem.eval.config import EvalRunConfig
from agemem.eval.games import GameBenchmark, game_columns
from agemem.eval.models import Backend
from agemem.eval.runner import evaluate
from agemem.tasks import get_task, load_tasks
from agemem.tasks.games import register_suite, unregister_suite
from agemem.tasks.textgame import GameConfig, GameItem, GameRef, GameState, GameSuite
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer

GOAL = 3


class Counter:
    """Start at 0; ``add 1`` / ``add 2`` move up, ``sub 1`` down; reaching 3 wins, going below 0 loses (the
    environment ends the game). ``score`` is the counter itself; progress = counter / 3."""

    def __init__(self, game: GameRef, strict: bool):
        self.game, self.strict, self.value = game, strict, 0

    def reset(self) -> GameState:
        return self._state(f"Counter at 0. Your task is to: reach {GOAL}.", goal=f"reach {GOAL}")

    def step(self, command: str) -> GameState:
        moves = {"add 1": 1, "add 2": 2, "sub 1": -1}
        if command not in moves:  # reached only by non-strict suites: the game itself refuses
            return self._state(f'"{command}" is not a counter command.', valid=False)
        self.value += moves[command]
        return self._state(f"Counter at {self.value}.")

    def close(self) -> None:
        pass

    def _state(self, text: str, *, valid: bool = True, goal: str = "") -> GameState:
        won, over = self.value >= GOAL, self.value < 0
        admissible = ["add 1", "add 2"] + (["sub 1"] if self.game.task_type == "updown" else [])
        progress = min(max(self.value, 0) / GOAL, 1.0)
        return GameState(text, admissible, won, progress, over, float(self.value), valid, goal)


def counter_suite(strict: bool = True) -> GameSuite:
    def discover(settings: GameConfig) -> list[GameItem]:
        return [GameItem(f"{kind}-{n}", kind, f"{kind}:{n}") for n in range(2) for kind in ("up", "updown")]

    return GameSuite(
        name="counter",
        title="Counter",
        world="You are playing a counter game. Each game gives you a target number.",
        example_command="add 1",
        task_types=("up", "updown"),
        discover=discover,
        open=lambda game, settings: Counter(game, strict),
        task_labels={"updown": "ud"},
        headline="PR",
        strict_admissible=strict,
        has_progress=True,
        has_score=True,
        describe=lambda settings: {"split": "toy"},
        expert=lambda game, settings: ["add 1", "add 2"],
    )


@dataclass
class CounterRoot(EvalRunConfig):
    counter: GameConfig = field(default_factory=GameConfig)
    """the toy suite's section (``config.<suite.name>``)."""


FAST = [
    "counter.max_env_steps=4",
    "counter.debrief_replies=0",
    "env.summarizer.backend=extractive",
    "logging.progress=false",
    "eval.plot=false",
    "eval.models=[scripted]",
]


@pytest.fixture
def suite() -> Iterator[GameSuite]:
    yield register_suite(counter_suite())
    unregister_suite("counter")


def _run(suite: GameSuite, out: Path, policy, *overrides: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    config = load_config(CounterRoot, overrides=[*FAST, "eval.variants=[no_memory]", *overrides])
    tokenizer = load_tokenizer()
    backends = {"scripted": Backend(MessagesEngine(tokenizer, policy), tokenizer)}
    (results,) = evaluate(GameBenchmark(suite), config, out, backends=backends, encoder=WordSetEncoder())
    examples = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    return results, examples


def _script(*commands: str):
    """Play ``commands`` in order in every game (one per reply), then repeat the last."""

    def policy(conversation: list[dict[str, Any]]) -> str:
        played = sum(m["role"] == "assistant" for m in conversation)
        return answer(commands[min(played, len(commands) - 1)])

    return policy


def test_the_expert_wins_and_pr_sr_and_score_follow_the_states(tmp_path, suite):
    results, examples = _run(suite, tmp_path, _script("add 1", "add 2"))
    assert results["games"] == 4 and results["SR"] == results["PR"] == 100.0
    assert results["score"] == 3.0 and results["steps"] == 2.0 and results["ended_by"] == {"won": 4}
    assert results["PR_type"] == {"up": 100.0, "updown": 100.0} and results["split"] == "toy"
    assert [e["task_type"] for e in examples] == ["up", "updown", "up", "updown"]
    assert examples[0]["task"] == "reach 3" and examples[0]["progress"] == 1.0
    table = (tmp_path / "results.md").read_text()
    # the headline (PR) comes first, then SR and the score, then PR per task type (labels from the suite)
    assert "| n | PR | SR | score | up | ud | steps |" in table
    assert "| scripted | no_memory | 4 | 100.0 | 100.0 | 3.0 | 100.0 | 100.0 | 2.0 |" in table


def test_progress_is_the_best_point_and_a_game_the_environment_ends_is_lost(tmp_path, suite):
    # up games: 1, 2, 2 (add 5 is not admissible: refused, costs the step), 3 -> won in 4 steps
    # updown games: 1, 2, then sub 1 three times -> 1, 0, -1: over (lost) after 5... but max_env_steps=4 ends it at 0
    def policy(conversation: list[dict[str, Any]]) -> str:
        played = sum(m["role"] == "assistant" for m in conversation)
        updown = "sub 1" in conversation[1]["content"]
        script = ["add 1", "add 1", "sub 1", "sub 1"] if updown else ["add 1", "add 1", "add 5", "add 1"]
        return answer(script[played])

    results, examples = _run(suite, tmp_path, policy)
    up, updown = examples[0], examples[1]
    assert up["won"] and up["steps"] == 4 and up["invalid"] == 1 and up["progress"] == 1.0
    assert up["transcript"][2] == {
        "command": "add 5",
        "admissible": False,
        "observation": 'Nothing happens: "add 5" is not an admissible command; write one exactly as listed.',
    }
    # 1, 2, 1, 0: the best point was 2 of 3 (PR keeps it), the final score is 0
    assert not updown["won"] and updown["ended_by"] == "step_limit" and updown["progress"] == pytest.approx(2 / 3)
    assert updown["score"] == 0.0
    assert results["SR"] == 50.0 and results["PR"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert results["SR_type"] == {"up": 100.0, "updown": 0.0}


def test_a_game_the_environment_ends_stops_there(tmp_path, suite):
    results, examples = _run(suite, tmp_path, _script("sub 1"), "counter.limit=2")
    updown = examples[1]
    assert updown["ended_by"] == "lost" and updown["steps"] == 1 and updown["progress"] == 0.0
    assert updown["score"] == -1.0
    up = examples[0]  # sub 1 is not admissible in up games: 4 refused steps
    assert up["ended_by"] == "step_limit" and up["invalid"] == 4 and results["PR"] == 0.0


def test_a_non_strict_suite_lets_the_game_refuse_a_command(tmp_path):
    suite = register_suite(counter_suite(strict=False))
    try:
        results, examples = _run(suite, tmp_path, _script("jump", "add 1", "add 2"), "counter.limit=1")
        assert results["SR"] == 100.0
    finally:
        unregister_suite("counter")
    (example,) = examples
    assert example["won"] and example["invalid"] == 1 and example["steps"] == 3
    assert example["transcript"][0] == {
        "command": "jump",
        "admissible": False,
        "observation": '"jump" is not a counter command.',
    }


def test_a_suite_without_progress_shows_only_sr():
    plain = GameSuite(
        "plain",
        "Plain",
        "A game.",
        "wait",
        ("a", "b"),
        discover=lambda s: [],
        open=lambda g, s: None,  # type: ignore
    )
    headers = [c.header for c in game_columns(plain)]
    assert "SR" in headers and "PR" not in headers and "score" not in headers
    assert headers[headers.index("SR") + 1 : headers.index("SR") + 3] == ["a", "b"]


def test_the_suite_is_a_training_task_with_its_own_prompt(suite):
    config = load_config(CounterRoot, overrides=["data.source=counter", "counter.limit=2", *FAST[:2]])
    spec = get_task("counter")
    tasks = load_tasks(config)
    assert [t.id for t in tasks] == ["up-0", "updown-0"]
    assert tasks[1].metadata == {"benchmark": "counter", "task_type": "updown", "source": "updown:0"}
    configured = spec.configure(config)
    assert configured.env.system_prompt.startswith("You are playing a counter game.")
    assert "at most 4 commands" in configured.env.system_prompt and "e.g. add 1" in configured.env.system_prompt


def test_a_resume_with_other_task_types_is_refused(tmp_path, suite):
    from agemem.core.configlib import ConfigError

    _run(suite, tmp_path, _script("add 1", "add 2"), "counter.limit=2")
    # the snapshots are numbered by position in the games' order, which another selection changes
    with pytest.raises(ConfigError, match="task_types"):
        _run(suite, tmp_path, _script("add 1", "add 2"), "counter.task_types=[updown]")


def test_fewer_live_games_than_a_chunk_play_the_same_games(tmp_path, suite):
    wide, wide_examples = _run(suite, tmp_path / "wide", _script("add 1", "add 2"), "eval.chunk_size=4")
    narrow, narrow_examples = _run(
        suite, tmp_path / "narrow", _script("add 1", "add 2"), "eval.chunk_size=4", "counter.max_live_games=1"
    )
    assert [e["transcript"] for e in narrow_examples] == [e["transcript"] for e in wide_examples]
    assert narrow["SR"] == wide["SR"] == 100.0


def test_a_game_decided_at_reset_is_not_played(tmp_path):
    class Solved(Counter):
        def reset(self) -> GameState:
            self.value = GOAL
            return self._state(f"Counter at {GOAL}. Your task is to: reach {GOAL}.", goal=f"reach {GOAL}")

    solved = dataclasses.replace(counter_suite(), open=lambda game, settings: Solved(game, True))
    register_suite(solved)
    try:
        results, examples = _run(solved, tmp_path, _script("add 1"), "counter.limit=1")
        assert results["SR"] == results["PR"] == 100.0
    finally:
        unregister_suite("counter")
    (example,) = examples
    assert example["won"] and example["steps"] == 0 and example["progress"] == 1.0 and example["ended_by"] == "won"


def test_the_progress_bar_shows_the_step_of_the_games_in_play(tmp_path, suite, monkeypatch):
    """A game of many steps is one item on the bar: between items the bar's status says where the live games are."""
    from agemem.eval import runner

    told: list[tuple[str, Any]] = []

    class Recorder:
        def __init__(self, bar: Any):
            self.bar = bar

        def advance(self, n: int) -> None:
            told.append(("advance", n))

        def status(self, text: str) -> None:
            told.append(("status", text))

    def policy(conversation: list[dict[str, Any]]) -> str:
        # "updown" games (the ones offering "sub 1") think one reply before each command: they fall a step behind
        played = sum(m["role"] == "assistant" for m in conversation)
        if "sub 1" in json.dumps(conversation) and played % 2 == 0:
            return "<think>still thinking</think>"
        return answer("add 1")

    monkeypatch.setattr(runner, "BarProgress", Recorder)
    _run(suite, tmp_path, policy, "eval.chunk_size=2", "counter.max_live_games=2")
    # per chunk (an up and an updown game), after each tick: the up game steps every tick (1, 2, then wins at 3);
    # the updown game steps every second tick (0, 1, 1, 2, 2, then wins at 3)
    per_chunk = [
        ("status", "2 playing, steps 0-1/4"),
        ("status", "2 playing, steps 1-2/4"),
        ("advance", 1),  # tick 3: the up game wins
        ("status", "1 playing, step 1/4"),
        ("status", "1 playing, step 2/4"),
        ("status", "1 playing, step 2/4"),
        ("advance", 1),  # tick 6: the updown game wins
    ]
    assert told == per_chunk * 2


def test_full_context_is_refused_for_a_game_suite():
    from agemem.core.configlib import ConfigError
    from agemem.tasks.games import get_suite

    benchmark = GameBenchmark(get_suite("pddl"))
    with pytest.raises(ConfigError, match="no_memory"):
        benchmark.configure(load_config(EvalRunConfig), "full_context")
    assert benchmark.configure(load_config(EvalRunConfig), "no_memory").env.tools == []

"""SciWorld through the real ScienceWorld simulator: the gold path wins, doing nothing useful does not, an unknown
command changes nothing; progress counts from 0 at reset, so points a game starts with are not credited (also
through the episode loop: a do-nothing agent scores PR 0); a failure state goes on as AgentBoard's, or ends the game
with ``end_on_failure``, and is never won; the split's counts and order; the config checks; the install hint. One
simulator (JVM) serves the whole module and is stopped at its end."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agemem.core.configlib import ConfigError
from agemem.tasks import sciworld
from agemem.tasks.sciworld import SciworldConfig
from agemem.tasks.textgame import GameConfig, GameItem
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer
from tests.games_support import needs

pytestmark = needs("sciworld", ("scienceworld",), ("java",))

SETTINGS = SciworldConfig()
CHEAP_EXPERT_GAMES = (
    "lifespan-longest-lived:93",
    "use-thermometer:405",
    "power-component:15",
    "find-living-thing:225",
    "chemistry-mix-paint-secondary-color:27",
    "identify-life-stages-2:6",
    "grow-plant:94",
    "melt:21",
    "inclined-plane-determine-angle:128",
)
"""the quickest game of every topic but genetics (its gold paths take 20 s to 2 min), quickest first."""


@pytest.fixture(scope="module", autouse=True)
def _one_simulator():
    sciworld.shutdown_simulators()  # what other test modules left running
    yield
    sciworld.shutdown_simulators()
    assert sciworld.running_simulators() == 0


def game(source: str) -> GameItem:
    task, _ = sciworld.parse_source(source)
    return GameItem(source, sciworld.TYPE_OF_TASK[task], source)


def play(source: str, commands: list[str], settings: SciworldConfig = SETTINGS) -> list:
    """The states of a real episode: reset, then each command until the game ends."""
    with sciworld.open_game(game(source), settings) as world:
        states = [world.reset()]
        for command in commands:
            if states[-1].won or states[-1].over:
                break
            states.append(world.step(command))
    return states


# --------------------------------------------------------------------------------------------- playing


@pytest.mark.parametrize("source", CHEAP_EXPERT_GAMES)
def test_the_gold_path_wins(source):
    plan = sciworld.expert_plan(game(source), SETTINGS)
    assert plan and all(command == " ".join(command.lower().split()) for command in plan)
    final = play(source, plan)[-1]
    assert (final.won, final.over, final.progress, final.score) == (True, False, 1.0, 100.0)


def test_the_first_observation_holds_the_task_room_and_inventory():
    first = play("find-living-thing:225", [])[0]
    assert first.goal.startswith("Your task is to find a(n) living thing.")
    assert first.observation.startswith(first.goal)
    assert "This room is called the art studio." in first.observation and "In your inventory" in first.observation
    assert "focus on OBJ" in first.admissible and "reset task" not in first.admissible
    assert (first.won, first.over, first.valid) == (False, False, True)


def test_looking_around_never_wins_keeps_the_start_score_and_gains_no_progress():
    states = play("find-living-thing:225", ["look around", "inventory", "look around"] * 3)
    # openDoors meets the optional "be in a room with an open door" subgoal at once: 8 of 100, held from reset, so
    # progress (counted from reset) stays 0
    assert [(s.won, s.over, s.progress, s.score) for s in states] == [(False, False, 0.0, 8.0)] * len(states)


def test_an_unknown_command_is_invalid_and_changes_nothing():
    states = play("find-living-thing:225", ["look around", "fly to the moon", "reset task", "", "look around"])
    before, unknown, reset, empty, after = states[1:]
    assert [s.valid for s in states[1:]] == [True, False, False, False, True]
    assert unknown.observation == "No known action matches that input."
    assert "not available" in reset.observation and empty.observation == unknown.observation
    assert after.observation == before.observation
    assert {(s.score, s.progress, s.won, s.over) for s in states} == {(8.0, 0.0, False, False)}


def test_an_ambiguous_name_is_answered_with_a_number():
    states = play("find-living-thing:225", ["focus on wood cup", "0"])
    assert states[1].valid and "Ambiguous request" in states[1].observation and states[1].score == 8.0
    assert states[2].observation == "You focus on the wood cup." and states[2].score == -100.0  # a wood cup: not alive
    assert sciworld.failed(states[2]) and not sciworld.failed(states[1])


# --------------------------------------------------------------------------------------------- progress


def test_progress_is_the_share_of_the_points_left_at_reset():
    # a game that starts at 20: 80 points to gain
    assert sciworld.progress_from_score(20, 20) == 0.0
    assert sciworld.progress_from_score(10, 20) == 0.0  # below the start: nothing gained
    assert sciworld.progress_from_score(-100, 20) == 0.0  # a failure state
    assert sciworld.progress_from_score(30, 20) == 0.125  # (30 - 20) / (100 - 20) = 10 / 80
    assert sciworld.progress_from_score(100, 20) == 1.0
    assert sciworld.progress_from_score(50, 0) == 0.5  # a game that starts at 0: score / 100
    assert sciworld.progress_from_score(100, 100) == 1.0 and sciworld.progress_from_score(99, 100) == 0.0


def test_a_game_that_starts_with_points_starts_at_progress_0():
    with sciworld.open_game(game("chemistry-mix-paint-secondary-color:27"), SETTINGS) as world:
        first = world.reset()
        # the simulator's own score at reset (after its "look around"): 20 of 100 met already
        assert world.simulator.server.getScore() == pytest.approx(0.2) and world.start_score == 20
    assert (first.score, first.progress, first.won, first.over) == (20.0, 0.0, False, False)


def test_a_partial_gold_path_scores_the_points_gained_over_the_points_left():
    # the first steps of the gold path of chemistry-mix-paint-secondary-color:27 (violet = red + blue)
    prefix = [
        "look around",
        "pour cup containing red paint in cupboard in cup containing nothing",
        "pour cup containing blue paint in cupboard in cup containing red paint in table",
        "mix cup containing blue paint and red paint",
    ]
    states = play("chemistry-mix-paint-secondary-color:27", prefix)
    assert [s.score for s in states] == [20.0, 20.0, 20.0, 30.0, 40.0]
    # progress = (score - 20) / (100 - 20): (30 - 20) / 80 = 0.125, (40 - 20) / 80 = 0.25 (score / 100 said 0.4)
    assert [s.progress for s in states] == [0.0, 0.0, 0.0, 0.125, 0.25]
    assert not any(s.won or s.over for s in states)
    # find-living-thing:225 starts at 8; moving to another room gains 9: (17 - 8) / (100 - 8) = 9 / 92
    moved = play("find-living-thing:225", ["look around", "go to hallway"])
    assert [(s.score, s.progress) for s in moved] == [(8.0, 0.0), (8.0, 0.0), (17.0, 9 / 92)]


# --------------------------------------------------------------------------------------------- failure states

FAILED_THEN_SOLVED = ["focus on air", "look around", "open door to outside", "go to outside", "focus on crocodile"]
"""lifespan-longest-lived:93 (starts at 0): focusing on the air is a failure state (-100); then the rest of the gold
path (the crocodile lives longest), which the simulator marks completed, at score -100."""


def test_after_a_failure_state_the_game_goes_on_and_is_never_won():
    with sciworld.open_game(game("lifespan-longest-lived:93"), SETTINGS) as world:
        world.reset()
        states = [world.step(command) for command in FAILED_THEN_SOLVED]
        completed = world.simulator.server.getCompleted()
    failure, *after = states
    # the agent is told only the simulator's reply: nothing says the task failed
    assert failure.observation == "You focus on the air." and failure.valid
    assert [(s.score, s.progress, s.won, s.over) for s in states] == [(-100.0, 0.0, False, False)] * len(states)
    assert all(s.valid and sciworld.failed(s) for s in after)  # every command still plays...
    assert after[-1].observation == "You focus on the crocodile egg."
    assert completed  # ...and the simulator completes the task, but keeps -100: not won


def test_end_on_failure_ends_the_game_at_the_failure_state():
    states = play("lifespan-longest-lived:93", FAILED_THEN_SOLVED, SciworldConfig(end_on_failure=True))
    assert len(states) == 2 and not states[0].over  # reset, the failure: the game is over
    final = states[-1]
    assert (final.observation, final.score, final.progress, final.over, final.won) == (
        "You focus on the air.",
        -100.0,
        0.0,
        True,
        False,
    )


def test_the_gold_path_without_the_failure_wins_under_either_setting():
    for settings in (SETTINGS, SciworldConfig(end_on_failure=True)):
        final = play("lifespan-longest-lived:93", FAILED_THEN_SOLVED[2:], settings)[-1]
        assert (final.won, final.over, final.score, final.progress) == (True, False, 100.0, 1.0)


# --------------------------------------------------------------------------------------------- the episode loop

LOOP = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false", "eval.models=[scripted]"]
STARTS_WITH_POINTS = ["classification", "chemistry"]
"""their first games, find-living-thing:225 and chemistry-mix:24, both start at 8 of 100."""


def evaluate(out: Path, policy, *overrides: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``agemem eval sciworld`` with a scripted agent, no memory tools, no debrief, one game at a time (one JVM)."""
    from agemem.core.chat import load_tokenizer
    from agemem.core.configlib import load_config
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.eval.games import evaluate_games
    from agemem.eval.models import Backend

    config = load_config(
        AgeMemConfig,
        overrides=[
            *LOOP,
            "eval.variants=[no_memory]",
            "sciworld.debrief_replies=0",
            "sciworld.max_live_games=1",
            *overrides,
        ],
    )
    tokenizer = load_tokenizer()
    backends = {"scripted": Backend(MessagesEngine(tokenizer, policy), tokenizer)}
    (results,) = evaluate_games("sciworld", config, out, backends=backends, encoder=WordSetEncoder())
    examples = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    return results, examples


def script(*replies: str):
    """Reply with ``replies`` in turn, round and round."""

    def policy(conversation: list[dict[str, Any]]) -> str:
        return replies[sum(m["role"] == "assistant" for m in conversation) % len(replies)]

    return policy


@pytest.mark.parametrize(
    ("replies", "invalid", "no_action"),
    [
        ((answer("look around"), answer("inventory")), 0.0, 0.0),
        ((answer("xyzzy"),), 4.0, 0.0),  # refused by the simulator
        (("I am not sure what to do.",), 0.0, 4.0),  # no command
    ],
    ids=["looks", "refused", "no-command"],
)
def test_an_agent_that_does_nothing_scores_pr_0_on_games_that_start_with_points(tmp_path, replies, invalid, no_action):
    types = f"sciworld.task_types={json.dumps(STARTS_WITH_POINTS)}"
    overrides = [types, "sciworld.limit=2", "sciworld.max_env_steps=4", "sciworld.max_replies_per_step=1"]
    results, examples = evaluate(tmp_path, script(*replies), *overrides)
    assert [e["id"] for e in examples] == ["find-living-thing:225", "chemistry-mix:24"]
    for example in examples:
        with sciworld.open_game(game(example["id"]), SETTINGS) as world:
            assert world.reset().score == 8.0  # the simulator's score at reset: above 0
    assert (results["PR"], results["SR"], results["invalid"], results["no_action"]) == (0.0, 0.0, invalid, no_action)
    assert results["score"] == 8.0  # the points held at reset stay, but are not the agent's progress
    assert all(e["progress"] == 0.0 and e["ended_by"] == "step_limit" and e["steps"] == 4 for e in examples)


def test_the_episode_after_a_failure_state_under_each_setting(tmp_path):
    lifespans = ['sciworld.task_types=["lifespans"]', "sciworld.limit=1", "sciworld.max_env_steps=6"]
    # lifespan-longest-lived:93: going outside gains half the points, then the failure, then the gold path's end:
    # progress stays what was gained before the failure, and the game is never won
    commands = ["open door to outside", "go to outside", "focus on air", "focus on crocodile", "wait1", "look around"]
    policy = script(*(answer(command) for command in commands))
    results, (example,) = evaluate(tmp_path / "default", policy, *lifespans)
    # going outside: 0 -> 50 of 100, progress (50 - 0) / (100 - 0) = 0.5, kept through the failure (-100: 0)
    gained = example["progress"]
    assert example["id"] == "lifespan-longest-lived:93" and gained == 0.5
    assert (example["won"], example["ended_by"], example["steps"], example["score"]) == (False, "step_limit", 6, -100)
    said = [entry["observation"] for entry in example["transcript"]]
    assert said[2:4] == ["You focus on the air.", "You focus on the crocodile egg."]  # no word of the failure
    ended, (short,) = evaluate(tmp_path / "variant", policy, *lifespans, "sciworld.end_on_failure=true")
    assert (short["won"], short["ended_by"], short["steps"], short["score"]) == (False, "lost", 3, -100)
    assert short["progress"] == gained and ended["PR"] == results["PR"] and ended["SR"] == results["SR"] == 0.0


def test_games_reuse_one_simulator_and_the_split_is_made_of_test_variations():
    with sciworld.open_game(game("find-living-thing:225"), SETTINGS) as world:
        world.reset()
        assert set(sciworld.SPLIT["find-living-thing"]) <= set(world.simulator.get_variations_test())
    play("lifespan-shortest-lived:93", ["look around"])
    assert sciworld.running_simulators() == 1


# --------------------------------------------------------------------------------------------- the split


def test_the_split_is_90_games_three_per_task_balanced_over_topics():
    games = sciworld.discover(SETTINGS)
    assert len(games) == 90 and len({g.id for g in games}) == 90
    per_type = Counter(g.task_type for g in games)
    assert per_type == {topic: 3 * len(tasks) for topic, tasks in sciworld.TASKS_BY_TYPE.items()}
    assert [g.task_type for g in games[:10]] == list(sciworld.TASK_TYPES)
    # within a topic, its tasks come in turn before a task's second variation
    electricity = [sciworld.parse_source(g.source)[0] for g in games if g.task_type == "electricity"]
    assert electricity[:4] == list(sciworld.TASKS_BY_TYPE["electricity"])
    assert Counter(sciworld.parse_source(g.source)[0] for g in games) == {task: 3 for task in sciworld.TYPE_OF_TASK}
    assert set(sciworld.TASK_TYPES) == set(sciworld.SUITE.task_types) and not sciworld.SUITE.strict_admissible


def test_fewer_variations_per_task():
    games = sciworld.discover(SciworldConfig(variations_per_task=1))
    assert len(games) == 30 and {sciworld.parse_source(g.source)[1] for g in games[:1]} == {sciworld.SPLIT["boil"][0]}
    assert len(sciworld.discover(GameConfig())) == 90  # a plain game section plays the whole split


def test_a_malformed_source_is_a_config_error():
    for source in ("boil", "boil:x", "fly:3"):
        with pytest.raises(ConfigError, match="<task>:<variation>"):
            sciworld.parse_source(source)


def test_electrical_tasks_keep_their_connect_actions():
    default = SETTINGS.simplifications
    assert "noElectricalAction" in sciworld.simplifications_for("boil", default)
    electrical = sciworld.simplifications_for("test-conductivity", default)
    assert electrical == "selfWateringFlowerPots,openContainers,openDoors"


# --------------------------------------------------------------------------------------------- config and install


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"variations_per_task": 0}, "variations_per_task=0 must be 1, 2 or 3"),
        ({"variations_per_task": 4}, "use limit to play fewer"),
        ({"simplifications": "easy,openDoors"}, "unknown easy"),
        ({"max_env_steps": 0}, "max_env_steps=0"),
    ],
)
def test_config_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        SciworldConfig(**changes).validate()
    SciworldConfig(simplifications="").validate()


def test_the_install_hint_when_the_package_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "scienceworld", None)  # makes `import scienceworld` raise ImportError
    with pytest.raises(sciworld.SciworldMissingError, match=r"pip install 'agemem\[sciworld\]'"):
        sciworld.discover(SETTINGS)
    assert issubclass(sciworld.SciworldMissingError, ConfigError)


def test_the_install_hint_when_java_is_missing(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda program: None)
    with pytest.raises(sciworld.SciworldMissingError, match=r"openjdk-17-jre-headless.*no `java` on PATH"):
        sciworld.require_sciworld()


def test_a_simulator_that_failed_is_not_handed_to_the_next_game(monkeypatch):
    with sciworld.open_game(game("find-living-thing:225"), SETTINGS) as world:
        world.reset()
        broken = world.simulator

        def dead_jvm(simulator, command):
            raise ConnectionError("py4j: the JVM is gone")

        monkeypatch.setattr(sciworld, "_lean_step", dead_jvm)
        with pytest.raises(ConnectionError):
            world.step("look around")
    monkeypatch.undo()
    assert sciworld.running_simulators() == 0  # discarded, not pooled
    with sciworld.open_game(game("find-living-thing:225"), SETTINGS) as world:
        assert world.reset().observation and world.simulator is not broken

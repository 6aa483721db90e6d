"""SciWorld through the real ScienceWorld simulator: the gold path wins, doing nothing useful does not, an unknown
command changes nothing, a failure state ends the game; the split's counts and order; the config checks; the
install hint. One simulator (JVM) serves the whole module and is stopped at its end."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from agemem.core.configlib import ConfigError
from agemem.tasks import sciworld
from agemem.tasks.sciworld import SciworldConfig
from agemem.tasks.textgame import GameConfig, GameItem
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


def play(source: str, commands: list[str]) -> list:
    """The states of a real episode: reset, then each command until the game ends."""
    with sciworld.open_game(game(source), SETTINGS) as world:
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


def test_looking_around_never_wins_and_keeps_the_start_score():
    states = play("find-living-thing:225", ["look around", "inventory", "look around"] * 3)
    # openDoors meets the optional "be in a room with an open door" subgoal at once: 8 of 100
    assert [(s.won, s.over, s.progress, s.score) for s in states] == [(False, False, 0.08, 8.0)] * len(states)


def test_an_unknown_command_is_invalid_and_changes_nothing():
    states = play("find-living-thing:225", ["look around", "fly to the moon", "reset task", "", "look around"])
    before, unknown, reset, empty, after = states[1:]
    assert [s.valid for s in states[1:]] == [True, False, False, False, True]
    assert unknown.observation == "No known action matches that input."
    assert "not available" in reset.observation and empty.observation == unknown.observation
    assert after.observation == before.observation
    assert {(s.score, s.progress, s.won, s.over) for s in states} == {(8.0, 0.08, False, False)}


def test_focusing_on_the_wrong_thing_fails_the_game():
    final = play("find-living-thing:225", ["focus on air", "look around"])[-1]
    assert (final.won, final.over, final.score, final.progress) == (False, True, -100.0, 0.0)


def test_an_ambiguous_name_is_answered_with_a_number():
    states = play("find-living-thing:225", ["focus on wood cup", "0"])
    assert states[1].valid and "Ambiguous request" in states[1].observation and not states[1].over
    assert states[2].observation == "You focus on the wood cup." and states[2].over  # a wood cup is not alive


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

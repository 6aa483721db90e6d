"""BabyAI as a text game: real minigrid episodes through :class:`agemem.tasks.babyai.BabyaiGame` (no mocks of the
environment). The bot's plan wins one game of every family, a useless agent never wins and ends with progress 0,
an invalid command changes nothing, and the split is AgentBoard's 112 games, round-robin over the families."""

from __future__ import annotations

import builtins
from collections import Counter

import pytest

from agemem.core.configlib import ConfigError
from agemem.tasks import babyai
from agemem.tasks.babyai import BabyaiConfig
from tests.games_support import needs

pytestmark = needs("babyai", ("minigrid", "gymnasium"))

ONE_PER_FAMILY = ["BabyAI-GoToSeqS5R2-v0:1236", "BabyAI-OpenRedBlueDoorsDebug-v0:1234", "BabyAI-PickupLoc-v0:1234"]
ONE_PER_FAMILY += ["BabyAI-UnlockToUnlock-v0:1235", "BabyAI-KeyCorridorS6R3-v0:1234"]


def _game(source: str) -> babyai.GameItem:
    env_id, seed = babyai.parse_source(source)
    family = {env: fam for fam, env in babyai.LEVELS}[env_id]
    return babyai.game_of(env_id, seed, family)


def _play(game: babyai.GameItem, commands: list[str], settings: BabyaiConfig) -> list[babyai.GameState]:
    world = babyai.open_game(game, settings)
    try:
        states = [world.reset()]
        for command in commands:
            assert command in states[-1].admissible, (command, states[-1].admissible)
            states.append(world.step(command))
        return states
    finally:
        world.close()


@pytest.mark.parametrize("source", ONE_PER_FAMILY)
@pytest.mark.parametrize("go_to_actions", [True, False])
def test_the_bots_plan_wins_one_game_of_every_family(source, go_to_actions):
    settings = BabyaiConfig(go_to_actions=go_to_actions)
    game = _game(source)
    plan = babyai.expert_plan(game, settings)
    states = _play(game, plan, settings)
    assert states[-1].won and states[-1].progress == 1.0 and not states[-1].over
    assert not any(state.won for state in states[:-1])  # it wins on the last command, not before
    assert all(state.valid for state in states)
    progress = [state.progress for state in states]
    assert progress[0] == 0.0 and progress == sorted(progress)  # milestones are kept once reached
    assert all(command == " ".join(command.lower().split()) for command in plan)
    if not go_to_actions:
        assert not any(command.startswith("go to") for command in plan)


def test_go_to_actions_shorten_the_plan_and_milestones_count_on_the_way():
    game = _game("BabyAI-UnlockToUnlock-v0:1235")
    short = babyai.expert_plan(game, BabyaiConfig())
    long = babyai.expert_plan(game, BabyaiConfig(go_to_actions=False))
    assert any(command.startswith("go to") for command in short) and len(short) < len(long)
    states = _play(game, short, BabyaiConfig())
    # 6 milestones: see and pick up the ball, and for each of the two locked doors its key and its unlocking (the
    # ball comes into view as the second door opens: two at once)
    assert sorted({round(state.progress * 6) for state in states}) == [0, 1, 2, 3, 5, 6]


def test_an_agent_that_only_sends_invalid_commands_never_wins_and_ends_with_progress_0():
    world = babyai.open_game(_game("BabyAI-GoToRedBall-v0:1234"), BabyaiConfig())
    start = world.reset()
    state = start
    for _ in range(30):
        state = world.step("fly to the moon")
    world.close()
    assert not state.won and not state.over and state.progress == 0.0
    assert not state.valid and "not a valid action" in state.observation
    assert state.admissible == start.admissible and state.observation.endswith(start.observation.split("\n", 1)[1])


def test_an_invalid_command_changes_nothing():
    world = babyai.open_game(_game("BabyAI-Unlock-v0:1234"), BabyaiConfig())
    start = world.reset()
    pose = world.pose
    refused = world.step("pick up blue key")  # the key is beside the agent, not in front of it
    assert not refused.valid and world.pose == pose and world.env.step_count == 0
    assert refused.admissible == start.admissible and refused.progress == start.progress
    moved = world.step("Turn  Left.")  # normalised as the episode sends it
    assert moved.valid and world.pose != pose and moved.observation.startswith("You turn left.")
    world.close()


def test_the_first_observation_states_the_mission_and_the_view():
    world = babyai.open_game(_game("BabyAI-Unlock-v0:1234"), BabyaiConfig())
    state = world.reset()
    world.close()
    assert state.goal == "open a green door" and state.observation.startswith("Your mission: open a green door.")
    assert "You are carrying nothing." in state.observation
    assert "a blue key 1 step to your right" in state.observation
    assert state.admissible[:3] == ["turn left", "turn right", "move forward"]
    assert "go to blue key" in state.admissible and state.progress == 0.0 and state.score is None


def test_step_before_reset_is_an_error():
    world = babyai.open_game(_game("BabyAI-GoToRedBall-v0:1234"), BabyaiConfig())
    with pytest.raises(RuntimeError, match="before reset"):
        world.step("turn left")
    world.close()


def test_the_split_is_agentboards_112_games_round_robin_over_the_families():
    games = babyai.discover(BabyaiConfig())
    assert len(games) == 112 and len({game.id for game in games}) == 112
    assert Counter(game.task_type for game in games) == {"goto": 44, "open": 20, "pickup": 20, "unlock": 20, "find": 8}
    assert [game.task_type for game in games[:10]] == list(babyai.TASK_TYPES) * 2
    assert Counter(game.task_type for game in games[:40]) == dict.fromkeys(babyai.TASK_TYPES, 8)
    assert games[0] == babyai.GameItem("GoToRedBallGrey-v0-s1234", "goto", "BabyAI-GoToRedBallGrey-v0:1234")
    seeds = Counter(babyai.parse_source(game.source) for game in games)
    assert ("BabyAI-UnlockToUnlock-v0", 1234) not in seeds and ("BabyAI-UnlockToUnlock-v0", 1238) in seeds
    assert {seed for (_, seed) in seeds} == {1234, 1235, 1236, 1237, 1238}
    assert len(babyai.discover(BabyaiConfig(first_seed=0, episodes_per_level=1))) == 28
    assert babyai.SUITE.discover is babyai.discover and babyai.SUITE.task_types == babyai.TASK_TYPES


def test_a_malformed_source_is_a_config_error():
    with pytest.raises(ConfigError, match="<BabyAI env id>:<seed>"):
        babyai.parse_source("GoToRedBall:one")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("first_seed", -1, "first_seed=-1 must be >= 0"), ("episodes_per_level", 0, "episodes_per_level=0 must be >= 1")],
)
def test_config_validation_names_the_problem(field, value, message):
    with pytest.raises(ConfigError, match=message):
        BabyaiConfig(**{field: value}).validate()
    with pytest.raises(ConfigError, match="max_env_steps=0"):
        BabyaiConfig(max_env_steps=0).validate()
    BabyaiConfig().validate()


def test_without_minigrid_the_error_says_how_to_install_it(monkeypatch):
    real_import = builtins.__import__

    def no_minigrid(name, *args, **kwargs):
        if name.split(".")[0] == "minigrid":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_minigrid)
    with pytest.raises(babyai.BabyaiMissingError, match=r"pip install 'agemem\[babyai\]'") as caught:
        babyai.discover(BabyaiConfig())
    assert isinstance(caught.value, ConfigError)

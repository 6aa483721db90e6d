"""BabyAI as a text game: real minigrid episodes through :class:`agemem.tasks.babyai.BabyaiGame` (no mocks of the
environment). The bot's plan wins one game of every family under each action set, a useless agent never wins and
ends with progress 0, a half-played game scores its milestones, an invalid command changes nothing, AgentBoard's
commands and mission wording are the defaults, the expert gives up within its budget where the bot loops, and the
split is AgentBoard's 112 games, round-robin over the families."""

from __future__ import annotations

import builtins
import os
import re
from collections import Counter

import pytest

from agemem.core.configlib import ConfigError
from agemem.tasks import babyai, babyai_view
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


AGENTBOARD_COMMAND = re.compile(
    r"turn left|turn right|move forward|drop|toggle|check valid actions"
    r"|(go to|pickup) \w+ \w+ \d+|go to \w+ (open|closed|locked) door \d+"
    r"|go through \w+ open door \d+|toggle and go through \w+ (closed|locked) door \d+"
)
"""AgentBoard's command words (``babyai_env.py``'s action space) with its object names."""


@pytest.mark.parametrize("source", ONE_PER_FAMILY)
@pytest.mark.parametrize("actions", babyai.ACTION_SETS)
def test_the_bots_plan_wins_one_game_of_every_family(source, actions):
    settings = BabyaiConfig(actions=actions)
    game = _game(source)
    plan = babyai.expert_plan(game, settings)
    states = _play(game, plan, settings)
    assert states[-1].won and states[-1].progress == 1.0 and not states[-1].over
    assert not any(state.won for state in states[:-1])  # it wins on the last command, not before
    assert all(state.valid for state in states)
    progress = [state.progress for state in states]
    assert progress[0] == 0.0 and progress == sorted(progress)  # milestones are kept once reached
    assert all(command == " ".join(command.lower().split()) for command in plan)
    if actions == "agentboard":
        assert all(AGENTBOARD_COMMAND.fullmatch(command) for command in plan), plan
    else:
        ours = re.compile(r"turn left|turn right|move forward|(go to|pick up|drop|open|close) \w+ \w+( \d+)?")
        assert all(ours.fullmatch(command) for command in plan), plan
        assert not any(re.search(r"(open|closed|locked) door|pickup|toggle", command) for command in plan)
    if actions == "primitives":
        assert not any(command.startswith("go to") for command in plan)


def test_macros_shorten_the_plan_and_milestones_count_on_the_way():
    game = _game("BabyAI-UnlockToUnlock-v0:1235")
    plans = {actions: babyai.expert_plan(game, BabyaiConfig(actions=actions)) for actions in babyai.ACTION_SETS}
    assert len(plans["agentboard"]) < len(plans["primitives_go_to"]) < len(plans["primitives"])
    assert any(command.startswith("pickup ") for command in plans["agentboard"])
    assert any(command.startswith("go to") for command in plans["primitives_go_to"])
    states = _play(game, plans["primitives_go_to"], BabyaiConfig(actions="primitives_go_to"))
    # 6 milestones: see and pick up the ball, and for each of the two locked doors its key and its unlocking (the
    # ball comes into view as the second door opens: two at once)
    assert sorted({round(state.progress * 6) for state in states}) == [0, 1, 2, 3, 5, 6]


def test_agentboards_macros_walk_and_act_in_one_command():
    settings = BabyaiConfig()  # AgentBoard's commands are the default
    world = babyai.open_game(_game("BabyAI-Unlock-v0:1234"), settings)
    try:
        start = world.reset()
        # the blue key is beside the agent: pickup turns to it and picks it up, two grid steps for one command
        assert "pickup blue key 1" in start.admissible and "drop" not in start.admissible
        carrying = world.step("pickup blue key 1")
        assert carrying.valid and world.env.carrying.type == "key" and world.env.step_count == 2
        assert "drop" in carrying.admissible and not any(c.startswith("pickup") for c in carrying.admissible)
        assert carrying.observation.startswith("You pick up blue key 1.\nYou are carrying a blue key.")
        # a closed door: walk to it, open it and step into the doorway
        door_cell = next(
            item.position
            for item in babyai_view.view_of(world.env, "agentboard").objects
            if item.name == "purple closed door 1"
        )
        through = world.step("toggle and go through purple closed door 1")
        assert through.valid and world.pose[0] == door_cell and world.env.grid.get(*door_cell).is_open
        # turned back, the open door is one to go through, and no longer a closed one
        back = world.step("turn left")
        back = world.step("turn left")
        assert "go through purple open door 1" not in back.admissible  # the agent stands in it
        world.step("move forward")
        turned = world.step("turn left")
        turned = world.step("turn left")
        assert "go through purple open door 1" in turned.admissible
        assert "toggle and go through purple closed door 1" not in turned.admissible
        # check valid actions lists them and changes nothing
        pose, steps = world.pose, world.env.step_count
        check = world.step("check valid actions")
        assert check.valid and world.pose == pose and world.env.step_count == steps
        assert check.observation.startswith("The valid actions now: turn left, turn right")
    finally:
        world.close()


def test_a_locked_door_opens_only_with_a_key_of_its_colour():
    settings = BabyaiConfig()
    game = _game("BabyAI-UnlockToUnlock-v0:1235")  # "pick up the ball" behind a blue door; the blue key behind a green
    plan = babyai.expert_plan(game, settings)
    states = _play(game, plan, settings)
    open_blue = "toggle and go through blue locked door 1"
    carried = [re.search(r"You are carrying (a \w+ \w+|nothing)", state.observation)[1] for state in states]
    seen = [state for state in states if "blue locked door 1" in state.observation]
    assert {carried[states.index(state)] for state in seen} >= {"nothing", "a green key", "a blue key"}
    for state in seen:  # offered while carrying a blue key, and only then
        assert (open_blue in state.admissible) == (carried[states.index(state)] == "a blue key")
    toggled = plan.index("toggle")  # the green door, facing it with the green key
    assert plan[toggled - 1] == "go to green locked door 1" and "pickup green key 1" in plan[:toggled]
    assert "toggle" in states[toggled].admissible and "toggle" not in states[toggled - 1].admissible
    assert "You see a green open door 1 right in front of you" in states[toggled + 1].observation
    assert states[plan.index("drop") + 1].observation.startswith("You drop the green key.")


def test_the_mission_reads_as_agentboard_words_it_by_default():
    assert babyai.agentboard_mission("open the red door, then open the blue door") == (
        "open the red door, and open the blue door"
    )
    assert babyai.agentboard_mission("open the blue door after you open the red door") == (
        "open the blue door and open the red door"
    )
    game = _game("BabyAI-OpenDoorsOrderN4-v0:1234")
    default = babyai.open_game(game, BabyaiConfig())
    minigrid = babyai.open_game(game, BabyaiConfig(mission_wording="minigrid"))
    try:
        ours, theirs = default.reset(), minigrid.reset()
    finally:
        default.close()
        minigrid.close()
    assert ours.goal == "open the blue door and open the red door"
    assert ours.observation.startswith("Your mission: open the blue door and open the red door.")
    assert theirs.goal == "open the blue door after you open the red door"
    assert ours.admissible == theirs.admissible  # the wording changes nothing else


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


def test_no_milestone_is_met_at_reset_in_any_game_of_the_split():
    # a game never acted on scores progress 0 (the episode also starts its progress rate at 0)
    for game in babyai.discover(BabyaiConfig()):
        world = babyai.open_game(game, BabyaiConfig())
        try:
            state = world.reset()
            assert state.progress == 0.0 and not state.won, game.id
            # asking for the actions is accepted and changes nothing: still 0
            assert world.step("check valid actions").progress == 0.0, game.id
        finally:
            world.close()


def test_a_half_played_game_scores_its_milestones():
    settings = BabyaiConfig()
    # "open the red door, then open the blue door": 4 milestones (see the red door, open it, see the blue door,
    # open it); at the start the agent faces a wall and sees no door
    states = _play(
        _game("BabyAI-OpenRedBlueDoorsDebug-v0:1234"), ["turn left", "go to red closed door 1", "toggle"], settings
    )
    assert [state.progress for state in states] == [0.0, 1 / 4, 1 / 4, 2 / 4]  # seen 1/4; seen and opened 2/4
    assert not states[-1].won
    # "pick up the purple key": 2 milestones (see it, pick it up); two turns bring it into view: 1/2
    states = _play(_game("BabyAI-PickupLoc-v0:1234"), ["turn right", "turn right"], settings)
    assert [state.progress for state in states] == [0.0, 0.0, 1 / 2]
    won = _play(_game("BabyAI-PickupLoc-v0:1234"), ["turn right", "turn right", "pickup purple key 1"], settings)
    assert won[-1].won and won[-1].progress == 1.0


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
    # AgentBoard's names: always numbered, a door with its state
    assert "a blue key 1 1 step to your right; a purple closed door 1 3 steps forward" in state.observation
    assert state.admissible == [
        "turn left",
        "turn right",
        "move forward",
        "pickup blue key 1",
        "toggle and go through purple closed door 1",
        "toggle and go through yellow closed door 1",
        "go to blue key 1",
        "go to purple closed door 1",
        "go to yellow closed door 1",
        "check valid actions",
    ]
    assert state.progress == 0.0 and state.score is None


def test_our_primitives_and_names_are_a_variant():
    world = babyai.open_game(_game("BabyAI-Unlock-v0:1234"), BabyaiConfig(actions="primitives_go_to"))
    state = world.reset()
    world.close()
    assert "a blue key 1 step to your right; a closed purple door 3 steps forward" in state.observation
    assert state.admissible == [
        "turn left",
        "turn right",
        "move forward",
        "go to blue key",
        "go to purple door",
        "go to yellow door",
    ]
    primitives = babyai.open_game(_game("BabyAI-Unlock-v0:1234"), BabyaiConfig(actions="primitives"))
    assert primitives.reset().admissible == ["turn left", "turn right", "move forward"]
    primitives.close()


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
    assert {("BabyAI-UnlockToUnlock-v0", 1234)} == babyai.SKIPPED  # the only game left out
    assert len(babyai.discover(BabyaiConfig(first_seed=0, episodes_per_level=1))) == 28
    # the split does not run the bot: a game it loops on stays in (the expert's budget answers for it)
    other = babyai.discover(BabyaiConfig(first_seed=9003, episodes_per_level=1))
    assert babyai.GameItem("UnlockToUnlock-v0-s9003", "unlock", "BabyAI-UnlockToUnlock-v0:9003") in other
    assert babyai.SUITE.discover is babyai.discover and babyai.SUITE.task_types == babyai.TASK_TYPES


def test_a_malformed_source_is_a_config_error():
    with pytest.raises(ConfigError, match="<BabyAI env id>:<seed>"):
        babyai.parse_source("GoToRedBall:one")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("first_seed", -1, "first_seed=-1 must be >= 0"),
        ("episodes_per_level", 0, "episodes_per_level=0 must be >= 1"),
        ("actions", "macros", "babyai.actions='macros' is not one of agentboard, primitives_go_to, primitives"),
        ("mission_wording", "then", "babyai.mission_wording='then' is not one of agentboard, minigrid"),
    ],
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


def test_a_bad_action_set_in_the_config_names_the_choices():
    from agemem.core.configlib import load_config
    from agemem.tasks.config import TaskRunConfig

    with pytest.raises(ConfigError, match=r"babyai.actions='go_to'.*'agentboard', 'primitives_go_to', 'primitives'"):
        load_config(TaskRunConfig, None, ["babyai.actions=go_to"])
    config = load_config(TaskRunConfig, None, ["babyai.actions=primitives", "babyai.mission_wording=minigrid"])
    assert (config.babyai.actions, config.babyai.mission_wording) == ("primitives", "minigrid")
    assert babyai.describe(config.babyai)["actions"] == "primitives"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_expert_gives_up_within_its_budget_where_the_bot_loops():
    settings = BabyaiConfig()
    babyai.expert_plan(_game("BabyAI-GoToRedBall-v0:1234"), settings)  # the worker runs
    looping = babyai.expert_worker()
    assert looping is not None
    # the bot never returns on this game (past 5 minutes and 1 GB when it ran in the caller's process)
    with pytest.raises(babyai.NoPlanError, match=r"UnlockToUnlock-v0:9003: .*within the expert's budget of 2 s"):
        babyai.expert_plan(_game("BabyAI-UnlockToUnlock-v0:9003"), settings, budget_s=2)
    assert issubclass(babyai.NoPlanError, RuntimeError)  # what the expert raised before, and callers catch
    assert babyai.expert_worker() is None and not _running(looping)  # the looping worker was killed
    # a fresh worker plans the next game, and its plan wins
    game = _game("BabyAI-GoToRedBall-v0:1234")
    states = _play(game, babyai.expert_plan(game, settings), settings)
    assert states[-1].won
    assert babyai.expert_worker() not in (None, looping)


def test_the_experts_worker_has_bounded_memory():
    babyai.expert_plan(_game("BabyAI-GoToRedBall-v0:1234"), BabyaiConfig())
    pid = babyai.expert_worker()
    if not os.path.exists(f"/proc/{pid}/limits"):
        pytest.skip("no /proc on this system")
    with open(f"/proc/{pid}/limits") as file:
        limits = file.read()
    address_space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert address_space.split()[3:5] == [str(babyai.EXPERT_MEMORY_BYTES)] * 2


@pytest.mark.slow
@pytest.mark.parametrize("actions", babyai.ACTION_SETS)
def test_the_expert_wins_every_game_of_the_split(actions):
    settings = BabyaiConfig(actions=actions)
    for game in babyai.discover(settings):
        states = _play(game, babyai.expert_plan(game, settings), settings)
        assert states[-1].won, game.id

"""FrozenLake, the worked example of a new environment (one module, agemem/tasks/frozenlake.py): gymnasium's lakes
played as a text game. The expert's path wins every lake of the split in as many moves as the shortest safe path;
a hole ends the game lost; the shore is no command; the agent sees only its neighbours; progress is the best share
of the way covered."""

from __future__ import annotations

import itertools

import pytest

from agemem.core.configlib import ConfigError
from agemem.entrypoints.roots import load_command_config
from agemem.tasks.games import game_settings, get_suite, load_games
from tests.games_support import needs

pytestmark = needs("frozenlake", ("gymnasium",))


def _frozenlake():
    from agemem.tasks import frozenlake

    return frozenlake


def _game(size: int, seed: int):
    from agemem.tasks.textgame import GameItem

    return GameItem(f"lake{size}-{seed}", f"{size}x{size}", f"{size}:{seed}")


def _play(world, commands):
    states = [world.reset()]
    for command in commands:
        states.append(world.step(command))
    world.close()
    return states


@pytest.mark.parametrize(("size", "seed", "share"), itertools.product((4, 6, 8), range(6), (0.6, 0.8)))
def test_the_expert_crosses_every_lake_on_a_shortest_safe_path(size, seed, share):
    frozenlake = _frozenlake()
    settings = frozenlake.FrozenLakeConfig(frozen_share=share)
    game = _game(size, seed)
    rows = frozenlake.lake(game, settings)
    assert len(rows) == size and rows[0][0] == "S" and rows[-1][-1] == "G"
    plan = frozenlake.expert_plan(game, settings)
    assert len(plan) == frozenlake.distances(rows)[(0, 0)] >= 2 * (size - 1)  # no shorter than the Manhattan way
    states = _play(frozenlake.open_game(game, settings), plan)
    assert [s.won for s in states] == [False] * len(plan) + [True]
    assert not any(s.over for s in states) and all(s.valid for s in states)
    progress = [s.progress for s in states]
    # each move of a shortest path is one step closer: progress rises by 1/len(plan) a move, to 1 at the goal
    assert progress == pytest.approx([k / len(plan) for k in range(len(plan) + 1)])


def test_a_hole_ends_the_game_lost_and_the_shore_is_no_command():
    frozenlake = _frozenlake()
    settings = frozenlake.FrozenLakeConfig()
    game = next(
        _game(4, seed)
        for seed in range(50)
        if frozenlake.lake(_game(4, seed), settings)[0][1] == "H"  # a hole east of the start
    )
    world = frozenlake.open_game(game, settings)
    start = world.reset()
    assert start.admissible == ["go south", "go east"]  # west and north are the shore
    assert "east: a hole" in start.observation and "north: the shore" in start.observation
    assert "row 4, column 4" in start.goal and not start.won
    refused = world.step("go north")
    assert not refused.valid and "cannot go north" in refused.observation and refused.progress == 0.0
    fell = world.step("go east")
    world.close()
    assert fell.over and not fell.won and fell.admissible == [] and "fell through a hole" in fell.observation
    assert fell.progress == 0.0


def test_the_split_is_round_robin_over_sizes_and_seeded_by_the_section():
    config = load_command_config("eval", None, ["frozenlake.maps_per_size=2", "frozenlake.first_seed=10"])
    suite = get_suite("frozenlake")
    games = load_games(config, suite)
    assert [g.id for g in games] == ["lake4-10", "lake6-10", "lake8-10", "lake4-11", "lake6-11", "lake8-11"]
    assert suite.describe(game_settings(config, suite))["first_seed"] == 10
    two = load_games(load_command_config("eval", None, ["frozenlake.task_types=[8x8]", "frozenlake.limit=1"]), suite)
    assert [g.id for g in two] == ["lake8-0"]


@pytest.mark.parametrize("override", ["frozenlake.frozen_share=0.2", "frozenlake.maps_per_size=0"])
def test_bad_settings_are_named(override):
    with pytest.raises(ConfigError, match=override.split("=")[0].replace(".", r"\.")):
        load_command_config("eval", None, [override])

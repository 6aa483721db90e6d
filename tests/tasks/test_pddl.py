"""PDDL as a text game: real problems played through our STRIPS simulator (no mocks). The planner's plan wins a
problem of every domain, a useless agent never makes progress, invalid actions change nothing, the split is
AgentBoard-sized and balanced, the bundled files equal a fresh generation. Needs the `pddl` extra (pyperplan)."""

from __future__ import annotations

import builtins
import dataclasses
import shutil
from pathlib import Path

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.tasks import pddl
from agemem.tasks.config import TaskRunConfig
from agemem.tasks.games import load_games
from agemem.tasks.pddl import PddlConfig
from agemem.tasks.textgame import GameItem
from tests.games_support import needs

pytestmark = needs("pddl", ("pyperplan",))

SETTINGS = PddlConfig()
COUNTS = {"gripper": 20, "blocksworld": 10, "barman": 20, "tyreworld": 10}
FIRST = {domain: GameItem(f"{domain}/p01", domain, f"{domain}/p01.pddl") for domain in pddl.DOMAINS}


def play(game: GameItem, commands: list[str]) -> list:
    """The states after reset and after each command, played through the suite's own ``open``."""
    world = pddl.SUITE.open(game, SETTINGS)
    states = [world.reset()]
    states += [world.step(command) for command in commands]
    world.close()
    return states


@pytest.mark.parametrize("domain", pddl.DOMAINS)
def test_the_planner_s_plan_wins_a_problem_of_every_domain(domain):
    plan = pddl.SUITE.expert(FIRST[domain], SETTINGS)
    states = play(FIRST[domain], plan)
    assert plan and all(state.valid for state in states)
    assert all(command in before.admissible for command, before in zip(plan, states))  # strict list: each was listed
    assert states[-1].won and states[-1].progress == 1.0 and not any(state.won for state in states[:-1])
    assert states[0].progress == 0.0 and "The goal is satisfied." in states[-1].observation
    assert max(state.progress for state in states) == 1.0 and states[-1].score is None


def test_the_first_observation_has_the_rules_the_goal_and_the_state():
    state = play(FIRST["blocksworld"], [])[0]
    goal = pddl.PddlGame(
        pddl.PROBLEMS_DIR / "blocksworld" / "domain.pddl", pddl.PROBLEMS_DIR / "blocksworld" / "p01.pddl"
    ).task.problem.goal
    assert state.observation.startswith("Blocksworld: ") and "Current state: " in state.observation
    assert all(f"{upper} is on {lower}" in state.goal for _, upper, lower in goal) and state.goal in state.observation
    assert state.admissible == sorted(state.admissible) and all(c == c.lower().strip() for c in state.admissible)
    barman = play(FIRST["barman"], [])[0]
    assert "Facts that never change: " in barman.observation and "the first ingredient of cocktail1 is" in (
        barman.observation
    )


def test_an_agent_that_does_nothing_useful_never_wins_and_makes_no_progress():
    for domain in pddl.DOMAINS:
        states = play(FIRST[domain], ["look around", "inventory", "check valid actions"] * 10)
        assert not any(state.won or state.over for state in states)
        assert [state.progress for state in states] == [0.0] * 31  # every goal condition starts false
        assert not any(state.valid for state in states[1:])


def test_an_invalid_action_is_refused_with_the_reason_and_changes_nothing():
    world = pddl.open_game(FIRST["blocksworld"], SETTINGS)
    start = world.reset()
    before = world.state
    unknown = world.step("fly to the moon")
    assert not unknown.valid and unknown.observation.startswith(pddl.INVALID) and world.state == before
    block = next(c.split()[-1] for c in start.admissible if c.startswith("pick up ") or c.startswith("unstack "))
    blocked = world.step(f"stack {block} on {block}")  # the arm holds nothing
    assert not blocked.valid and "needs that the arm is holding" in blocked.observation and world.state == before
    assert blocked.admissible == start.admissible and blocked.progress == start.progress
    moved = world.step(start.admissible[0].upper())  # commands are read in any case
    assert moved.valid and world.state != before


def test_an_action_that_changes_nothing_is_invalid_and_not_listed():
    world = pddl.open_game(FIRST["gripper"], SETTINGS)
    start = world.reset()
    room = next(atom[1] for atom in world.state if atom[0] == "at-robby")
    assert f"move from {room} to {room}" not in start.admissible
    stay = world.step(f"move from {room} to {room}")
    assert not stay.valid and "would change nothing" in stay.observation


def test_discovery_is_agentboard_sized_and_round_robin_over_the_domains():
    games = pddl.SUITE.discover(SETTINGS)
    assert len(games) == 60 and {d: sum(g.task_type == d for g in games) for d in pddl.DOMAINS} == COUNTS
    assert [g.task_type for g in games[:8]] == [*pddl.DOMAINS, *pddl.DOMAINS]
    assert [g.id for g in games[:4]] == [f"{d}/p01" for d in pddl.DOMAINS]
    assert [g.task_type for g in games[40:44]] == ["gripper", "barman", "gripper", "barman"]  # the short ones are done
    assert all((pddl.PROBLEMS_DIR / g.source).is_file() and g.id == g.source.removesuffix(".pddl") for g in games)
    config = load_config(TaskRunConfig, overrides=["pddl.task_types=[tyreworld,blocksworld]"])
    only = load_games(config, pddl.SUITE)  # pddl.task_types keeps the domains' games, in the split's order
    assert [g.task_type for g in only[:3]] == ["blocksworld", "tyreworld", "blocksworld"] and len(only) == 20


def test_the_bundled_problems_equal_a_fresh_generation(tmp_path):
    written = pddl.write_problems(tmp_path)
    assert len(written) == 60
    for path in written:
        assert path.read_text() == (pddl.PROBLEMS_DIR / path.relative_to(tmp_path)).read_text(), path
    assert pddl.main(["generate", "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "barman" / "domain.pddl").read_text() == (
        pddl.PROBLEMS_DIR / "barman" / "domain.pddl"
    ).read_text()
    bundled = sorted(p.relative_to(pddl.PROBLEMS_DIR) for p in pddl.PROBLEMS_DIR.glob("*/p*.pddl"))
    assert bundled == sorted(p.relative_to(tmp_path) for p in written)


def test_every_problem_parses_grounds_and_starts_with_its_goal_unmet():
    for game in pddl.discover(SETTINGS):
        world = pddl.open_game(game, SETTINGS)
        state = world.reset()
        assert state.progress == 0.0 and state.admissible and not state.won, game.id
        assert len(set(world.task.by_command)) == len(world.task.by_name), game.id  # one command per ground action


def test_config_validation_names_the_problem_and_the_fix():
    for override, message in [("pddl.max_env_steps=0", "must be >= 1"), ("pddl.limit=-1", "must be >= 0")]:
        with pytest.raises(ConfigError, match=message):
            load_config(TaskRunConfig, overrides=[override])
    hanoi = load_config(TaskRunConfig, overrides=["pddl.task_types=[hanoi]"])
    with pytest.raises(ConfigError, match=r"pddl\.task_types names hanoi, which PDDL does not have; choose from grip"):
        load_games(hanoi, pddl.SUITE)


def test_a_missing_problems_folder_is_a_config_error(tmp_path):
    message = r"no PDDL domain at .*: expected our layout \(gripper/domain.pddl, .*\) or AgentBoard's .* Set pddl"
    with pytest.raises(ConfigError, match=message):
        pddl.discover(dataclasses.replace(SETTINGS, problems_dir=str(tmp_path)))


def test_a_custom_problems_folder_is_played_and_identified(tmp_path):
    pddl.write_problems(tmp_path)
    (tmp_path / "gripper" / "p01.pddl").unlink()
    for domain in ("blocksworld", "barman", "tyreworld"):  # a folder may hold some of the domains
        shutil.rmtree(tmp_path / domain)
    custom = dataclasses.replace(SETTINGS, problems_dir=str(tmp_path))
    games = pddl.discover(custom)
    assert len(games) == 19 and games[0].id == "gripper/p02"
    assert pddl.open_game(games[0], custom).reset().admissible
    assert pddl.describe(custom)["digest"] != pddl.describe(SETTINGS)["digest"]
    assert pddl.describe(SETTINGS)["problems"] == "bundled"


def test_the_expert_without_pyperplan_names_the_install_command(monkeypatch):
    real_import = builtins.__import__

    def without_pyperplan(name, *args, **kwargs):
        if name.startswith("pyperplan"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_pyperplan)
    with pytest.raises(pddl.PddlMissingError, match=r"pip install 'agemem\[pddl\]'"):
        pddl.expert_plan(FIRST["gripper"], SETTINGS)
    assert pddl.open_game(FIRST["gripper"], SETTINGS).reset().admissible  # the games themselves need no package


def test_a_file_outside_the_strips_subset_is_a_config_error(tmp_path):
    text = (pddl.PROBLEMS_DIR / "gripper" / "domain.pddl").read_text()
    bad = tmp_path / "domain.pddl"
    bad.write_text(text.replace("(and (at-robby ?from))", "(and (at-robby ?from) (not (= ?from ?to)))"))
    with pytest.raises(ConfigError, match="outside the STRIPS subset"):
        pddl.PddlGame(bad, pddl.PROBLEMS_DIR / "gripper" / "p01.pddl")


def test_the_suite_is_a_pr_benchmark_over_the_four_domains():
    suite = pddl.SUITE
    assert suite.name == "pddl" and suite.headline == "PR" and suite.strict_admissible and not suite.has_score
    assert suite.task_types == ("gripper", "blocksworld", "barman", "tyreworld")
    assert Path(pddl.__file__).parent / "problems" == pddl.PROBLEMS_DIR
    assert suite.label("tyreworld") == "Tyre" and "step" not in suite.world and "memory" not in suite.world

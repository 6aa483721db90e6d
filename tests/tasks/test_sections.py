"""A task's config section comes from its registration: declared in its own module, composed onto every root that
plays tasks (agemem.tasks.config.with_task_sections), gone with the task."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import COMMAND_ROOTS, AgeMemConfig, load_command_config
from agemem.eval.stream.config import StreamRunConfig
from agemem.tasks.alfworld import AlfworldConfig
from agemem.tasks.babyai import BabyaiConfig
from agemem.tasks.config import TaskRunConfig, with_task_sections
from agemem.tasks.games import game_settings, get_suite, register_suite, unregister_suite
from agemem.tasks.pddl import PddlConfig
from agemem.tasks.sciworld import SciworldConfig
from agemem.tasks.textgame import GameConfig, GameItem, GameSuite

BUILT_IN = {"alfworld": AlfworldConfig, "sciworld": SciworldConfig, "pddl": PddlConfig, "babyai": BabyaiConfig}


@dataclass
class DiceConfig(GameConfig):
    """A plugin game's section."""

    faces: int = 6
    """faces of the die."""


def dice_suite(name: str = "dice", settings: type[GameConfig] = DiceConfig) -> GameSuite:
    return GameSuite(
        name=name,
        title="Dice",
        world="You roll a die.",
        example_command="roll",
        task_types=("roll",),
        discover=lambda settings: [GameItem("d-0", "roll", "0")],
        open=lambda game, settings: None,  # type: ignore[arg-type,return-value]
        settings=settings,
    )


@pytest.fixture
def dice() -> Iterator[GameSuite]:
    yield register_suite(dice_suite())
    unregister_suite("dice")


@pytest.mark.parametrize("command", sorted(set(COMMAND_ROOTS) - {"demo"}))
def test_every_root_that_plays_tasks_holds_each_built_in_game_section(command):
    config = load_command_config(command, None, [f"{name}.max_env_steps=7" for name in BUILT_IN])
    for name, settings in BUILT_IN.items():
        section = getattr(config, name)
        assert type(section) is settings and section.max_env_steps == 7
        assert get_suite(name).settings is settings  # declared by the suite, in its own module


def test_the_demo_root_plays_no_task_and_keeps_no_section():
    config = load_command_config("demo", None, [])
    assert not any(hasattr(config, name) for name in BUILT_IN)
    # a file shared by several commands may hold it: validated (a typo stops demo too), not kept
    assert not hasattr(load_command_config("demo", None, ["pddl.limit=3"]), "pddl")
    with pytest.raises(ConfigError, match=r"unknown config key 'pddl\.limt'; did you mean 'pddl\.limit'"):
        load_command_config("demo", None, ["pddl.limt=3"])


def test_a_suite_registered_later_gets_its_section_on_every_command_and_loses_it_when_gone(dice):
    for command in ("rollout", "train", "eval", "stream", "learn", "config"):
        config = load_command_config(command, None, ["dice.faces=20", "dice.limit=2"])
        assert config.dice == DiceConfig(faces=20, limit=2)
    # a section's own validate() runs as every other section's does
    with pytest.raises(ConfigError, match=r"dice\.max_env_steps=0"):
        load_command_config("train", None, ["dice.max_env_steps=0"])
    unregister_suite("dice")
    with pytest.raises(ConfigError, match="unknown config key 'dice'"):
        load_command_config("train", None, ["dice.faces=20"])


def test_load_config_composes_a_task_root_and_a_typo_in_a_section_is_named(dice):
    config = load_config(TaskRunConfig, overrides=["dice.faces=8"])
    assert isinstance(config, TaskRunConfig) and config.dice.faces == 8
    with pytest.raises(ConfigError, match=r"unknown config key 'dice\.face'; did you mean 'dice\.faces'"):
        load_config(AgeMemConfig, overrides=["dice.face=8"])


def test_a_composed_config_pickles_and_copies_to_equal_values(dice):
    config = load_command_config("stream", None, ["dice.faces=12", "pddl.limit=4"])
    assert isinstance(config, StreamRunConfig)
    for twin in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config)):
        assert type(twin) is type(config) and twin == config and twin.dice.faces == 12
    assert with_task_sections(StreamRunConfig) is type(config)  # composed once per root and set of sections
    assert with_task_sections(type(config)) is type(config)  # composing again changes nothing


def test_a_root_built_without_the_section_plays_the_suite_defaults(dice):
    assert game_settings(AgeMemConfig(), dice) == DiceConfig()  # built in code: no file or override could set it
    # a section of another class under the suite's name (a root that declares it by hand) is named, not misread
    config = load_config(AgeMemConfig, overrides=["pddl.limit=1"])
    with pytest.raises(ConfigError, match=r"config\.pddl is a PddlConfig, but the 'pddl' game reads a DiceConfig"):
        game_settings(config, dataclasses.replace(dice, name="pddl"))


def test_a_task_named_like_a_root_key_is_refused_not_shadowed():
    register_suite(dice_suite("eval"))
    try:
        with pytest.raises(ConfigError, match=r"the task 'eval' has a config section of its own .* rename the task"):
            load_command_config("eval", None, [])
    finally:
        unregister_suite("eval")
    load_command_config("eval", None, [])  # and gone with it

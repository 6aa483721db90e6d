"""ALFWorld as a text-game suite: one game is one episode, won -> task reward 1, else 0.

The episode, its prompt and its reward are the text-game seam's (:mod:`agemem.tasks.games`); this module is what
is ALFWorld's: the world paragraph of the prompt, the games of a split (:func:`~agemem.tasks.alfworld_games.
discover_games`) and TextWorld's engine (:class:`~agemem.tasks.alfworld_games.AlfworldGame`). Registering
:data:`SUITE` makes ``data.source=alfworld`` a training task and ``agemem eval alfworld`` an evaluation
(:class:`agemem.eval.games.GameBenchmark`).
"""

from __future__ import annotations

from pathlib import Path

from agemem.tasks.alfworld_games import TASK_LABELS, TASK_TYPES, AlfworldGame, Game, discover_games, expert_plan
from agemem.tasks.config import AlfworldConfig, GameConfig
from agemem.tasks.games import register_suite
from agemem.tasks.textgame import GameRef, GameSuite

BENCHMARK = "alfworld"


def _discover(settings: GameConfig) -> list[Game]:
    assert isinstance(settings, AlfworldConfig)
    return discover_games(settings.data_dir, settings.split)


def _open(game: GameRef, settings: GameConfig) -> AlfworldGame:
    assert isinstance(game, Game)
    return AlfworldGame(game)


def _expert(game: GameRef, settings: GameConfig) -> list[str]:
    assert isinstance(game, Game)
    return expert_plan(game)


def _describe(settings: GameConfig) -> dict[str, str]:
    assert isinstance(settings, AlfworldConfig)
    return {"split": settings.split}


SUITE = GameSuite(
    name=BENCHMARK,
    title="ALFWorld",
    world=(
        "You are an agent in a text-based household game (ALFWorld). Each game gives you a task, such as "
        '"put a clean mug in coffeemachine".'
    ),
    example_command="go to countertop 1",
    task_types=TASK_TYPES,
    discover=_discover,
    open=_open,
    reopen=lambda game_id, task_type, source: Game(game_id, Path(source), task_type),
    task_labels=TASK_LABELS,
    headline="SR",
    split_note="valid_seen: 140 games, valid_unseen: 134 (ALFWorld's own splits)",
    describe=_describe,
    expert=_expert,
)
"""ALFWorld's games in TextWorld's engine: SR per task type (pick, look, clean, heat, cool, pick2)."""


ALFWORLD = register_suite(SUITE)

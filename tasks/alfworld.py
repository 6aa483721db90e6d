"""ALFWorld as a text-game suite: one game is one episode, won -> task reward 1, else 0.

The episode, its prompt and its reward are the text-game seam's (:mod:`agemem.tasks.games`); this module is what
is ALFWorld's: the world paragraph of the prompt, the games of a split (:func:`~agemem.tasks.alfworld_games.
discover_games`) and TextWorld's engine (:class:`~agemem.tasks.alfworld_games.TextGame`). Registering
:data:`SUITE` makes ``data.source=alfworld`` a training task and ``agemem eval alfworld`` an evaluation
(:mod:`agemem.eval.alfworld`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agemem.tasks.alfworld_games import TASK_LABELS, TASK_TYPES, Game, TextGame, discover_games, expert_plan
from agemem.tasks.config import AlfworldConfig, GameConfig, TaskRunConfig
from agemem.tasks.games import (  # noqa: F401  (the episode's pieces, re-exported under their ALFWorld names)
    GameEpisode,
    GameError,
    GameResult,
    GameScorer,
    normalize_command,
    register_suite,
    with_game_prompt,
)
from agemem.tasks.games import game_system_prompt as suite_system_prompt
from agemem.tasks.textgame import GameRef, GameSuite

BENCHMARK = "alfworld"


def _discover(settings: GameConfig) -> list[Game]:
    assert isinstance(settings, AlfworldConfig)
    return discover_games(settings.data_dir, settings.split)


def _open(game: GameRef, settings: GameConfig) -> TextGame:
    assert isinstance(game, Game)
    return TextGame(game)


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


def game_system_prompt(
    tools: Sequence[str],
    tool_format: str,
    *,
    max_env_steps: int,
    auto_retrieval: bool = False,
    show_admissible: bool = True,
    debrief: bool = True,
) -> str:
    """The system message of an ALFWorld game (:func:`agemem.tasks.games.game_system_prompt` for :data:`SUITE`)."""
    return suite_system_prompt(
        SUITE,
        tools,
        tool_format,
        max_env_steps=max_env_steps,
        auto_retrieval=auto_retrieval,
        show_admissible=show_admissible,
        debrief=debrief,
    )


def game_config(config: TaskRunConfig) -> TaskRunConfig:
    """``config`` with the ALFWorld system prompt for its tools, unless ``env.system_prompt`` names one already."""
    return with_game_prompt(config, SUITE)


ALFWORLD = register_suite(SUITE)

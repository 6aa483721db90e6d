"""ALFWorld games (finding them, playing one): moved to :mod:`agemem.tasks.alfworld_games`, which training uses
too; re-exported here for evaluation code and its tests."""

from agemem.tasks.alfworld_games import (
    DOWNLOAD_HINT,
    GAME_FILE,
    INSTALL_HINT,
    SPLITS,
    TASK_LABELS,
    TASK_TYPES,
    AlfworldMissingError,
    Game,
    GameState,
    TextGame,
    data_root,
    discover_games,
    expert_plan,
    require_alfworld,
    split_dir,
    task_text,
    task_type_of,
)

__all__ = [
    "DOWNLOAD_HINT",
    "GAME_FILE",
    "INSTALL_HINT",
    "SPLITS",
    "TASK_LABELS",
    "TASK_TYPES",
    "AlfworldMissingError",
    "Game",
    "GameState",
    "TextGame",
    "data_root",
    "discover_games",
    "expert_plan",
    "require_alfworld",
    "split_dir",
    "task_text",
    "task_type_of",
]

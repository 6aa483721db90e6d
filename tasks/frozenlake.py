"""FrozenLake as a text game: cross a frozen lake to the goal without falling through a hole, seeing only the cells
next to you.

Gymnasium's ``FrozenLake-v1`` (``pip install 'agemem[frozenlake]'``, the ``gymnasium`` package; the lake is laid out
by its ``generate_random_map``, which keeps a path from start to goal) is played deterministically
(``is_slippery=False``). The agent is told the lake's size and where the goal is, but sees only its four neighbours
(ice, a hole, the goal, or the shore), so it must remember where the holes were (the memory tools, or its context).
A game is won on the goal; it ends, lost, in a hole. Progress is the best share of the way covered, in steps of the
shortest safe path: ``1 - distance(now) / distance(start)``.

The whole environment is this module: its config section (:class:`FrozenLakeConfig`), the maps of a split
(:func:`discover`), the game (:class:`FrozenLakeGame`), the expert (a breadth-first search over safe cells) and the
one :func:`~agemem.tasks.games.register_suite` that makes it ``data.source=frozenlake``, ``agemem eval frozenlake``
and the ``frozenlake.*`` section of every root that plays tasks. It is the worked example of a new environment in
docs/architecture.md.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.tasks.base import Evaluation, Option
from agemem.tasks.games import register_suite
from agemem.tasks.textgame import GameConfig, GameItem, GameRef, GameState, GameSuite, installed_version, round_robin

INSTALL_HINT = "FrozenLake needs the optional extra: pip install 'agemem[frozenlake]' (the gymnasium package)"
SIZES: tuple[int, ...] = (4, 6, 8)
"""the lake sizes of the split, one task type each (``4x4``: 16 cells)."""
TASK_TYPES: tuple[str, ...] = tuple(f"{size}x{size}" for size in SIZES)
MOVES: dict[str, tuple[int, int, int]] = {
    "go west": (0, 0, -1),
    "go south": (1, 1, 0),
    "go east": (2, 0, 1),
    "go north": (3, -1, 0),
}
"""a command's ``(gymnasium action, row change, column change)``: FrozenLake's actions are 0 left, 1 down, 2 right,
3 up."""
CELLS = {"S": "ice", "F": "ice", "H": "a hole", "G": "the goal"}

Cell = tuple[int, int]


@dataclass
class FrozenLakeConfig(GameConfig):
    """FrozenLake maps as text games (`agemem eval frozenlake`, data.source=frozenlake)."""

    max_env_steps: int = 30
    """moves per game (the 8x8 lakes need 14 or more)."""
    maps_per_size: int = 5
    """lakes per size (4x4, 6x6, 8x8): 5 gives 15 games."""
    first_seed: int = 0
    """the seed of each size's first lake (then +1, +2, ...); another value gives a disjoint split."""
    frozen_share: float = 0.8
    """the chance that a cell is ice rather than a hole (gymnasium's ``p``): lower is harder."""

    def validate(self) -> None:
        super().validate()
        if self.maps_per_size < 1 or self.first_seed < 0:
            raise ConfigError(
                f"frozenlake.maps_per_size={self.maps_per_size} must be >= 1 and frozenlake.first_seed="
                f"{self.first_seed} >= 0"
            )
        if not 0.5 <= self.frozen_share <= 1.0:
            raise ConfigError(
                f"frozenlake.frozen_share={self.frozen_share} must be in [0.5, 1]: below half the cells being ice, "
                "gymnasium may search long for a lake with a path"
            )


class FrozenLakeMissingError(ConfigError):
    """The ``gymnasium`` package is missing (the message says how to install it)."""


def require_gymnasium() -> Any:
    try:
        import gymnasium
        from gymnasium.envs.toy_text.frozen_lake import generate_random_map  # noqa: F401  (checked here, used later)
    except ImportError as err:
        raise FrozenLakeMissingError(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    return gymnasium


def _settings(settings: GameConfig) -> FrozenLakeConfig:
    return settings if isinstance(settings, FrozenLakeConfig) else FrozenLakeConfig()


def discover(settings: GameConfig) -> list[GameItem]:
    """``maps_per_size`` lakes of each size, seeds ``first_seed...``, round-robin over the sizes."""
    require_gymnasium()
    chosen = _settings(settings)
    seeds = range(chosen.first_seed, chosen.first_seed + chosen.maps_per_size)
    groups = {
        f"{size}x{size}": [GameItem(f"lake{size}-{seed}", f"{size}x{size}", f"{size}:{seed}") for seed in seeds]
        for size in SIZES
    }
    return round_robin(groups, TASK_TYPES)


def lake(game: GameRef, settings: GameConfig) -> list[str]:
    """The rows of the game's lake (``S`` start, ``F`` ice, ``H`` hole, ``G`` goal), as gymnasium lays it out."""
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    size, seed = (int(part) for part in game.source.split(":"))
    return list(generate_random_map(size=size, p=_settings(settings).frozen_share, seed=seed))


def distances(rows: list[str]) -> dict[Cell, int]:
    """Steps from every safe cell to the goal over safe cells (breadth-first from the goal)."""
    size = len(rows)
    goal = next((r, c) for r in range(size) for c in range(size) if rows[r][c] == "G")
    found = {goal: 0}
    queue = deque([goal])
    while queue:
        row, col = queue.popleft()
        for _, d_row, d_col in MOVES.values():
            nxt = (row + d_row, col + d_col)
            if 0 <= nxt[0] < size and 0 <= nxt[1] < size and rows[nxt[0]][nxt[1]] != "H" and nxt not in found:
                found[nxt] = found[(row, col)] + 1
                queue.append(nxt)
    return found


class FrozenLakeGame:
    """One lake in gymnasium's ``FrozenLake-v1`` (not slippery): a :class:`~agemem.tasks.textgame.TextGame`."""

    def __init__(self, rows: list[str]):
        self.rows = rows
        self.size = len(rows)
        self.env = require_gymnasium().make("FrozenLake-v1", desc=rows, is_slippery=False)
        self._to_goal = distances(rows)
        self._start = 0
        self._best = 0.0

    def reset(self) -> GameState:
        position, _ = self.env.reset(seed=0)
        self._start = self._to_goal[self._cell(position)]
        self._best = 0.0
        goal = f"Reach the goal at row {self.size}, column {self.size} of a {self.size}x{self.size} frozen lake."
        intro = f"{goal} You start at row 1, column 1 (rows count southwards, columns eastwards)."
        return self._state(position, intro, won=False, over=False, goal=goal)

    def step(self, command: str) -> GameState:
        position = int(self.env.unwrapped.s)
        if command not in self._admissible(self._cell(position)):
            return self._state(position, f"You cannot {command} from here.", won=False, over=False, valid=False)
        position, reward, terminated, _, _ = self.env.step(MOVES[command][0])
        won, over = terminated and reward > 0, terminated and reward <= 0
        said = "You reached the goal." if won else "You fell through a hole." if over else f"You {command}."
        return self._state(int(position), said, won=won, over=over)

    def close(self) -> None:
        self.env.close()

    def _cell(self, position: int) -> Cell:
        return divmod(int(position), self.size)

    def _neighbour(self, cell: Cell, command: str) -> Cell | None:
        _, d_row, d_col = MOVES[command]
        row, col = cell[0] + d_row, cell[1] + d_col
        return (row, col) if 0 <= row < self.size and 0 <= col < self.size else None

    def _admissible(self, cell: Cell) -> list[str]:
        return [command for command in MOVES if self._neighbour(cell, command) is not None]

    def _state(
        self, position: int, said: str, *, won: bool, over: bool, valid: bool = True, goal: str = ""
    ) -> GameState:
        cell = self._cell(position)
        if cell in self._to_goal and self._start:
            self._best = max(self._best, 1.0 - self._to_goal[cell] / self._start)
        around = []
        for command in MOVES:
            near = self._neighbour(cell, command)
            what = "the shore" if near is None else CELLS[self.rows[near[0]][near[1]]]
            around.append(f"{command.removeprefix('go ')}: {what}")
        where = f"You are at row {cell[0] + 1}, column {cell[1] + 1}. Around you: {'; '.join(around)}."
        ended = won or over
        return GameState(
            observation=said if ended else f"{said}\n{where}",
            admissible=[] if ended else self._admissible(cell),
            won=won,
            progress=1.0 if won else self._best,
            over=over,
            valid=valid,
            goal=goal,
        )


def open_game(game: GameRef, settings: GameConfig) -> FrozenLakeGame:
    return FrozenLakeGame(lake(game, settings))


def expert_plan(game: GameRef, settings: GameConfig) -> list[str]:
    """A shortest safe path from the start, as commands (each move goes one step closer to the goal)."""
    rows = lake(game, settings)
    to_goal = distances(rows)
    cell, plan = (0, 0), []
    while to_goal[cell] > 0:
        command, cell = next(
            (command, (cell[0] + d_row, cell[1] + d_col))
            for command, (_, d_row, d_col) in MOVES.items()
            if to_goal.get((cell[0] + d_row, cell[1] + d_col)) == to_goal[cell] - 1
        )
        plan.append(command)
    return plan


def describe(settings: GameConfig) -> dict[str, Any]:
    """What identifies the split in a run's identity."""
    chosen = _settings(settings)
    return {
        "maps_per_size": chosen.maps_per_size,
        "first_seed": chosen.first_seed,
        "frozen_share": chosen.frozen_share,
        "gymnasium": installed_version("gymnasium"),  # another release may lay a seed's lake out differently
    }


SUITE = GameSuite(
    name="frozenlake",
    title="FrozenLake",
    world=(
        "You are crossing a frozen lake (FrozenLake) from its north-west corner to the goal in its south-east "
        "corner. Some cells are holes: stepping on one ends the game, lost. You see only the four cells next to "
        "you, so remember where the holes are. Move with go north, go south, go east or go west."
    ),
    example_command="go east",
    task_types=TASK_TYPES,
    discover=discover,
    open=open_game,
    headline="SR",
    has_progress=True,
    split_note="gymnasium's random lakes, 4x4, 6x6 and 8x8, seeds first_seed.. (maps_per_size of each)",
    describe=describe,
    settings=FrozenLakeConfig,
    expert=expert_plan,
    evaluation=Evaluation(
        "FrozenLake lakes seen one cell around, with the memory tools: SR and PR per lake size, steps, TC",
        "frozenlake.limit",
        (Option("--maps", "frozenlake.maps_per_size", "lakes per size (frozenlake.maps_per_size)", metavar="N"),),
    ),
)
"""FrozenLake as a text game: SR per lake size (4x4, 6x6, 8x8)."""

FROZENLAKE = register_suite(SUITE)

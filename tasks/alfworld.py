"""ALFWorld as a text-game environment: one game is one episode, won -> task reward 1, else 0.

The episode, its prompt and its reward are the text-game seam's (:mod:`agemem.tasks.games`); this module is what
is ALFWorld's: the world paragraph of the prompt, the games of a split (:func:`discover_games`) and TextWorld's
engine (:class:`AlfworldGame`). Registering :data:`SUITE` makes ``data.source=alfworld`` a training task and
``agemem eval alfworld`` an evaluation (:class:`agemem.eval.games.GameBenchmark`).

The games: ALFWorld games in TextWorld's text-only engine: finding them on disk and playing one.

ALFWorld (Shridhar et al., 2021) ships each game as ``json_2.1.1/<split>/<task folder>/<trial>/`` with
``game.tw-pddl`` (the PDDL domain, problem and text grammar; ``"solvable": true`` when ALFWorld's expert
solved it) and ``traj_data.json`` (the ALFRED annotation). The text engine is TextWorld's ``PddlEnv``
(the ``textworld`` package, planner from ``fast-downward-textworld``) with ALFWorld's object naming
(``alfworld`` package): the same stack as ALFWorld's ``AlfredTWEnv``, one game at a time, no simulator.

Both packages are the optional extra ``pip install 'agemem[alfworld]'`` and are imported only when a game
is opened; without them :func:`require_alfworld` raises :class:`AlfworldMissingError` with that command.

* :func:`data_root` / :func:`split_dir`: where the games are (``--data-dir``, else ``$ALFWORLD_DATA``, else
  ``~/.cache/alfworld``, ALFWorld's own default);
* :func:`discover_games`: the solvable games of a split, ordered round-robin over the six task types so that
  any prefix (``--limit``) is balanced across types;
* :class:`AlfworldGame`: one game (``reset``, ``step`` with admissible commands and ``won``), :func:`expert_plan`:
  the planner's solution from the start state.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agemem.core.configlib import ConfigError
from agemem.tasks.base import Evaluation, Option
from agemem.tasks.games import register_suite
from agemem.tasks.stream import StreamItem, StreamSpec, game_execution
from agemem.tasks.textgame import GameConfig, GameRef, GameState, GameSuite, round_robin


@dataclass
class AlfworldConfig(GameConfig):
    """ALFWorld games (`agemem eval alfworld`, and training with data.source=alfworld): environment commands and the
    memory tools."""

    data_dir: str = ""
    """folder holding json_2.1.1/<split>/<task>/<trial>/game.tw-pddl (the CLI's --data-dir); empty: $ALFWORLD_DATA,
    else ~/.cache/alfworld (where `alfworld-download` puts the games)."""
    split: Literal["valid_seen", "valid_unseen"] = "valid_seen"
    """the evaluation split: valid_seen (140 games, rooms seen in training) or valid_unseen (134 games, new rooms)."""


TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""the six ALFWorld task types, in ALFWorld's own order (``alfred_tw_env.TASK_TYPES``)."""
TASK_LABELS: dict[str, str] = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
"""the short names of the ALFWorld papers' tables (Pick, Look, Clean, Heat, Cool, Pick 2)."""
SPLITS: tuple[str, ...] = ("valid_seen", "valid_unseen")
GAME_FILE = "game.tw-pddl"
INSTALL_HINT = "ALFWorld needs the optional extra: pip install 'agemem[alfworld]' (the alfworld and textworld packages)"
DOWNLOAD_HINT = (
    "download the games with `alfworld-download` (from pip install 'agemem[alfworld]'; it fills $ALFWORLD_DATA, "
    "default ~/.cache/alfworld), or point --data-dir (alfworld.data_dir) or ALFWORLD_DATA at a folder holding "
    "json_2.1.1/<split>/<task>/<trial>/{game.tw-pddl,traj_data.json}"
)
_BANNER = re.compile(r"^\s*-= Welcome to TextWorld, ALFRED! =-\s*", re.IGNORECASE)
_TASK = re.compile(r"Your task is to:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


class AlfworldMissingError(ConfigError):
    """The ``alfworld`` / ``textworld`` packages are missing (the message says how to install them)."""


@dataclass(frozen=True)
class Game:
    id: str
    """``<task folder>/<trial>``, e.g. ``pick_and_place_simple-Pencil-None-Dresser-330/trial_T2019...``."""
    path: Path
    """the ``game.tw-pddl`` file."""
    task_type: str
    """one of :data:`TASK_TYPES`, read from the task folder's name."""

    @property
    def source(self) -> str:
        """the game file, as a task record carries it (:class:`agemem.tasks.textgame.GameRef`)."""
        return str(self.path)


# --------------------------------------------------------------------------------------------- finding games


def data_root(data_dir: str = "") -> Path:
    """``data_dir`` if given, else ``$ALFWORLD_DATA``, else ``~/.cache/alfworld`` (where ``alfworld-download``
    puts the games)."""
    chosen = data_dir or os.environ.get("ALFWORLD_DATA") or "~/.cache/alfworld"
    return Path(chosen).expanduser()


def split_dir(data_dir: str, split: str) -> Path:
    """The folder of a split's games: ``<root>/json_2.1.1/<split>``, or ``<root>/<split>`` when the root is the
    ``json_2.1.1`` folder itself. A missing folder is an error that names the path and how to get the games."""
    if split not in SPLITS:
        raise ConfigError(f"alfworld split {split!r} is not one of {', '.join(SPLITS)}")
    root = data_root(data_dir)
    for candidate in (root / "json_2.1.1" / split, root / split):
        if candidate.is_dir():
            return candidate
    source = "--data-dir" if data_dir else ("$ALFWORLD_DATA" if os.environ.get("ALFWORLD_DATA") else "the default")
    raise ConfigError(f"no ALFWorld {split} games at {root / 'json_2.1.1' / split} ({source}); {DOWNLOAD_HINT}")


def task_type_of(task_folder: str) -> str:
    """The task type a task folder's name starts with (``pick_heat_then_place_in_recep-Egg-None-Fridge-14``)."""
    prefix = task_folder.split("-", 1)[0]
    if prefix not in TASK_TYPES:
        types = ", ".join(TASK_TYPES)
        raise ConfigError(f"ALFWorld task folder {task_folder!r} does not start with a task type ({types})")
    return prefix


def discover_games(data_dir: str, split: str) -> list[Game]:
    """Every solvable game of ``split``, ordered round-robin over :data:`TASK_TYPES` (each type's games sorted
    by id): the first N games cover the types as evenly as N allows.

    As ALFWorld's ``AlfredTWEnv``: a trial needs ``traj_data.json`` and a ``game.tw-pddl`` marked solvable;
    ``movable`` and ``Sliced`` trials are left out (the text engine does not support them).
    """
    folder = split_dir(data_dir, split)
    by_type: dict[str, list[Game]] = {task_type: [] for task_type in TASK_TYPES}
    for game_file in sorted(folder.glob(f"*/*/{GAME_FILE}")):
        trial = game_file.parent
        task_folder = trial.parent.name
        if "movable" in task_folder or "Sliced" in task_folder or not (trial / "traj_data.json").is_file():
            continue
        if not _solvable(game_file):
            continue
        task_type = task_type_of(task_folder)
        by_type[task_type].append(Game(f"{task_folder}/{trial.name}", game_file, task_type))
    if not any(by_type.values()):
        raise ConfigError(f"{folder} holds no solvable ALFWorld game (*/*/{GAME_FILE}); {DOWNLOAD_HINT}")
    return round_robin(by_type, TASK_TYPES)


def _solvable(game_file: Path) -> bool:
    try:
        return bool(json.loads(game_file.read_text(encoding="utf-8")).get("solvable", False))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{game_file} is not an ALFWorld game file ({err}); {DOWNLOAD_HINT}") from err


# --------------------------------------------------------------------------------------------- playing a game


def require_alfworld() -> dict[str, Any]:
    """The TextWorld and ALFWorld pieces a game needs; :class:`AlfworldMissingError` when they are missing."""
    try:
        import fast_downward  # noqa: F401  (TextWorld's PDDL engine needs it; fail here with the install hint)
        import textworld
        import textworld.envs
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    except ImportError as err:
        raise AlfworldMissingError(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    return {"textworld": textworld, "AlfredDemangler": AlfredDemangler, "AlfredInfos": AlfredInfos}


def task_text(observation: str) -> str:
    """The ``Your task is to: …`` sentence of a game's first observation (the whole text when absent)."""
    match = _TASK.search(observation)
    return match.group(1).rstrip(".") if match else observation.strip()


class _EnginePool:
    """TextWorld PDDL environments kept for reuse. Each loads its own copy of the planner's shared library (so that
    games can run side by side), and a copy cannot be unloaded safely (``fast_downward.close_lib`` makes the
    interpreter crash at exit); reusing the environments bounds the copies a process holds to the most games it
    plays at once."""

    def __init__(self) -> None:
        self._free: dict[bool, list[Any]] = {False: [], True: []}

    def acquire(self, walkthrough: bool) -> Any:
        if self._free[walkthrough]:
            return self._free[walkthrough].pop()
        parts = require_alfworld()
        textworld = parts["textworld"]
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["walkthrough"] if walkthrough else [])
        env = textworld.envs.PddlEnv(infos)
        for wrapper in (parts["AlfredDemangler"](shuffle=False), parts["AlfredInfos"]):
            env = wrapper(env)
        return env

    def release(self, env: Any, walkthrough: bool) -> None:
        self._free[walkthrough].append(env)


_POOL = _EnginePool()


@contextlib.contextmanager
def _argv_kept() -> Iterator[None]:
    """Undo what fast-downward's PDDL translator does to ``sys.argv`` (it overwrites it on every load and reset)."""
    argv, kept = sys.argv, list(sys.argv)
    try:
        yield
    finally:
        argv[:] = kept
        sys.argv = argv


class AlfworldGame:
    """One ALFWorld game in TextWorld's PDDL engine: ``reset()``, then ``step(command)`` until ``won``; ``close()``
    (or a ``with`` block) hands the engine back for the next game. ``walkthrough=True`` also plans a solution at
    reset (:func:`expert_plan`)."""

    def __init__(self, game: Game, *, walkthrough: bool = False):
        # alfworld's import creates $ALFWORLD_DATA (default ~/.cache/alfworld); point it at the game's data instead
        os.environ.setdefault("ALFWORLD_DATA", str(game.path.parents[2]))
        self.game = game
        self._walkthrough = walkthrough
        self._env: Any = _POOL.acquire(walkthrough)
        self._state: Any = None
        try:
            with _argv_kept():
                self._env.load(str(game.path))
        except BaseException:
            self.close()
            raise

    def reset(self) -> GameState:
        with _argv_kept():
            self._state = self._env.reset()
        state = self._game_state()
        state.goal = task_text(state.observation)
        return state

    def step(self, command: str) -> GameState:
        """Send one command; an inadmissible one leaves the game as it was ("Nothing happens.")."""
        if self._state is None:
            raise RuntimeError("AlfworldGame.step before reset()")
        self._state, _, _ = self._env.step(command)
        return self._game_state()

    @property
    def walkthrough(self) -> list[str]:
        """The plan computed at reset (``walkthrough=True`` only)."""
        return list(self._state.get("extra.walkthrough") or []) if self._state is not None else []

    def close(self) -> None:
        if self._env is not None:
            _POOL.release(self._env, self._walkthrough)
            self._env = None

    def _game_state(self) -> GameState:
        state = self._state
        observation = _BANNER.sub("", state.feedback or "").strip()
        won = bool(state["won"])
        return GameState(observation, sorted(state["admissible_commands"] or []), won, progress=float(won))

    def __enter__(self) -> AlfworldGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def expert_plan(game: Game) -> list[str]:
    """The planner's solution from the game's start state (fast-downward through TextWorld's PDDL engine): the
    commands that win the game when played in order. Planning takes from a second to a few minutes per game."""
    with AlfworldGame(game, walkthrough=True) as world:
        world.reset()
        return world.walkthrough


TASK_SENTENCES = {
    "pick_and_place_simple": "put a {object} in {receptacle}",
    "look_at_obj_in_light": "look at {object} under the {lamp}",
    "pick_clean_then_place_in_recep": "put a clean {object} in {receptacle}",
    "pick_heat_then_place_in_recep": "put a hot {object} in {receptacle}",
    "pick_cool_then_place_in_recep": "put a cool {object} in {receptacle}",
    "pick_two_obj_and_place": "put two {object} in {receptacle}",
}
"""ALFWorld's task sentences per task type (its text grammar's first wording)."""


def task_parameters(game: Game) -> dict[str, str]:
    """The ALFRED parameters of a game (``traj_data.json`` next to its ``game.tw-pddl``), lower case."""
    path = game.path.parent / "traj_data.json"
    try:
        params = json.loads(path.read_text(encoding="utf-8"))["pddl_params"]
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"{path} is not an ALFRED trajectory file with pddl_params ({err})") from err
    return {
        "object": str(params.get("object_target") or "").lower(),
        "receptacle": str(params.get("parent_target") or "").lower(),
        "lamp": str(params.get("toggle_target") or "desklamp").lower(),
    }


def task_sentence(game: Game) -> str:
    """The task in ALFWorld's words, from the game's parameters (see the module docstring)."""
    return TASK_SENTENCES[game.task_type].format(**task_parameters(game))


def task_key(game: Game) -> str:
    """``<task type>|<object>|<receptacle>``: games with the same key are the same task."""
    params = task_parameters(game)
    target = params["lamp"] if game.task_type == "look_at_obj_in_light" else params["receptacle"]
    return f"{game.task_type}|{params['object']}|{target}"


def alfworld_item(game: Game) -> StreamItem:
    def plan() -> str:
        return game_execution([f"> {command}" for command in expert_plan(game)], won=True)

    params = task_parameters(game)
    query = task_sentence(game)
    return StreamItem(
        id=game.id,
        query=query,
        prompt=query,
        task_key=task_key(game),
        payload=game,
        metadata={"task_type": game.task_type, **params},
        ground_truth_fn=plan,
    )


def stream_items(config: Any) -> list[StreamItem]:
    """`agemem eval stream --task alfworld`: the solvable games of ``alfworld.split`` (``alfworld.task_types`` and
    ``alfworld.limit`` apply first)."""
    from agemem.tasks.games import load_games

    return [alfworld_item(game) for game in load_games(config, SUITE)]  # type: ignore[arg-type]


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
    settings=AlfworldConfig,
    expert=_expert,
    evaluation=Evaluation(
        "ALFWorld games with environment commands and the memory tools: SR per task type, steps, TC",
        "alfworld.limit",
        (
            Option(
                "--data-dir",
                "alfworld.data_dir",
                "folder holding json_2.1.1/<split>/ (alfworld.data_dir; default: $ALFWORLD_DATA, else "
                "~/.cache/alfworld)",
                metavar="D",
            ),
            Option("--split", "alfworld.split", "games to play (alfworld.split)", ("valid_seen", "valid_unseen")),
        ),
    ),
    stream=StreamSpec("game", stream_items),
)
"""ALFWorld's games in TextWorld's engine: SR per task type (pick, look, clean, heat, cool, pick2)."""


ALFWORLD = register_suite(SUITE)

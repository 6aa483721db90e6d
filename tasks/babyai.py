"""BabyAI levels played as text games: the split, a text rendering of the agent's view, and the bot's solutions.

BabyAI (Chevalier-Boisvert et al., 2019) is a grid world of rooms joined by doors, holding keys, balls and boxes;
each level generates a layout and a mission ("pick up the purple box", "open the red door, then open the blue
door") from a seed. The levels come from the ``minigrid`` package (``pip install 'agemem[babyai]'``), imported
only when a game is opened or the split is listed; without it :func:`require_babyai` raises
:class:`BabyaiMissingError` with that command.

**Split.** AgentBoard's (Ma et al., 2024): its 28 BabyAI levels (``game_level`` 1-21, 24, 25, 27, 28, 29, 31, 32 of
``agentboard/environment/babyai_env.py``) times the seeds 1234-1237, 112 episodes. The task types are the level
families (:data:`LEVELS`): goto (44), open (20), pickup (20), unlock (20) and find (8); within a family the games
go seed by seed over its levels, and the families are taken round-robin, so a ``--limit`` prefix is balanced over
families and levels. ``babyai.first_seed`` / ``babyai.episodes_per_level`` pick other seeds of the same levels
(e.g. a training split disjoint from the evaluation one).

**What differs from AgentBoard.** minigrid 3.2.0 replaces the version AgentBoard used, so a seed gives another
layout. ``BabyAI-GoToObjS6`` is ``-v1`` (v0 is deprecated). ``BabyAI-OpenDoorsOrderN4Debug-v0`` is replaced by
its non-strict twin ``BabyAI-OpenDoorsOrderN4-v0`` (same layouts and missions): in 3.2.0 a two-door mission of
the strict variant cannot be won, because opening the first door is verified again against the second
instruction, which fails it. The BabyAI bot never returns on ``BabyAI-UnlockToUnlock-v0`` seed 1234, so that game
is skipped and the level takes the next seed (:data:`SKIPPED`). AgentBoard's subgoal annotations (its progress
rate) are a data file this project does not ship; :func:`subgoals` derives them from the mission instead. The text
of the view is ours. AgentBoard's commands and its wording of the mission are the defaults; ours are variants
(``babyai.actions``, ``babyai.mission_wording``).

**The text.** minigrid observes a 7x7 grid in front of the agent (walls hide what is behind them); the text is
ours, in the style of AgentBoard and BabyAI-Text: what the agent carries, what is right in front of it, and every
visible object with its distance in steps forward and to the left or right (:func:`describe_view`), by the name
the commands use. The mission (``babyai.mission_wording``): by default as AgentBoard words it, every "then" and
"after you" replaced by "and" (:func:`agentboard_mission`; the order of the steps is then unsaid, though minigrid
still checks it); ``minigrid``: minigrid's sentence.

**Actions** (:func:`admissible`), all listed every step, by ``babyai.actions``:

* ``agentboard`` (default): AgentBoard's commands, by its words (:func:`agentboard_actions`): ``turn left``,
  ``turn right``, ``move forward`` (when the cell ahead is free); ``go to X n`` (walk to a visible object and face
  it); ``pickup X n`` (walk to a key, ball or box and pick it up; while carrying nothing); ``drop`` (while
  carrying, the cell ahead free); ``go through X n`` (walk into an open door); ``toggle and go through X n`` (walk
  to a closed door, or a locked one while carrying a key of its colour, open it and step into the doorway);
  ``toggle`` (that door, right in front); ``check valid actions`` (lists them, changes nothing). Objects are
  named as AgentBoard names them: always numbered by distance, a door with its state (``red ball 1``, ``blue
  locked door 1``). Walks go through the cells the agent sees.
* ``primitives_go_to`` (ours): the primitives ``turn left``, ``turn right``, ``move forward``, and for the object
  right in front ``pick up X``, ``drop X``, ``open X`` (a door, a locked door while carrying its key, a box) and
  ``close X``; and ``go to X`` as above. Names are numbered only where the view holds two alike (``grey ball 1``,
  ``grey ball 2``).
* ``primitives``: ``primitives_go_to`` without ``go to`` (with 30 commands per episode, primitives alone cannot
  finish the maze and unlock levels).

**Metrics.** ``won`` is minigrid's own success (``over``: a strict level failed, e.g. the wrong door opened);
``progress`` (AgentBoard's progress rate, the episode keeps its best) is the share of the mission's milestones
reached (:func:`subgoals`: seeing each target, carrying what must be carried, each instruction done, and the key and
unlocking of each locked door the mission needs; none already met at reset, so a game never acted on scores 0),
1.0 when won; there is no score.

**Expert** (:func:`expert_plan`): minigrid's ``BabyAIBot`` played from the start state with the primitive actions,
then said in the configured commands, as few as cover its grid steps (:func:`shorten`: a command stands for a
stretch of steps when its walk ends where the bot's walk does and its other actions are the bot's next ones, so
``go to X n``, ``pickup X n`` and ``toggle and go through X n`` replace runs of steps). It wins all 112 games under
each action set: ``agentboard`` 1-74 commands (median 4), 6 games over 30; ``primitives_go_to`` 1-85, 11 over
30; ``primitives`` 1-188, 33 over 30. The bot runs in a worker process, kept across games, that is killed past
:data:`EXPERT_BUDGET_S` seconds for a game (the bot loops without end on some seeds; the worker's memory is bounded
too), and the expert then raises :class:`NoPlanError`. Splits do not run the bot (listing one stays instant): a
game without a plan is found by whoever asks for one, who skips and lists it (``bench/games.py`` does).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

from agemem.core.configlib import ConfigError
from agemem.tasks.base import Evaluation
from agemem.tasks.games import register_suite
from agemem.tasks.textgame import (
    GameConfig,
    GameItem,
    GameRef,
    GameState,
    GameSuite,
    NoPlanError,
    installed_version,
    round_robin,
)

ACTION_SETS: tuple[str, ...] = ("agentboard", "primitives_go_to", "primitives")
"""the values of ``babyai.actions``: AgentBoard's commands (the default), ours with ``go to X``, ours without."""
MISSION_WORDINGS: tuple[str, ...] = ("agentboard", "minigrid")
"""the values of ``babyai.mission_wording``: AgentBoard's rewording (the default), minigrid's own sentence."""


@dataclass
class BabyaiConfig(GameConfig):
    """BabyAI levels as text games (`agemem eval babyai`, data.source=babyai)."""

    max_env_steps: int = 30
    """environment steps per episode (AgentBoard's budget)."""
    first_seed: int = 1234
    """the first seed of every level (AgentBoard's 1234); another value gives other layouts of the same 28 levels,
    e.g. a training split disjoint from the evaluation one."""
    episodes_per_level: int = 4
    """seeds per level: 4 gives AgentBoard's 112 episodes (28 levels x 4)."""
    actions: Literal["agentboard", "primitives_go_to", "primitives"] = "agentboard"
    """the commands offered: `agentboard` (AgentBoard's: go to / pickup X n, drop, go through, toggle and go
    through, toggle, check valid actions, besides the turns and move forward), `primitives_go_to` (ours: pick up /
    drop / open / close the object in front, and go to X), `primitives` (ours without go to)."""
    mission_wording: Literal["agentboard", "minigrid"] = "agentboard"
    """`agentboard`: the mission as AgentBoard shows it ("then" and "after you" become "and"); `minigrid`:
    minigrid's own sentence, which keeps the order of the steps."""

    def validate(self) -> None:
        super().validate()
        for name, allowed in (("actions", ACTION_SETS), ("mission_wording", MISSION_WORDINGS)):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"babyai.{name}={value!r} is not one of {', '.join(allowed)}")
        if self.first_seed < 0:
            raise ConfigError(f"babyai.first_seed={self.first_seed} must be >= 0 (AgentBoard's split starts at 1234)")
        if self.episodes_per_level < 1:
            raise ConfigError(
                f"babyai.episodes_per_level={self.episodes_per_level} must be >= 1 (4 gives AgentBoard's 112 games)"
            )


LEVELS: tuple[tuple[str, str], ...] = (
    ("goto", "BabyAI-GoToRedBallGrey-v0"),
    ("goto", "BabyAI-GoToRedBall-v0"),
    ("goto", "BabyAI-GoToRedBallNoDists-v0"),
    ("goto", "BabyAI-GoToObjS6-v1"),
    ("goto", "BabyAI-GoToLocalS8N7-v0"),
    ("goto", "BabyAI-GoToObjMazeS7-v0"),
    ("goto", "BabyAI-GoToImpUnlock-v0"),
    ("goto", "BabyAI-GoToSeqS5R2-v0"),
    ("goto", "BabyAI-GoToRedBlueBall-v0"),
    ("goto", "BabyAI-GoToDoor-v0"),
    ("goto", "BabyAI-GoToObjDoor-v0"),
    ("open", "BabyAI-Open-v0"),
    ("open", "BabyAI-OpenRedDoor-v0"),
    ("open", "BabyAI-OpenDoorLoc-v0"),
    ("open", "BabyAI-OpenRedBlueDoorsDebug-v0"),
    ("open", "BabyAI-OpenDoorsOrderN4-v0"),
    ("pickup", "BabyAI-Pickup-v0"),
    ("pickup", "BabyAI-UnblockPickup-v0"),
    ("pickup", "BabyAI-PickupLoc-v0"),
    ("pickup", "BabyAI-PickupDistDebug-v0"),
    ("pickup", "BabyAI-PickupAbove-v0"),
    ("unlock", "BabyAI-Unlock-v0"),
    ("unlock", "BabyAI-UnlockLocalDist-v0"),
    ("unlock", "BabyAI-UnlockPickupDist-v0"),
    ("unlock", "BabyAI-BlockedUnlockPickup-v0"),
    ("unlock", "BabyAI-UnlockToUnlock-v0"),
    ("find", "BabyAI-FindObjS7-v0"),
    ("find", "BabyAI-KeyCorridorS6R3-v0"),
)
"""AgentBoard's 28 BabyAI levels in its order, with their family (the task type)."""
TASK_TYPES: tuple[str, ...] = ("goto", "open", "pickup", "unlock", "find")
TASK_LABELS: dict[str, str] = {"goto": "GoTo", "open": "Open", "pickup": "Pickup", "unlock": "Unlock", "find": "Find"}
SKIPPED: frozenset[tuple[str, int]] = frozenset({("BabyAI-UnlockToUnlock-v0", 1234)})
"""games left out of every split: the BabyAI bot loops forever on them (no expert plan) and they fall in
AgentBoard's seeds. Other seeds where it loops (UnlockToUnlock 9003, ...) stay in their splits: the expert's budget
(:data:`EXPERT_BUDGET_S`) turns them into a :class:`NoPlanError`."""
ENV_MAX_STEPS = 100_000
"""minigrid's own step limit (grid steps, a ``go to`` counts each): far beyond any episode's budget, so that
``max_env_steps`` is what ends an episode."""
INSTALL_HINT = "BabyAI needs the optional extra: pip install 'agemem[babyai]' (the minigrid package)"
_DIRECTIONS: tuple[tuple[int, int], ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))
"""minigrid's ``agent_dir`` 0..3 as a grid vector (east, south, west, north; y grows downwards)."""
_PRIMITIVE = {"left": 0, "right": 1, "forward": 2, "pickup": 3, "drop": 4, "toggle": 5, "done": 6}
"""minigrid's action numbers (``MiniGridEnv.Actions``)."""
_TURNS = {0: "turn left", 1: "turn right", 2: "move forward"}
_PICKABLE = ("key", "ball", "box")

Pose = tuple[tuple[int, int], int]


class BabyaiMissingError(ConfigError):
    """The ``minigrid`` package is missing (the message says how to install it)."""


def require_babyai() -> dict[str, Any]:
    """gymnasium (with minigrid's levels registered) and the BabyAI bot; :class:`BabyaiMissingError` without them."""
    try:
        import gymnasium
        import minigrid  # noqa: F401  (importing it registers the BabyAI-* levels with gymnasium)
        from minigrid.utils.baby_ai_bot import BabyAIBot
    except ImportError as err:
        raise BabyaiMissingError(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    return {"gymnasium": gymnasium, "BabyAIBot": BabyAIBot}


# --------------------------------------------------------------------------------------------- the split


def level_seeds(env_id: str, first_seed: int, count: int) -> list[int]:
    """The first ``count`` seeds from ``first_seed`` on, less the :data:`SKIPPED` games of ``env_id``."""
    seeds: list[int] = []
    seed = first_seed
    while len(seeds) < count:
        if (env_id, seed) not in SKIPPED:
            seeds.append(seed)
        seed += 1
    return seeds


def game_of(env_id: str, seed: int, family: str) -> GameItem:
    """The split's entry for one level and seed: id ``GoToRedBall-v0-s1234``, source ``BabyAI-GoToRedBall-v0:1234``."""
    return GameItem(f"{env_id.removeprefix('BabyAI-')}-s{seed}", family, f"{env_id}:{seed}")


def parse_source(source: str) -> tuple[str, int]:
    """``BabyAI-GoToRedBall-v0:1234`` -> (env id, seed); a malformed source is a :class:`ConfigError`."""
    env_id, _, seed = source.rpartition(":")
    if not env_id.startswith("BabyAI-") or not seed.isdigit():
        raise ConfigError(f"BabyAI game source {source!r} is not '<BabyAI env id>:<seed>' (e.g. BabyAI-Open-v0:1234)")
    return env_id, int(seed)


def split_games(first_seed: int, episodes_per_level: int) -> list[GameItem]:
    """Every game of the split, ordered round-robin over :data:`TASK_TYPES`; within a family, seed by seed over its
    levels (so a prefix also spreads over the levels)."""
    by_family: dict[str, list[GameItem]] = {family: [] for family in TASK_TYPES}
    seeds = {env_id: level_seeds(env_id, first_seed, episodes_per_level) for _, env_id in LEVELS}
    for rank in range(episodes_per_level):
        for family, env_id in LEVELS:
            by_family[family].append(game_of(env_id, seeds[env_id][rank], family))
    return round_robin(by_family, TASK_TYPES)


def discover(settings: GameConfig) -> list[GameItem]:
    """The configured split (:func:`split_games`); needs minigrid, so that a missing extra fails here, early."""
    require_babyai()
    return split_games(_setting(settings, "first_seed", 1234), _setting(settings, "episodes_per_level", 4))


def _setting(settings: GameConfig, name: str, default: Any) -> Any:
    # a plain GameConfig (another suite's section) has none of BabyAI's own fields: use AgentBoard's values
    return getattr(settings, name, default)


# --------------------------------------------------------------------------------------------- the agent's view


@dataclass(frozen=True)
class Seen:
    """An object in the agent's view."""

    name: str
    """how commands call it: ``red ball``, numbered by distance when the view holds two (``grey key 2``)."""
    obj: Any
    """the minigrid ``WorldObj``."""
    position: tuple[int, int]
    """its grid cell."""
    forward: int
    """steps ahead of the agent (0: beside it)."""
    right: int
    """steps to the agent's right (negative: left)."""


@dataclass(frozen=True)
class View:
    """What the agent sees now: the cells in view and the objects among them, nearest first."""

    visible: frozenset[tuple[int, int]]
    objects: tuple[Seen, ...]


def _add(a: tuple[int, int], b: tuple[int, int], times: int = 1) -> tuple[int, int]:
    return (a[0] + times * b[0], a[1] + times * b[1])


def right_of(direction: int) -> tuple[int, int]:
    """The grid vector to the agent's right when it faces ``direction``."""
    return _DIRECTIONS[(direction + 1) % 4]


def object_label(obj: Any) -> str:
    """``red ball``: colour and type (a door's state is said in the description, not in its name)."""
    return f"{obj.color} {obj.type}"


def agentboard_label(obj: Any) -> str:
    """AgentBoard's name stem: colour and type, and a door's state between them (``red closed door``), so that a
    door is renamed when it opens."""
    if obj.type == "door":
        state = "locked" if obj.is_locked else "open" if obj.is_open else "closed"
        return f"{obj.color} {state} door"
    return object_label(obj)


def current_view(env: Any, agentboard_names: bool = False) -> View:
    """The cells of minigrid's partial view (walls hide what is behind them) and the objects in it, walls left out,
    named and sorted nearest first. Names: ours (``red ball``, numbered by distance where the view holds two
    alike), or, with ``agentboard_names``, AgentBoard's (:func:`agentboard_label`, always numbered: ``red ball
    1``, ``blue locked door 1``)."""
    _, mask = env.gen_obs_grid()
    size = env.agent_view_size
    position, direction = _pose(env)
    ahead, right = _DIRECTIONS[direction], right_of(direction)
    visible: set[tuple[int, int]] = set()
    found: list[tuple[int, int, tuple[int, int], Any]] = []
    for column in range(size):
        for row in range(size):
            if not mask[column, row]:
                continue
            forward, lateral = size - 1 - row, column - size // 2  # the agent stands at the bottom middle of the view
            cell = _add(_add(position, ahead, forward), right, lateral)
            if not (0 <= cell[0] < env.grid.width and 0 <= cell[1] < env.grid.height):
                continue
            visible.add(cell)
            obj = env.grid.get(*cell)
            if obj is not None and obj.type != "wall" and cell != position:
                found.append((forward, lateral, cell, obj))
    found.sort(key=lambda item: (abs(item[0]) + abs(item[1]), item[0], item[1]))
    return View(frozenset(visible), tuple(_named(found, agentboard_names)))


def _named(found: list[tuple[int, int, tuple[int, int], Any]], agentboard_names: bool) -> list[Seen]:
    labels = [(agentboard_label if agentboard_names else object_label)(obj) for *_, obj in found]
    counts: dict[str, int] = {}
    named = []
    for (forward, lateral, cell, obj), label in zip(found, labels):
        counts[label] = counts.get(label, 0) + 1
        numbered = agentboard_names or labels.count(label) > 1
        name = f"{label} {counts[label]}" if numbered else label
        named.append(Seen(name, obj, cell, forward, lateral))
    return named


def _pose(env: Any) -> Pose:
    return (int(env.agent_pos[0]), int(env.agent_pos[1])), int(env.agent_dir)


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def where(seen: Seen) -> str:
    """``2 steps forward and 1 step to your left``, ``right in front of you``, ``1 step to your right``."""
    if seen.forward == 1 and seen.right == 0:
        return "right in front of you"
    parts = [f"{_steps(seen.forward)} forward"] if seen.forward else []
    if seen.right:
        parts.append(f"{_steps(abs(seen.right))} to your {'right' if seen.right > 0 else 'left'}")
    return " and ".join(parts)


def _article(obj: Any) -> str:
    if obj.type == "wall":
        return "a wall"
    if obj.type == "door":
        state = "locked" if obj.is_locked else "open" if obj.is_open else "closed"
        return f"{'an' if state == 'open' else 'a'} {state} {object_label(obj)}"
    return f"a {object_label(obj)}"


def _phrase(seen: Seen, agentboard_names: bool) -> str:
    """``a closed red door``, ``a grey ball (grey ball 2)`` where the view holds two alike; AgentBoard's names are
    the phrase themselves (``a red closed door 1``)."""
    if agentboard_names:
        return f"a {seen.name}"  # every colour starts with a consonant
    numbered = f" ({seen.name})" if seen.name != object_label(seen.obj) else ""
    return f"{_article(seen.obj)}{numbered}"


def free_cells_ahead(env: Any, view: View) -> int:
    """How many cells the agent could walk straight ahead through what it sees."""
    position, direction = _pose(env)
    count = 0
    cell = _add(position, _DIRECTIONS[direction])
    while cell in view.visible and _passable(env.grid.get(*cell)):
        count += 1
        cell = _add(cell, _DIRECTIONS[direction])
    return count


def describe_view(env: Any, view: View, agentboard_names: bool = False) -> str:
    """The agent's view as text: what it carries, what is ahead, and every visible object with where it is, by
    the name commands use (with ``agentboard_names``, that name alone: ``a blue locked door 1``)."""
    carrying = env.carrying
    lines = [f"You are carrying {_article(carrying)}." if carrying else "You are carrying nothing."]
    position, direction = _pose(env)
    front = env.grid.get(*_add(position, _DIRECTIONS[direction]))
    free = free_cells_ahead(env, view)
    if front is not None and front.type != "door" and not front.can_overlap():
        lines.append(f"Right in front of you is {_article(front)}.")
    elif free == 0:
        lines.append("You cannot move forward.")
    else:
        lines.append(f"You can move {_steps(free)} forward.")
    if view.objects:
        seen = "; ".join(f"{_phrase(item, agentboard_names)} {where(item)}" for item in view.objects)
        lines.append(f"You see {seen}.")
    else:
        lines.append("You see no objects, only walls and floor.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- actions


def _passable(cell: Any) -> bool:
    return cell is None or (cell.can_overlap() and cell.type != "lava")


def path_to_face(env: Any, view: View, target: tuple[int, int]) -> list[int] | None:
    """The fewest turns and moves (minigrid action numbers) after which the agent faces ``target``, walking only
    through cells it sees; None when there is no such path. ``[]``: it faces it already."""
    start = _pose(env)
    came_from: dict[Pose, tuple[Pose, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        pose = queue.popleft()
        cell, direction = pose
        if _add(cell, _DIRECTIONS[direction]) == target:
            return _unwind(came_from, pose)
        ahead = _add(cell, _DIRECTIONS[direction])
        nexts = [((cell, (direction + 3) % 4), 0), ((cell, (direction + 1) % 4), 1)]
        if ahead in view.visible and _passable(env.grid.get(*ahead)):
            nexts.insert(0, ((ahead, direction), 2))
        for following, action in nexts:
            if following not in came_from:
                came_from[following] = (pose, action)
                queue.append(following)
    return None


def _unwind(came_from: dict[Pose, tuple[Pose, int] | None], pose: Pose) -> list[int]:
    actions: list[int] = []
    step = came_from[pose]
    while step is not None:
        pose, action = step
        actions.append(action)
        step = came_from[pose]
    return actions[::-1]


def front_actions(env: Any, view: View) -> dict[str, int]:
    """The commands on the cell right in front (pick up, drop, open, close) and their minigrid action."""
    position, direction = _pose(env)
    front_cell = _add(position, _DIRECTIONS[direction])
    front = env.grid.get(*front_cell)
    carrying = env.carrying
    name = next((item.name for item in view.objects if item.position == front_cell), "")
    actions: dict[str, int] = {}
    if front is None and carrying is not None:
        actions[f"drop {object_label(carrying)}"] = _PRIMITIVE["drop"]
    if front is None or not name:
        return actions
    if front.type in _PICKABLE and carrying is None:
        actions[f"pick up {name}"] = _PRIMITIVE["pickup"]
    if front.type == "box":
        actions[f"open {name}"] = _PRIMITIVE["toggle"]  # the box disappears, leaving what it held
    if front.type == "door":
        if front.is_open:
            actions[f"close {name}"] = _PRIMITIVE["toggle"]
        elif not front.is_locked or _is_key(carrying, front.color):
            actions[f"open {name}"] = _PRIMITIVE["toggle"]
    return actions


def admissible(env: Any, view: View, actions: str = "agentboard") -> dict[str, list[int]]:
    """Every command the game accepts now, with the minigrid actions it runs, for the action set ``actions`` (see
    :data:`ACTION_SETS`; ``view`` names the objects as that set does: :func:`view_of`). Ours
    (``primitives_go_to``, ``primitives``): the moves (``move forward`` only when the cell ahead is free), the
    actions on the object in front (:func:`front_actions`), and, with ``go to``, ``go to X`` for each visible
    object with a path (:func:`path_to_face`; facing it already runs minigrid's no-op ``done``, which lets a ``go
    to`` mission check itself). AgentBoard's: :func:`agentboard_actions`."""
    if actions == "agentboard":
        return agentboard_actions(env, view)
    commands = _moves(env, view)
    commands.update({command: [action] for command, action in front_actions(env, view).items()})
    if actions == "primitives_go_to":
        commands.update(_go_tos(env, view))
    return commands


def _moves(env: Any, view: View) -> dict[str, list[int]]:
    commands: dict[str, list[int]] = {"turn left": [_PRIMITIVE["left"]], "turn right": [_PRIMITIVE["right"]]}
    if free_cells_ahead(env, view) > 0:
        commands["move forward"] = [_PRIMITIVE["forward"]]
    return commands


def _go_tos(env: Any, view: View) -> dict[str, list[int]]:
    commands: dict[str, list[int]] = {}
    for item in view.objects:
        path = path_to_face(env, view, item.position)
        if path is not None:
            commands[f"go to {item.name}"] = path or [_PRIMITIVE["done"]]
    return commands


CHECK_COMMAND = "check valid actions"
"""AgentBoard's help command, as its agents are told to write it: lists the valid actions, changes nothing."""


def agentboard_actions(env: Any, view: View) -> dict[str, list[int]]:
    """AgentBoard's commands (its ``babyai_env.py`` action space), by its words and names (``view`` from
    :func:`current_view` with ``agentboard_names``): ``turn left``, ``turn right``, ``move forward`` (when the cell
    ahead is free); while carrying nothing, ``pickup X n`` for each visible key, ball or box with a path (walk to
    face it, pick it up); while carrying, ``drop`` (when the cell ahead is free); ``go through X n`` for an open
    door (walk into the doorway), ``toggle and go through X n`` for a closed door, or a locked one while carrying
    a key of its colour (walk to face it, open it, step into the doorway), and ``toggle`` while facing such a
    door; ``go to X n`` for every visible object with a path (as ours); and :data:`CHECK_COMMAND`. Paths go
    through the cells the agent sees (:func:`path_to_face`)."""
    commands = _moves(env, view)
    paths = {item.name: path_to_face(env, view, item.position) for item in view.objects}
    carrying = env.carrying
    if carrying is None:
        for item in view.objects:
            path = paths[item.name]
            if item.obj.type in _PICKABLE and path is not None:
                commands[f"pickup {item.name}"] = [*path, _PRIMITIVE["pickup"]]
    else:
        position, direction = _pose(env)
        if env.grid.get(*_add(position, _DIRECTIONS[direction])) is None:
            commands["drop"] = [_PRIMITIVE["drop"]]
    for item in view.objects:
        door, path = item.obj, paths[item.name]
        if door.type != "door" or path is None:
            continue
        if door.is_open:
            commands[f"go through {item.name}"] = [*path, _PRIMITIVE["forward"]]
        elif not door.is_locked or _is_key(carrying, door.color):
            commands[f"toggle and go through {item.name}"] = [*path, _PRIMITIVE["toggle"], _PRIMITIVE["forward"]]
            if not path:
                commands["toggle"] = [_PRIMITIVE["toggle"]]
    commands.update(_go_tos(env, view))
    commands[CHECK_COMMAND] = []
    return commands


def normalise(command: str) -> str:
    """Lower case, single spaces, no final full stop (as the episode sends it)."""
    return " ".join(command.lower().split()).rstrip(".").strip()


# --------------------------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class Subgoal:
    """A milestone of the mission: ``label`` says what, ``reached(env, view, leaves_done)`` whether it is met."""

    label: str
    reached: Callable[[Any, View, list[bool]], bool]


def mission_leaves(instr: Any) -> list[Any]:
    """The mission's atomic instructions (go to, pick up, open, put next) in order."""
    if hasattr(instr, "instr_a"):  # before / after / and: two parts
        return mission_leaves(instr.instr_a) + mission_leaves(instr.instr_b)
    return [instr]


def leaves_done(instr: Any, done: bool) -> list[bool]:
    """Which atomic instructions minigrid's verifier counts as done (its ``a_done`` / ``b_done`` flags stay set)."""
    if hasattr(instr, "instr_a"):
        return leaves_done(instr.instr_a, done or instr.a_done == "success") + leaves_done(
            instr.instr_b, done or instr.b_done == "success"
        )
    return [done]


def _sees(objects: list[Any]) -> Callable[[Any, View, list[bool]], bool]:
    return lambda env, view, done: any(item.obj is obj for item in view.objects for obj in objects)


def _carries(objects: list[Any]) -> Callable[[Any, View, list[bool]], bool]:
    return lambda env, view, done: any(env.carrying is obj for obj in objects)


def _carries_key(color: str) -> Callable[[Any, View, list[bool]], bool]:
    return lambda env, view, done: _is_key(env.carrying, color)


def _is_key(obj: Any, color: str) -> bool:
    return obj is not None and obj.type == "key" and obj.color == color


def _unlocked(door: Any) -> Callable[[Any, View, list[bool]], bool]:
    return lambda env, view, done: not door.is_locked


def _leaf_done(index: int) -> Callable[[Any, View, list[bool]], bool]:
    return lambda env, view, done: done[index]


def mission_objects(env: Any) -> list[list[Any]]:
    """For each atomic instruction, the objects that would do (for ``put next``: the object to move, then the
    objects it may go next to)."""
    objects = []
    for leaf in mission_leaves(env.instrs):
        if hasattr(leaf, "desc_move"):
            objects += [list(leaf.desc_move.obj_set), list(leaf.desc_fixed.obj_set)]
        else:
            objects.append(list(leaf.desc.obj_set))
    return objects


def _neighbours(cell: tuple[int, int]) -> list[tuple[int, int]]:
    return [_add(cell, step) for step in _DIRECTIONS]


def reachable_cells(env: Any, blocked: tuple[int, int] | None) -> set[tuple[int, int]]:
    """The cells the agent could reach from its start through anything but walls and the cell ``blocked`` (objects
    can be moved out of the way, and every other door opened)."""
    start, _ = _pose(env)
    seen = {start}
    queue = deque([start])
    while queue:
        for cell in _neighbours(queue.popleft()):
            if (
                cell in seen
                or cell == blocked
                or not (0 <= cell[0] < env.grid.width and 0 <= cell[1] < env.grid.height)
            ):
                continue
            obj = env.grid.get(*cell)
            if obj is None or obj.type != "wall":
                seen.add(cell)
                queue.append(cell)
    return seen


def needed_locked_doors(env: Any) -> list[Any]:
    """The locked doors the mission cannot do without: one it must open, one without which some instruction has no
    object left within reach, and, in turn, one that walls off every key of a needed door (UnlockToUnlock). Other
    locked doors of a level are scenery (GoToObjDoor has some), and their keys no milestone."""
    cells = {
        id(obj): (x, y) for x in range(env.grid.width) for y in range(env.grid.height) if (obj := env.grid.get(x, y))
    }
    objects = [env.grid.get(*cell) for cell in cells.values()]
    opened = [
        obj for leaf in mission_leaves(env.instrs) if type(leaf).__name__ == "OpenInstr" for obj in leaf.desc.obj_set
    ]
    wanted = mission_objects(env)
    candidates = [obj for obj in objects if obj.type == "door" and obj.is_locked]
    needed: list[Any] = []
    while True:
        new = [door for door in candidates if _is_among(door, opened) or _walls_off(env, door, wanted, cells)]
        if not new:
            return needed
        needed += new
        candidates = [door for door in candidates if not _is_among(door, new)]
        wanted += [[obj for obj in objects if _is_key(obj, door.color)] for door in new]  # its key must be reached


def _is_among(obj: Any, group: list[Any]) -> bool:
    return any(obj is other for other in group)  # by identity: two red balls are two objects


def _walls_off(env: Any, door: Any, wanted: list[list[Any]], cells: dict[int, tuple[int, int]]) -> bool:
    """With ``door`` shut for good, some group of ``wanted`` has no object within reach."""
    reach = reachable_cells(env, blocked=cells[id(door)])
    return not all(any(_within(env, obj, cells, reach) for obj in group) for group in wanted)


def _within(env: Any, obj: Any, cells: dict[int, tuple[int, int]], reach: set[tuple[int, int]]) -> bool:
    """``obj`` is carried, or its cell or one beside it (a door, a blocked object) is in ``reach``."""
    if env.carrying is obj:
        return True
    cell = cells.get(id(obj))
    return cell is not None and bool({cell, *_neighbours(cell)} & reach)


def subgoals(env: Any) -> list[Subgoal]:
    """The milestones of the mission, AgentBoard-style: for each atomic instruction, seeing its object (for ``put
    next``: seeing and carrying the object to move, then seeing where it goes) and doing it; for each locked door of
    the level that the mission needs (:func:`needed_locked_doors`), carrying a key of its colour and unlocking it.
    Those already met at reset are left out, so an agent
    that achieves nothing ends with progress 0."""
    goals: list[Subgoal] = []
    for index, leaf in enumerate(mission_leaves(env.instrs)):
        text = leaf.surface(env)
        if hasattr(leaf, "desc_move"):
            moved, fixed = list(leaf.desc_move.obj_set), list(leaf.desc_fixed.obj_set)
            goals += [
                Subgoal(f"see {leaf.desc_move.surface(env)}", _sees(moved)),
                Subgoal(f"carry {leaf.desc_move.surface(env)}", _carries(moved)),
                Subgoal(f"see {leaf.desc_fixed.surface(env)}", _sees(fixed)),
            ]
        else:
            goals.append(Subgoal(f"see {leaf.desc.surface(env)}", _sees(list(leaf.desc.obj_set))))
        goals.append(Subgoal(text, _leaf_done(index)))
    for door in needed_locked_doors(env):
        goals += [Subgoal(f"carry a {door.color} key", _carries_key(door.color))]
        goals += [Subgoal(f"unlock the {door.color} door", _unlocked(door))]
    view, done = current_view(env), leaves_done(env.instrs, False)
    return [goal for goal in goals if not goal.reached(env, view, done)]


# --------------------------------------------------------------------------------------------- one game


def agentboard_mission(mission: str) -> str:
    """The mission as AgentBoard shows it: every "then" and "after you" replaced by "and" ("open the red door,
    then open the blue door" -> "open the red door, and open the blue door"). The order of the steps is no longer
    said, while minigrid still checks it."""
    return mission.replace("then", "and").replace("after you", "and")


def view_of(env: Any, actions: str) -> View:
    """:func:`current_view` with the names the action set ``actions`` uses."""
    return current_view(env, agentboard_names=actions == "agentboard")


class BabyaiGame:
    """One BabyAI episode (a level at a seed) as a text game: ``reset()``, then ``step(command)`` with a command
    from the last state's ``admissible`` list; anything else changes nothing (``valid=False``). ``actions`` picks
    the commands (:data:`ACTION_SETS`), ``mission_wording`` how the mission reads (:data:`MISSION_WORDINGS`)."""

    def __init__(self, env_id: str, seed: int, *, actions: str = "agentboard", mission_wording: str = "agentboard"):
        if actions not in ACTION_SETS or mission_wording not in MISSION_WORDINGS:
            raise ConfigError(
                f"BabyaiGame(actions={actions!r}, mission_wording={mission_wording!r}): actions is one of "
                f"{', '.join(ACTION_SETS)}; mission_wording one of {', '.join(MISSION_WORDINGS)}"
            )
        gymnasium = require_babyai()["gymnasium"]
        self.env_id, self.seed, self.actions, self.mission_wording = env_id, seed, actions, mission_wording
        self.env: Any = gymnasium.make(env_id, max_steps=ENV_MAX_STEPS).unwrapped
        self._commands: dict[str, list[int]] = {}
        self._subgoals: list[Subgoal] = []
        self._reached: set[int] = set()
        self._won = self._over = self._started = False

    @property
    def mission(self) -> str:
        """The mission as the agent reads it (:attr:`mission_wording`)."""
        mission = str(self.env.mission)
        return agentboard_mission(mission) if self.mission_wording == "agentboard" else mission

    def reset(self) -> GameState:
        # minigrid's level generator prints "Sampling rejected: ..." for every rejected draw of a level: its
        # internal retries, not something a user can act on
        with contextlib.redirect_stdout(io.StringIO()):
            self.env.reset(seed=self.seed)
        self._started = True
        self._subgoals, self._reached = subgoals(self.env), set()
        self._won = self._over = False
        return self._state(f"Your mission: {self.mission}.", valid=True)

    def step(self, command: str) -> GameState:
        if not self._started:
            raise RuntimeError("BabyaiGame.step before reset()")
        command = normalise(command)
        if self._won or self._over:
            return self._state("The episode is over.", valid=False)
        if command not in self._commands:
            return self._state(f"'{command}' is not a valid action now; nothing happens.", valid=False)
        if command == CHECK_COMMAND:
            listed = ", ".join(name for name in self._commands if name != CHECK_COMMAND)
            return self._state(f"The valid actions now: {listed}.", valid=True)
        carried = self.env.carrying
        for action in self._commands[command]:
            _, reward, terminated, truncated, _ = self.env.step(action)
            self._won = terminated and reward > 0
            self._over = (terminated and reward <= 0) or truncated  # strict levels fail on a wrong door
            if terminated or truncated:
                break
        return self._state(self._feedback(command, carried), valid=True)

    def close(self) -> None:
        self.env.close()

    def _feedback(self, command: str, carried: Any) -> str:
        if self._won:
            return "You completed the mission."
        if self._over:
            return "You failed the mission."
        if command == "toggle":
            return "You toggle the door in front of you."
        if command == "drop" and carried is not None:
            return f"You drop the {object_label(carried)}."
        if command.startswith("pickup "):
            command = f"pick up {command.removeprefix('pickup ')}"
        return f"You {command}."

    def _state(self, feedback: str, *, valid: bool) -> GameState:
        view = view_of(self.env, self.actions)
        self._commands = admissible(self.env, view, self.actions)
        done = leaves_done(self.env.instrs, self._won)
        self._reached |= {index for index, goal in enumerate(self._subgoals) if goal.reached(self.env, view, done)}
        progress = 1.0 if self._won else len(self._reached) / len(self._subgoals) if self._subgoals else 0.0
        return GameState(
            observation=f"{feedback}\n{describe_view(self.env, view, self.actions == 'agentboard')}",
            admissible=list(self._commands),
            won=self._won,
            progress=progress,
            over=self._over,
            valid=valid,
            goal=self.mission,
        )

    @property
    def pose(self) -> Pose:
        """The agent's cell and direction (the expert plan compares them)."""
        return _pose(self.env)


def open_game(game: GameRef, settings: GameConfig) -> BabyaiGame:
    """One episode of ``game`` (not yet reset)."""
    env_id, seed = parse_source(game.source)
    return BabyaiGame(
        env_id,
        seed,
        actions=_setting(settings, "actions", "agentboard"),
        mission_wording=_setting(settings, "mission_wording", "agentboard"),
    )


# --------------------------------------------------------------------------------------------- the expert


MAX_BOT_STEPS = 2_000
"""grid steps after which the bot is taken to have failed (it needs at most a few hundred on these levels)."""
EXPERT_BUDGET_S = 10.0
"""wall seconds the expert may take for one game (:func:`expert_plan`'s ``budget_s``): the bot plans a game in
0.06 s typically, and loops without end on some (``BabyAI-UnlockToUnlock-v0`` seeds 1234, 9003, ...)."""
EXPERT_MEMORY_BYTES = 2 * 1024**3
"""the address space the expert's worker process may take (``RLIMIT_AS``): it needs about 0.2 GB; a looping bot
grows until stopped."""
EXPERT_START_S = 120.0
"""wall seconds the worker process may take to start (its imports), before any game's budget starts."""


Played = tuple[str, Pose, tuple[bool, ...], int]
"""one grid step of the bot: its command (primitive action set), the agent's pose and the mission's done
instructions after it, and the minigrid action."""


def bot_commands(game: BabyaiGame) -> list[Played]:
    """The BabyAI bot's solution from ``game``'s start (a game with the ``primitives`` action set), one command per
    grid step (:data:`Played`); ``game`` is reset and played to the win. The bot's ``done`` (the goal is faced
    already) becomes ``turn left``, ``turn right`` (the check comes after the second). Raises
    :class:`NoPlanError` when the bot does not win. Runs in this process, unbounded: :func:`expert_plan` bounds
    it."""
    bot_class = require_babyai()["BabyAIBot"]
    state = game.reset()
    bot = bot_class(game.env)
    played: list[Played] = []
    while not state.won and len(played) < MAX_BOT_STEPS:
        action = int(bot.replan())
        steps = [_PRIMITIVE["left"], _PRIMITIVE["right"]] if action == _PRIMITIVE["done"] else [action]
        for step in steps:
            command = _command_for(game, step)
            if command not in state.admissible or state.over:
                raise NoPlanError(f"{game.env_id}:{game.seed}: the bot's {command!r} is not admissible")
            state = game.step(command)
            played.append((command, game.pose, tuple(leaves_done(game.env.instrs, state.won)), step))
    if not state.won:
        raise NoPlanError(f"{game.env_id}:{game.seed}: the BabyAI bot did not win in {MAX_BOT_STEPS} steps")
    return played


def _command_for(game: BabyaiGame, action: int) -> str:
    """The text command that runs minigrid ``action`` now (a one-action command of the primitive set)."""
    if action in _TURNS:
        return _TURNS[action]
    view = current_view(game.env)
    matches = [command for command, actions in front_actions(game.env, view).items() if actions == action]
    return matches[0] if matches else f"<minigrid action {action}>"


def shorten(game: BabyaiGame, played: list[Played]) -> list[str]:
    """``played`` said in ``game``'s action set in the fewest commands: in the bot's state before each of its steps,
    each admissible command stands for a stretch of the steps from there (:func:`_covers`: its walk ends in a pose
    the bot reaches, skipping no pose where a ``go to`` instruction was done, and its other actions are the bot's
    next ones), so ``go to X``, ``pickup X n`` or ``toggle and go through X n`` replace runs of steps; the plan is
    the fewest such stretches that cover the bot's steps. ``game`` is reset and the plan played on it, checked to
    leave the agent where the bot was and to win: :class:`NoPlanError` when a step has no command, or it does
    not."""
    stretches = _stretches(game, played)
    fewest: dict[int, list[tuple[str, int]]] = {0: []}  # steps covered -> the commands (and where each ends)
    for index in range(len(played)):
        if index not in fewest:
            continue
        for last, name in stretches[index]:
            if last + 1 not in fewest or len(fewest[index]) + 1 < len(fewest[last + 1]):
                fewest[last + 1] = [*fewest[index], (name, last)]
    if len(played) not in fewest:
        first = min(set(range(len(played) + 1)) - set(fewest))
        raise NoPlanError(
            f"{game.env_id}:{game.seed}: the bot's {played[first - 1][0]!r} has no command in the {game.actions!r} "
            "action set"
        )
    state = game.reset()
    for name, last in fewest[len(played)]:
        if name not in state.admissible:
            raise NoPlanError(f"{game.env_id}:{game.seed}: {name!r} is not admissible where the bot was")
        state = game.step(name)
        if not state.won and game.pose != played[last][1]:
            raise NoPlanError(f"{game.env_id}:{game.seed}: {name!r} left the agent elsewhere than the bot")
    if not state.won:
        raise NoPlanError(f"{game.env_id}:{game.seed}: the bot's plan said in {game.actions!r} commands does not win")
    return [name for name, _ in fewest[len(played)]]


def _stretches(game: BabyaiGame, played: list[Played]) -> list[list[tuple[int, str]]]:
    """For each step of ``played``, the commands of ``game``'s action set admissible in the bot's state before it,
    each with a last step it may stand for (:func:`_covers`), longest first: the bot's steps are replayed on a game
    of the same level with the primitive actions, and its state read with ``game``'s commands."""
    replay = BabyaiGame(game.env_id, game.seed, actions="primitives", mission_wording="minigrid")
    try:
        replay.reset()
        stretches: list[list[tuple[int, str]]] = []
        for index, (command, *_) in enumerate(played):
            env = replay.env
            done_before = played[index - 1][2] if index else tuple(leaves_done(env.instrs, False))
            commands = admissible(env, view_of(env, game.actions), game.actions)
            ends = [
                (last, name)
                for name, run in commands.items()
                for last in _covers(replay.pose, run, played, index, done_before)
            ]
            stretches.append(sorted(ends, key=lambda end: -end[0]))
            replay.step(command)
        return stretches
    finally:
        replay.close()


_MOVE_ACTIONS = (_PRIMITIVE["left"], _PRIMITIVE["right"], _PRIMITIVE["forward"], _PRIMITIVE["done"])


def _covers(
    pose: Pose, actions: list[int], played: list[Played], start: int, done_before: tuple[bool, ...]
) -> list[int]:
    """The indices of ``played`` at which a stretch from ``start`` may end that the command running ``actions``
    from ``pose`` stands for. ``actions`` is a walk (turns, moves) and a tail from its first other action on: the
    walk must end in a pose that the bot's run of moves from ``start`` reaches (:func:`_moves_reaching`; an empty
    walk reaches ``pose`` as it is), and the tail must be the bot's very next actions."""
    split = next((i for i, action in enumerate(actions) if action not in _MOVE_ACTIONS), len(actions))
    walk, tail = actions[:split], actions[split:]
    reached = _moves_reaching(played, start, _pose_after(pose, walk), done_before) if walk else [start - 1]
    ends = []
    for index in reached:
        following = [step[3] for step in played[index + 1 : index + 1 + len(tail)]]
        if following == tail and index + len(tail) >= start:
            ends.append(index + len(tail))
    return ends


def _pose_after(pose: Pose, actions: list[int]) -> Pose:
    cell, direction = pose
    for action in actions:
        if action == _PRIMITIVE["left"]:
            direction = (direction + 3) % 4
        elif action == _PRIMITIVE["right"]:
            direction = (direction + 1) % 4
        elif action == _PRIMITIVE["forward"]:
            cell = _add(cell, _DIRECTIONS[direction])
    return cell, direction


def _moves_reaching(played: list[Played], start: int, pose: Pose, done_before: tuple[bool, ...]) -> list[int]:
    """The indices from ``start`` on, within a run of moves that completes no instruction before its end, whose
    pose is ``pose``."""
    found = []
    for index in range(start, len(played)):
        _, after, done, action = played[index]
        if action not in _MOVE_ACTIONS:
            break
        if after == pose:
            found.append(index)
        if done != done_before:  # a go-to instruction was checked here: a shortcut must not skip this pose
            break
    return found


def bot_plan(env_id: str, seed: int, actions: str = "agentboard") -> list[str]:
    """A winning command list for ``env_id`` at ``seed`` in the action set ``actions``: the BabyAI bot played on a
    game with the primitive actions (:func:`bot_commands`), then said in ``actions`` (:func:`shorten`). Runs in
    this process, without a time bound (the bot may never return): :func:`expert_plan` runs it in a worker."""
    primitive = BabyaiGame(env_id, seed, actions="primitives", mission_wording="minigrid")
    target = BabyaiGame(env_id, seed, actions=actions, mission_wording="minigrid")
    try:
        return shorten(target, bot_commands(primitive))
    finally:
        primitive.close()
        target.close()


def expert_plan(game: GameRef, settings: GameConfig, *, budget_s: float = EXPERT_BUDGET_S) -> list[str]:
    """A winning command list from the start state in the configured action set (:func:`bot_plan`), planned in a
    worker process that is stopped, and started afresh for the next game, when the plan takes more than
    ``budget_s`` wall seconds; the worker is kept between games, and its memory is bounded
    (:data:`EXPERT_MEMORY_BYTES`). :class:`NoPlanError` (a ``RuntimeError``) when there is no plan within the
    budget: splits list such games and do not run the bot to find them (``babyai.first_seed`` may pick some);
    callers skip them (``bench/games.py`` lists them as having no expert plan)."""
    env_id, seed = parse_source(game.source)
    if not budget_s > 0:
        raise ValueError(f"expert_plan(budget_s={budget_s!r}): the budget must be > 0 seconds")
    actions = _setting(settings, "actions", "agentboard")
    if actions not in ACTION_SETS:
        raise ConfigError(f"babyai.actions={actions!r} is not one of {', '.join(ACTION_SETS)}")
    require_babyai()  # a missing minigrid is said here, not as a dead worker
    return _EXPERT.plan(env_id, seed, actions, budget_s)


class _ExpertWorker:
    """A worker process that runs :func:`bot_plan` for one game at a time (:func:`serve_expert`), reused across
    games, killed and replaced when a game runs past its budget or the worker dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None
        self._owner = 0  # the pid that started the worker: a forked child starts its own

    def plan(self, env_id: str, seed: int, actions: str, budget_s: float) -> list[str]:
        name = f"{env_id}:{seed}"
        with self._lock:
            connection = self._connection if self._alive() else self._start(name)
            try:
                connection.send((env_id, seed, actions, budget_s))
                answered = connection.poll(budget_s)
                kind, value = connection.recv() if answered else ("late", "")
            except (EOFError, OSError) as err:
                code = self.stop()
                raise NoPlanError(f"{name}: the expert's worker process died (exit code {code}; {err!r})") from None
            if kind == "late":
                self.stop()
                raise NoPlanError(
                    f"{name}: the BabyAI bot found no plan within the expert's budget of {budget_s:g} s "
                    "(its worker process was stopped)"
                )
            if kind == "memory":
                self.stop()  # a worker that ran out of memory starts afresh
            if kind != "plan":
                raise NoPlanError(value if str(value).startswith(name) else f"{name}: {value}")
            return list(value)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._alive() and self._process is not None else None

    def stop(self) -> int | None:
        """Kill the worker (if any); its exit code."""
        process, connection = self._process, self._connection
        self._process = self._connection = None
        if connection is not None:
            connection.close()
        if process is None:
            return None
        if process.poll() is None:
            process.kill()
        return process.wait()

    def _alive(self) -> bool:
        if self._owner != os.getpid():  # forked: the parent's worker is not ours to use or to stop
            self._process = self._connection = None
            return False
        return self._process is not None and self._process.poll() is None

    def _start(self, name: str) -> Connection:
        self.stop()
        ours, theirs = socket.socketpair()
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)  # this process's imports
        for threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            environment.setdefault(threads, "1")
        code = f"from agemem.tasks.babyai import serve_expert; serve_expert({theirs.fileno()}, {EXPERT_MEMORY_BYTES})"
        with theirs:
            self._process = subprocess.Popen(
                [sys.executable, "-c", code],
                pass_fds=(theirs.fileno(),),
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,  # read if it fails to start; it sends nothing there once started
            )
        process, self._connection, self._owner = self._process, Connection(ours.detach()), os.getpid()
        try:
            ready = self._connection.poll(EXPERT_START_S) and self._connection.recv() == ("ready", None)
        except (EOFError, OSError):
            ready = False
        if not ready:
            code = self.stop()
            said = process.stderr.read().decode(errors="replace").strip()[-2000:] if process.stderr else ""
            raise NoPlanError(f"{name}: the BabyAI expert's worker process did not start (exit code {code}) {said}")
        if process.stderr:
            process.stderr.close()
        return self._connection


_EXPERT = _ExpertWorker()
atexit.register(_EXPERT.stop)


def expert_worker() -> int | None:
    """The process id of the expert's worker process, None while none runs (it starts with the first plan)."""
    return _EXPERT.pid


def serve_expert(fd: int, memory_bytes: int) -> None:
    """The expert's worker process: plans the games sent over the connection on ``fd`` (``(env id, seed, action
    set, budget)`` -> ``("plan", commands)``, or ``("error" | "memory", message)``) until it closes. Its address
    space is limited to ``memory_bytes``; an alarm at twice the budget ends a plan the parent has given up on
    (should the parent be gone without killing it)."""
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    connection = Connection(fd)
    with open(os.devnull, "wb") as devnull:  # the parent stops reading stderr once the worker runs
        os.dup2(devnull.fileno(), 2)

    def late(signum: int, frame: Any) -> None:
        raise TimeoutError("the plan ran past twice its budget")

    signal.signal(signal.SIGALRM, late)
    with contextlib.suppress(BabyaiMissingError):  # imported before the first budget starts (else each plan says it)
        require_babyai()
    connection.send(("ready", None))
    while True:
        try:
            env_id, seed, actions, budget_s = connection.recv()
        except (EOFError, OSError):
            return
        signal.setitimer(signal.ITIMER_REAL, 2 * budget_s + 1)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                answer: tuple[str, Any] = ("plan", bot_plan(env_id, seed, actions))
        except MemoryError:
            answer = ("memory", f"the BabyAI bot ran out of the expert's {memory_bytes / 2**30:g} GiB of memory")
        except Exception as err:
            answer = ("error", str(err) if isinstance(err, NoPlanError) else f"{type(err).__name__}: {err}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            connection.send(answer)
        except OSError:
            return


# --------------------------------------------------------------------------------------------- the suite


def describe(settings: GameConfig) -> dict[str, Any]:
    """What identifies the split in a run's identity."""
    return {
        "levels": len(LEVELS),
        "first_seed": _setting(settings, "first_seed", 1234),
        "episodes_per_level": _setting(settings, "episodes_per_level", 4),
        "actions": _setting(settings, "actions", "agentboard"),
        "mission_wording": _setting(settings, "mission_wording", "agentboard"),
        "minigrid": installed_version("minigrid"),  # another minigrid lays the same seed out differently
    }


WORLD = (
    "You are an agent in BabyAI, a grid world of rooms joined by doors, with keys, balls and boxes in them. You see "
    "only the cells in front of you, up to 6 steps ahead and 3 to each side, and walls and closed doors hide what is "
    "behind them. Each observation says what you carry, what is ahead and where each object you see is (in steps "
    "forward and to your left or right), followed by the valid actions. Reply with one of them, exactly as listed: "
    "turn left, turn right, move forward; go to X, which walks to an object you see and faces it; pickup X, which "
    "walks to it and picks it up; drop; go through X, which walks into an open door; toggle and go through X, which "
    "walks to a closed door, opens it and steps into it; toggle, for the door right in front of you; check valid "
    "actions. Objects are named with a number (red ball 1), doors with their state (blue locked door 1). You carry "
    "one object at a time; a locked door opens only while you carry a key of its colour. You win by completing the "
    "mission given in the first observation (go to, pick up, open, or put an object next to another, sometimes "
    "several)."
)

SUITE = GameSuite(
    name="babyai",
    title="BabyAI",
    world=WORLD,
    example_command="go to red ball 1",
    task_types=TASK_TYPES,
    discover=discover,
    open=open_game,
    task_labels=TASK_LABELS,
    headline="SR",
    strict_admissible=True,
    has_progress=True,
    has_score=False,
    split_note="AgentBoard's 28 BabyAI levels x seeds 1234-1237 (112 episodes, minigrid 3.2.0)",
    describe=describe,
    settings=BabyaiConfig,
    expert=expert_plan,
    evaluation=Evaluation(
        "BabyAI levels described in text, with the memory tools: SR per level family, steps, TC",
        "babyai.limit",
    ),
)
"""BabyAI as a text game: SR per level family (goto, open, pickup, unlock, find)."""

BABYAI = register_suite(SUITE)

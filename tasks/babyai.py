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
rate) are a data file this project does not ship; :func:`subgoals` derives them from the mission instead.

**The text.** minigrid observes a 7x7 grid in front of the agent (walls hide what is behind them); the text is
ours, in the style of AgentBoard and BabyAI-Text: what the agent carries, what is right in front of it, and every
visible object with its distance in steps forward and to the left or right (:func:`describe_view`).

**Actions** (:func:`admissible`), all listed every step: the primitives ``turn left``, ``turn right``, ``move
forward`` (when the cell ahead is free), and, for the object right in front, ``pick up X``, ``drop X``, ``open X``
(a door, a locked door while carrying its key, a box) and ``close X``; and, as AgentBoard, ``go to X`` for each
visible object the agent can reach through the cells it sees, which walks there and faces it (one command, many
grid steps: with 30 commands per episode, primitives alone cannot finish the maze levels). ``babyai.go_to_actions
= false`` offers the primitives only. Duplicate names are numbered by distance (``grey ball 1``, ``grey ball 2``).

**Metrics.** ``won`` is minigrid's own success (``over``: a strict level failed, e.g. the wrong door opened);
``progress`` (AgentBoard's progress rate, the episode keeps its best) is the share of the mission's milestones
reached (:func:`subgoals`: seeing each target, carrying what must be carried, each instruction done, and the key and
unlocking of each locked door the mission needs; none already met at reset), 1.0 when won; there is no score.

**Expert** (:func:`expert_plan`): minigrid's ``BabyAIBot`` played from the start state, its grid steps as
commands, runs of moves folded into ``go to X``; it wins all 112 games (with ``go to``: 2-91 commands, 11 games
over 30; primitives only: up to 220).
"""

from __future__ import annotations

import contextlib
import io
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.tasks.base import Evaluation
from agemem.tasks.games import register_suite
from agemem.tasks.textgame import (
    GameConfig,
    GameItem,
    GameRef,
    GameState,
    GameSuite,
    installed_version,
    round_robin,
)


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
    go_to_actions: bool = True
    """offer `go to X` (walk to a visible object and face it, as AgentBoard does) besides the primitive actions;
    false: turn left / turn right / move forward and the actions on the object in front only."""

    def validate(self) -> None:
        super().validate()
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
"""games left out of every split: the BabyAI bot loops forever on them (no expert plan)."""
ENV_MAX_STEPS = 100_000
"""minigrid's own step limit (grid steps, a ``go to`` counts each): far beyond any episode's budget, so that
``max_env_steps`` is what ends an episode."""
INSTALL_HINT = "BabyAI needs the optional extra: pip install 'agemem[babyai]' (the minigrid package)"
MOVES: tuple[str, ...] = ("turn left", "turn right", "move forward")
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


def current_view(env: Any) -> View:
    """The cells of minigrid's partial view (walls hide what is behind them) and the objects in it, walls left out,
    named and sorted nearest first."""
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
    return View(frozenset(visible), tuple(_named(found)))


def _named(found: list[tuple[int, int, tuple[int, int], Any]]) -> list[Seen]:
    labels = [object_label(obj) for *_, obj in found]
    counts: dict[str, int] = {}
    named = []
    for (forward, lateral, cell, obj), label in zip(found, labels):
        counts[label] = counts.get(label, 0) + 1
        name = f"{label} {counts[label]}" if labels.count(label) > 1 else label
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


def _numbered(seen: Seen) -> str:
    # the name commands use, where the view holds two objects alike
    return f" ({seen.name})" if seen.name != object_label(seen.obj) else ""


def free_cells_ahead(env: Any, view: View) -> int:
    """How many cells the agent could walk straight ahead through what it sees."""
    position, direction = _pose(env)
    count = 0
    cell = _add(position, _DIRECTIONS[direction])
    while cell in view.visible and _passable(env.grid.get(*cell)):
        count += 1
        cell = _add(cell, _DIRECTIONS[direction])
    return count


def describe_view(env: Any, view: View) -> str:
    """The agent's view as text: what it carries, what is ahead, and every visible object with where it is."""
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
        seen = "; ".join(f"{_article(item.obj)}{_numbered(item)} {where(item)}" for item in view.objects)
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


def admissible(env: Any, view: View, go_to_actions: bool = True) -> dict[str, list[int]]:
    """Every command the game accepts now, with the minigrid actions it runs: the moves (``move forward`` only
    when the cell ahead is free), the actions on the object in front, and ``go to X`` for each visible object with a
    path (:func:`path_to_face`; facing it already runs minigrid's no-op ``done``, which lets a ``go to`` mission
    check itself)."""
    commands: dict[str, list[int]] = {"turn left": [0], "turn right": [1]}
    if free_cells_ahead(env, view) > 0:
        commands["move forward"] = [2]
    commands.update({command: [action] for command, action in front_actions(env, view).items()})
    if go_to_actions:
        for item in view.objects:
            path = path_to_face(env, view, item.position)
            if path is not None:
                commands[f"go to {item.name}"] = path or [_PRIMITIVE["done"]]
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


class BabyaiGame:
    """One BabyAI episode (a level at a seed) as a text game: ``reset()``, then ``step(command)`` with a command
    from the last state's ``admissible`` list; anything else changes nothing (``valid=False``)."""

    def __init__(self, env_id: str, seed: int, *, go_to_actions: bool = True):
        gymnasium = require_babyai()["gymnasium"]
        self.env_id, self.seed, self.go_to_actions = env_id, seed, go_to_actions
        self.env: Any = gymnasium.make(env_id, max_steps=ENV_MAX_STEPS).unwrapped
        self._commands: dict[str, list[int]] = {}
        self._subgoals: list[Subgoal] = []
        self._reached: set[int] = set()
        self._won = self._over = self._started = False

    def reset(self) -> GameState:
        # minigrid's level generator prints "Sampling rejected: ..." for every rejected draw of a level: its
        # internal retries, not something a user can act on
        with contextlib.redirect_stdout(io.StringIO()):
            self.env.reset(seed=self.seed)
        self._started = True
        self._subgoals, self._reached = subgoals(self.env), set()
        self._won = self._over = False
        return self._state(f"Your mission: {self.env.mission}.", valid=True)

    def step(self, command: str) -> GameState:
        if not self._started:
            raise RuntimeError("BabyaiGame.step before reset()")
        command = normalise(command)
        if self._won or self._over:
            return self._state("The episode is over.", valid=False)
        if command not in self._commands:
            return self._state(f"'{command}' is not a valid action now; nothing happens.", valid=False)
        for action in self._commands[command]:
            _, reward, terminated, truncated, _ = self.env.step(action)
            self._won = terminated and reward > 0
            self._over = (terminated and reward <= 0) or truncated  # strict levels fail on a wrong door
            if terminated or truncated:
                break
        return self._state(self._feedback(command), valid=True)

    def close(self) -> None:
        self.env.close()

    def _feedback(self, command: str) -> str:
        if self._won:
            return "You completed the mission."
        if self._over:
            return "You failed the mission."
        return f"You {command}."

    def _state(self, feedback: str, *, valid: bool) -> GameState:
        view = current_view(self.env)
        self._commands = admissible(self.env, view, self.go_to_actions)
        done = leaves_done(self.env.instrs, self._won)
        self._reached |= {index for index, goal in enumerate(self._subgoals) if goal.reached(self.env, view, done)}
        progress = 1.0 if self._won else len(self._reached) / len(self._subgoals) if self._subgoals else 0.0
        return GameState(
            observation=f"{feedback}\n{describe_view(self.env, view)}",
            admissible=list(self._commands),
            won=self._won,
            progress=progress,
            over=self._over,
            valid=valid,
            goal=self.env.mission,
        )

    @property
    def pose(self) -> Pose:
        """The agent's cell and direction (the expert plan compares them)."""
        return _pose(self.env)


def open_game(game: GameRef, settings: GameConfig) -> BabyaiGame:
    """One episode of ``game`` (not yet reset)."""
    env_id, seed = parse_source(game.source)
    return BabyaiGame(env_id, seed, go_to_actions=_setting(settings, "go_to_actions", True))


# --------------------------------------------------------------------------------------------- the expert


MAX_BOT_STEPS = 2_000
"""grid steps after which the bot is taken to have failed (it needs at most a few hundred on these levels)."""


def bot_commands(game: BabyaiGame) -> list[tuple[str, Pose, tuple[bool, ...]]]:
    """The BabyAI bot's solution from ``game``'s start, one command per grid step, each with the agent's pose and
    the mission's done instructions after it; ``game`` is reset and played to the win. The bot's ``done`` (the goal
    is faced already) becomes ``turn left``, ``turn right`` (the check comes after the second). Raises RuntimeError
    when the bot does not win."""
    bot_class = require_babyai()["BabyAIBot"]
    state = game.reset()
    bot = bot_class(game.env)
    played: list[tuple[str, Pose, tuple[bool, ...]]] = []
    while not state.won and len(played) < MAX_BOT_STEPS:
        action = int(bot.replan())
        commands = ["turn left", "turn right"] if action == _PRIMITIVE["done"] else [_command_for(game, action)]
        for command in commands:
            if command not in state.admissible or state.over:
                raise RuntimeError(f"{game.env_id}:{game.seed}: the bot's {command!r} is not admissible")
            state = game.step(command)
            played.append((command, game.pose, tuple(leaves_done(game.env.instrs, state.won))))
    if not state.won:
        raise RuntimeError(f"{game.env_id}:{game.seed}: the BabyAI bot did not win in {MAX_BOT_STEPS} steps")
    return played


def _command_for(game: BabyaiGame, action: int) -> str:
    """The text command that runs minigrid ``action`` now (a one-action command of the admissible list)."""
    if action in _TURNS:
        return _TURNS[action]
    view = current_view(game.env)
    matches = [command for command, actions in front_actions(game.env, view).items() if actions == action]
    return matches[0] if matches else f"<minigrid action {action}>"


def shorten(game: BabyaiGame, played: list[tuple[str, Pose, tuple[bool, ...]]]) -> list[str]:
    """``played`` with runs of moves replaced by one ``go to X`` wherever that ends in the same pose (moves change
    nothing else, so the rest of the plan still applies) and skips no pose where a ``go to`` instruction of the
    mission was done; ``game`` is reset and played to the end."""
    state = game.reset()
    plan: list[str] = []
    index = 0
    while index < len(played) and not state.won:
        command, skip_to = played[index][0], index
        done_before = played[index - 1][2] if index else tuple(leaves_done(game.env.instrs, False))
        view = current_view(game.env)
        goals = {name: actions for name, actions in admissible(game.env, view).items() if name.startswith("go to")}
        for name, actions in goals.items():
            end = _pose_after(game.pose, actions)
            last = _last_move_reaching(played, index, end, done_before)
            if last > skip_to:
                command, skip_to = name, last
        state = game.step(command)
        plan.append(command)
        index = skip_to + 1
    return plan


def _pose_after(pose: Pose, actions: list[int]) -> Pose:
    cell, direction = pose
    for action in actions:
        if action == 0:
            direction = (direction + 3) % 4
        elif action == 1:
            direction = (direction + 1) % 4
        elif action == 2:
            cell = _add(cell, _DIRECTIONS[direction])
    return cell, direction


def _last_move_reaching(
    played: list[tuple[str, Pose, tuple[bool, ...]]], start: int, pose: Pose, done_before: tuple[bool, ...]
) -> int:
    """The last index from ``start`` on, within a run of moves that completes no instruction before its end, whose
    pose is ``pose`` (else -1)."""
    found = -1
    for index in range(start, len(played)):
        command, after, done = played[index]
        if command not in MOVES:
            break
        if after == pose:
            found = index
        if done != done_before:  # a go-to instruction was checked here: a shortcut must not skip this pose
            break
    return found


def expert_plan(game: GameRef, settings: GameConfig) -> list[str]:
    """A winning command list from the start state: the BabyAI bot's grid steps (:func:`bot_commands`), with runs of
    moves folded into ``go to X`` commands when those are offered (:func:`shorten`)."""
    world = open_game(game, settings)
    try:
        played = bot_commands(world)
        return shorten(world, played) if world.go_to_actions else [command for command, *_ in played]
    finally:
        world.close()


# --------------------------------------------------------------------------------------------- the suite


def describe(settings: GameConfig) -> dict[str, Any]:
    """What identifies the split in a run's identity."""
    return {
        "levels": len(LEVELS),
        "first_seed": _setting(settings, "first_seed", 1234),
        "episodes_per_level": _setting(settings, "episodes_per_level", 4),
        "go_to_actions": _setting(settings, "go_to_actions", True),
        "minigrid": installed_version("minigrid"),  # another minigrid lays the same seed out differently
    }


WORLD = (
    "You are an agent in BabyAI, a grid world of rooms joined by doors, with keys, balls and boxes in them. You see "
    "only the cells in front of you, up to 6 steps ahead and 3 to each side, and walls and closed doors hide what is "
    "behind them. Each observation says what you carry, what is ahead and where each object you see is (in steps "
    "forward and to your left or right), followed by the valid actions. Reply with one of them: turn left, turn "
    "right, move forward, an action on the object right in front of you (pick up X, drop X, open X, close X), or go "
    "to X, which walks to an object you see and faces it. You carry one object at a time; a locked door opens only "
    "while you carry a key of its colour; opening a box removes it. You win by completing the mission given in the "
    "first observation (go to, pick up, open, or put an object next to another, sometimes several in order)."
)

SUITE = GameSuite(
    name="babyai",
    title="BabyAI",
    world=WORLD,
    example_command="go to red ball",
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

"""The text view of a BabyAI game: what the agent sees (:class:`View`, :func:`describe_view`) and the commands it may
send (:func:`admissible`), read off a minigrid environment. :mod:`agemem.tasks.babyai` plays them as a game.

**The text.** minigrid observes a 7x7 grid in front of the agent (walls hide what is behind them); the text is
ours, in the style of AgentBoard and BabyAI-Text: what the agent carries, what is right in front of it, and every
visible object with its distance in steps forward and to the left or right (:func:`describe_view`), by the name
the commands use.

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
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

DIRECTIONS: tuple[tuple[int, int], ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))
"""minigrid's ``agent_dir`` 0..3 as a grid vector (east, south, west, north; y grows downwards)."""
PRIMITIVE = {"left": 0, "right": 1, "forward": 2, "pickup": 3, "drop": 4, "toggle": 5, "done": 6}
"""minigrid's action numbers (``MiniGridEnv.Actions``)."""
_PICKABLE = ("key", "ball", "box")

Pose = tuple[tuple[int, int], int]


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


def add(a: tuple[int, int], b: tuple[int, int], times: int = 1) -> tuple[int, int]:
    """The cell (or vector) ``a`` moved ``times`` times by the vector ``b``."""
    return (a[0] + times * b[0], a[1] + times * b[1])


def right_of(direction: int) -> tuple[int, int]:
    """The grid vector to the agent's right when it faces ``direction``."""
    return DIRECTIONS[(direction + 1) % 4]


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
    position, direction = pose_of(env)
    ahead, right = DIRECTIONS[direction], right_of(direction)
    visible: set[tuple[int, int]] = set()
    found: list[tuple[int, int, tuple[int, int], Any]] = []
    for column in range(size):
        for row in range(size):
            if not mask[column, row]:
                continue
            forward, lateral = size - 1 - row, column - size // 2  # the agent stands at the bottom middle of the view
            cell = add(add(position, ahead, forward), right, lateral)
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


def view_of(env: Any, actions: str) -> View:
    """:func:`current_view` with the names the action set ``actions`` uses."""
    return current_view(env, agentboard_names=actions == "agentboard")


def pose_of(env: Any) -> Pose:
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
    position, direction = pose_of(env)
    count = 0
    cell = add(position, DIRECTIONS[direction])
    while cell in view.visible and _passable(env.grid.get(*cell)):
        count += 1
        cell = add(cell, DIRECTIONS[direction])
    return count


def describe_view(env: Any, view: View, agentboard_names: bool = False) -> str:
    """The agent's view as text: what it carries, what is ahead, and every visible object with where it is, by
    the name commands use (with ``agentboard_names``, that name alone: ``a blue locked door 1``)."""
    carrying = env.carrying
    lines = [f"You are carrying {_article(carrying)}." if carrying else "You are carrying nothing."]
    position, direction = pose_of(env)
    front = env.grid.get(*add(position, DIRECTIONS[direction]))
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


def is_key(obj: Any, color: str) -> bool:
    return obj is not None and obj.type == "key" and obj.color == color


def path_to_face(env: Any, view: View, target: tuple[int, int]) -> list[int] | None:
    """The fewest turns and moves (minigrid action numbers) after which the agent faces ``target``, walking only
    through cells it sees; None when there is no such path. ``[]``: it faces it already."""
    start = pose_of(env)
    came_from: dict[Pose, tuple[Pose, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        pose = queue.popleft()
        cell, direction = pose
        if add(cell, DIRECTIONS[direction]) == target:
            return _unwind(came_from, pose)
        ahead = add(cell, DIRECTIONS[direction])
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
    position, direction = pose_of(env)
    front_cell = add(position, DIRECTIONS[direction])
    front = env.grid.get(*front_cell)
    carrying = env.carrying
    name = next((item.name for item in view.objects if item.position == front_cell), "")
    actions: dict[str, int] = {}
    if front is None and carrying is not None:
        actions[f"drop {object_label(carrying)}"] = PRIMITIVE["drop"]
    if front is None or not name:
        return actions
    if front.type in _PICKABLE and carrying is None:
        actions[f"pick up {name}"] = PRIMITIVE["pickup"]
    if front.type == "box":
        actions[f"open {name}"] = PRIMITIVE["toggle"]  # the box disappears, leaving what it held
    if front.type == "door":
        if front.is_open:
            actions[f"close {name}"] = PRIMITIVE["toggle"]
        elif not front.is_locked or is_key(carrying, front.color):
            actions[f"open {name}"] = PRIMITIVE["toggle"]
    return actions


def admissible(env: Any, view: View, actions: str = "agentboard") -> dict[str, list[int]]:
    """Every command the game accepts now, with the minigrid actions it runs, for the action set ``actions`` (see
    :data:`agemem.tasks.babyai.ACTION_SETS`; ``view`` names the objects as that set does: :func:`view_of`). Ours
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
    commands: dict[str, list[int]] = {"turn left": [PRIMITIVE["left"]], "turn right": [PRIMITIVE["right"]]}
    if free_cells_ahead(env, view) > 0:
        commands["move forward"] = [PRIMITIVE["forward"]]
    return commands


def _go_tos(env: Any, view: View) -> dict[str, list[int]]:
    commands: dict[str, list[int]] = {}
    for item in view.objects:
        path = path_to_face(env, view, item.position)
        if path is not None:
            commands[f"go to {item.name}"] = path or [PRIMITIVE["done"]]
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
                commands[f"pickup {item.name}"] = [*path, PRIMITIVE["pickup"]]
    else:
        position, direction = pose_of(env)
        if env.grid.get(*add(position, DIRECTIONS[direction])) is None:
            commands["drop"] = [PRIMITIVE["drop"]]
    for item in view.objects:
        door, path = item.obj, paths[item.name]
        if door.type != "door" or path is None:
            continue
        if door.is_open:
            commands[f"go through {item.name}"] = [*path, PRIMITIVE["forward"]]
        elif not door.is_locked or is_key(carrying, door.color):
            commands[f"toggle and go through {item.name}"] = [*path, PRIMITIVE["toggle"], PRIMITIVE["forward"]]
            if not path:
                commands["toggle"] = [PRIMITIVE["toggle"]]
    commands.update(_go_tos(env, view))
    commands[CHECK_COMMAND] = []
    return commands


def normalise(command: str) -> str:
    """Lower case, single spaces, no final full stop (as the episode sends it)."""
    return " ".join(command.lower().split()).rstrip(".").strip()

"""BabyAI levels played as text games: the config, the split, the game and its progress, the expert hook, the suite.

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

**The text and the commands** (``babyai.actions``): :mod:`agemem.tasks.babyai_view` (what the agent sees, in
text, and the commands of each action set). The mission (``babyai.mission_wording``): by default as AgentBoard
words it, every "then" and "after you" replaced by "and" (:func:`agentboard_mission`; the order of the steps is
then unsaid, though minigrid still checks it); ``minigrid``: minigrid's sentence.

**Metrics.** ``won`` is minigrid's own success (``over``: a strict level failed, e.g. the wrong door opened);
``progress`` (AgentBoard's progress rate, the episode keeps its best) is the share of the mission's milestones
reached (:func:`subgoals`: seeing each target, carrying what must be carried, each instruction done, and the key and
unlocking of each locked door the mission needs; none already met at reset, so a game never acted on scores 0),
1.0 when won; there is no score.

**Expert** (:func:`expert_plan`): the BabyAI bot's solution said in the configured commands
(:mod:`agemem.tasks.babyai_expert`). The bot runs in a worker process, kept across games, that is killed past
:data:`EXPERT_BUDGET_S` seconds for a game (the bot loops without end on some seeds; the worker's memory is bounded
too), and the expert then raises :class:`NoPlanError`. Splits do not run the bot (listing one stays instant): a
game without a plan is found by whoever asks for one, who skips and lists it (``bench/games.py`` does).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
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
from agemem.tasks.babyai_view import (
    CHECK_COMMAND,
    DIRECTIONS,
    Pose,
    View,
    add,
    admissible,
    current_view,
    describe_view,
    is_key,
    normalise,
    object_label,
    pose_of,
    view_of,
)
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
    return lambda env, view, done: is_key(env.carrying, color)


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
    return [add(cell, step) for step in DIRECTIONS]


def reachable_cells(env: Any, blocked: tuple[int, int] | None) -> set[tuple[int, int]]:
    """The cells the agent could reach from its start through anything but walls and the cell ``blocked`` (objects
    can be moved out of the way, and every other door opened)."""
    start, _ = pose_of(env)
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
        wanted += [[obj for obj in objects if is_key(obj, door.color)] for door in new]  # its key must be reached


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
        return pose_of(self.env)


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


EXPERT_MODULE = "agemem.tasks.babyai_expert"
"""the module the expert's worker process runs (its :func:`~agemem.tasks.babyai_expert.serve_expert`), started
by name, not imported here: it plays :class:`BabyaiGame`."""
EXPERT_BUDGET_S = 10.0
"""wall seconds the expert may take for one game (:func:`expert_plan`'s ``budget_s``): the bot plans a game in
0.06 s typically, and loops without end on some (``BabyAI-UnlockToUnlock-v0`` seeds 1234, 9003, ...)."""
EXPERT_MEMORY_BYTES = 2 * 1024**3
"""the address space the expert's worker process may take (``RLIMIT_AS``): it needs about 0.2 GB; a looping bot
grows until stopped."""
EXPERT_START_S = 120.0
"""wall seconds the worker process may take to start (its imports), before any game's budget starts."""


def expert_plan(game: GameRef, settings: GameConfig, *, budget_s: float = EXPERT_BUDGET_S) -> list[str]:
    """A winning command list from the start state in the configured action set
    (:func:`~agemem.tasks.babyai_expert.bot_plan`), planned in a worker process that is stopped, and started afresh
    for the next game, when the plan takes more than ``budget_s`` wall seconds; the worker is kept between games,
    and its memory is bounded (:data:`EXPERT_MEMORY_BYTES`). :class:`NoPlanError` (a ``RuntimeError``) when there
    is no plan within the budget: splits list such games and do not run the bot to find them (``babyai.first_seed``
    may pick some); callers skip them (``bench/games.py`` lists them as having no expert plan)."""
    env_id, seed = parse_source(game.source)
    if not budget_s > 0:
        raise ValueError(f"expert_plan(budget_s={budget_s!r}): the budget must be > 0 seconds")
    actions = _setting(settings, "actions", "agentboard")
    if actions not in ACTION_SETS:
        raise ConfigError(f"babyai.actions={actions!r} is not one of {', '.join(ACTION_SETS)}")
    require_babyai()  # a missing minigrid is said here, not as a dead worker
    return _EXPERT.plan(env_id, seed, actions, budget_s)


class _ExpertWorker:
    """A worker process that runs :func:`~agemem.tasks.babyai_expert.bot_plan` for one game at a time
    (:func:`~agemem.tasks.babyai_expert.serve_expert`), reused across games, killed and replaced when a game runs
    past its budget or the worker dies."""

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
        code = f"from {EXPERT_MODULE} import serve_expert; serve_expert({theirs.fileno()}, {EXPERT_MEMORY_BYTES})"
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

"""ScienceWorld (SciWorld) tasks as text games: the split, one task variation played in the simulator, its gold path.

ScienceWorld (Wang et al., 2022) is a text simulation of a house (kitchen, workshop, greenhouse, outside, ...) in
which an agent carries out elementary-school science procedures: boil or freeze a substance, build a circuit, grow
a plant, mix paints, measure a melting point, classify living things, find the friction of a surface, work out a
Mendelian cross. It has 30 tasks in 10 topics; each task has many *variations* (the substance, the room layout,
the objects), which the simulator itself divides into train, dev and test sets. The simulator is a Java program
inside the ``scienceworld`` wheel, driven over py4j: the optional extra ``pip install 'agemem[sciworld]'`` plus a
Java 17 runtime (Debian: ``openjdk-17-jre-headless``); without them :func:`require_sciworld` raises
:class:`SciworldMissingError` with that command.

The split (:data:`SPLIT`, fixed here so that finding it needs no simulator): for each of the 30 tasks, the first
three of the simulator's *test* variations: 90 games, the size of AgentBoard's ScienceWorld set (Ma et al., 2024),
on which the AgeMem paper evaluates. AgentBoard's own 90 (task, variation) pairs and its hand-written subgoals live
in its data archive, not in its code, so they are not reproduced here; its settings are: 30 environment steps
(``max_env_steps``), the simplifications ``selfWateringFlowerPots,openContainers,openDoors,noElectricalAction``
(the default of ``simplifications``; the electrical tasks keep their ``connect`` actions, :func:`simplifications_for`)
and the action templates as the "valid actions" (``GameState.admissible``; the simulator decides what it accepts, so
the suite is not strict). Many gold paths are longer than 30 steps (boiling: ~100, genetics: ~140-300), as in
AgentBoard. The task types are the 10 topics (:data:`TASK_TYPES`); :func:`discover` orders the games round-robin
over them (within a topic, round-robin over its tasks), so that any ``--limit`` prefix is balanced. The simulator
also splits off train and dev variations (the first half, the third quarter); this module plays the test ones.

Metrics (AgentBoard's SR and PR, on the simulator's own score):

* ``score``: the simulator's score, 0..100 for the goal steps completed; -100 once the agent reaches a failure
  state (focusing on a wrong object, say), and -100 from then on.
* ``progress`` counts from 0 at reset: the share of the points still to gain at reset that the game has gained,
  ``max(score - start, 0) / (100 - start)`` (:func:`progress_from_score`; 1.0 when won); the episode keeps its
  best value over accepted commands (PR). 25 of the 90 games start with 2 to 20 points, goal steps the start
  already meets (``openDoors`` meets "be in a room with an open door" at once): under ``score / 100`` the first
  harmless command credited them, and an agent that only looked around scored PR 2.1 on the split. Those points
  are not the agent's doing, so they count neither up nor in the denominator: a command that gains nothing, a
  failure state included, scores 0, each point gained counts the same within a game, and every game's range is
  still 0..1 (subtracting them but keeping ``/ 100`` would cap an unwon game below ``1 - start / 100`` and make
  the win a jump). AgentBoard's progress starts at 0 too: its subgoals count only when a step's observation shows
  them.
* ``won``: the simulator completes the task with score 100 (SR).

Failure states: ScienceWorld's own ``step`` reports a -100 as done, but the simulator plays on: every command still
works, the score stays -100, and a task completed afterwards is marked completed at score -100, so ``won`` stays
False and no progress is gained after a failure. By default the episode goes on, as AgentBoard's (its loop ignores
the simulator's done and score), until the step budget; the agent is told only the simulator's reply to the
command (e.g. "You focus on the air."), nothing says the task failed. Since nothing after the failure counts, SR,
PR and score are those of the variant ``sciworld.end_on_failure=true``, where the failure ends the episode
(``over``, ``ended_by: lost``, and the debrief says the task failed); only steps, tokens and transcripts differ.

Where this differs from AgentBoard, whose ScienceWorld code reads its data archive (``data/scienceworld/
test.jsonl``, not in its repository): its 90 games are its own (task, variation) pairs, ours the first three test
variations per task; its progress is the share of hand-written subgoal patterns matched in the observations, ours
the simulator's score as above; its success is all those patterns matched, whatever the simulator's state (they
can still match after a failure state), ours the simulator's completion at 100; its goal text is a rewritten one
from the archive, ours the simulator's task description, shown with the first look and the inventory; it reports
SR/PR by difficulty (easy, hard), we by topic. Both give 30 steps and the same four simplifications (scienceworld
1.2.3 refuses ``noElectricalAction`` for the electrical tasks, so they play without it). Its agent types ``check
valid actions`` to see the action templates (a step spent); ours sees them after every observation, and
memory-tool replies cost no step; a refused command costs a step in both.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import itertools
import threading
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
class SciworldConfig(GameConfig):
    """ScienceWorld tasks (`agemem eval sciworld`, data.source=sciworld)."""

    max_env_steps: int = 30
    """environment steps per task (AgentBoard's budget)."""
    max_live_games: int = 4
    """games an evaluation plays side by side at most: each live game holds a simulator, a JVM of about 2.5 GB."""
    variations_per_task: int = 3
    """test variations played per task, 1-3 (the first ones of agemem.tasks.sciworld.SPLIT); 3 = all 90 games."""
    simplifications: str = "selfWateringFlowerPots,openContainers,openDoors,noElectricalAction"
    """ScienceWorld simplifications, comma-separated (default: AgentBoard's; the electrical tasks always keep their
    `connect` actions, so noElectricalAction skips them); empty = none."""
    end_on_failure: bool = False
    """ours: a -100 failure state ends the episode, as ScienceWorld's own done (default: it goes on, as AgentBoard)."""

    def validate(self) -> None:
        super().validate()
        if not 1 <= self.variations_per_task <= 3:
            raise ConfigError(
                f"sciworld.variations_per_task={self.variations_per_task} must be 1, 2 or 3 (the split holds 3 test "
                "variations per task; use limit to play fewer games)"
            )
        known = ("selfWateringFlowerPots", "openContainers", "openDoors", "noElectricalAction", "teleportAction")
        unknown = [name for name in self.simplifications.split(",") if name and name not in known]
        if unknown:
            raise ConfigError(
                f"sciworld.simplifications has unknown {', '.join(unknown)}: use a comma-separated subset of "
                f"{','.join(known)} (case-sensitive, no spaces), or an empty string for none"
            )


INSTALL_HINT = (
    "SciWorld needs the optional extra: pip install 'agemem[sciworld]' (the scienceworld package) and a Java 17 "
    "runtime on PATH (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"
)

TASKS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "changes-of-state": ("boil", "melt", "freeze", "change-the-state-of-matter-of"),
    "measurement": (
        "use-thermometer",
        "measure-melting-point-known-substance",
        "measure-melting-point-unknown-substance",
    ),
    "electricity": (
        "power-component",
        "power-component-renewable-vs-nonrenewable-energy",
        "test-conductivity",
        "test-conductivity-of-unknown-substances",
    ),
    "classification": ("find-living-thing", "find-non-living-thing", "find-plant", "find-animal"),
    "growing-plants": ("grow-plant", "grow-fruit"),
    "chemistry": ("chemistry-mix", "chemistry-mix-paint-secondary-color", "chemistry-mix-paint-tertiary-color"),
    "lifespans": ("lifespan-longest-lived", "lifespan-shortest-lived", "lifespan-longest-lived-then-shortest-lived"),
    "life-stages": ("identify-life-stages-1", "identify-life-stages-2"),
    "forces": (
        "inclined-plane-determine-angle",
        "inclined-plane-friction-named-surfaces",
        "inclined-plane-friction-unnamed-surfaces",
    ),
    "genetics": ("mendelian-genetics-known-plant", "mendelian-genetics-unknown-plant"),
}
"""the 30 ScienceWorld tasks by topic, in the paper's numbering (topics 1-10, tasks 1-1 .. 10-2)."""
TASK_TYPES: tuple[str, ...] = tuple(TASKS_BY_TYPE)
TASK_LABELS: dict[str, str] = {
    "changes-of-state": "state",
    "measurement": "measure",
    "electricity": "circuit",
    "classification": "classify",
    "growing-plants": "grow",
    "chemistry": "chem",
    "lifespans": "lifespan",
    "life-stages": "stages",
    "forces": "forces",
    "genetics": "genetics",
}
"""short column names of the topics."""
TYPE_OF_TASK: dict[str, str] = {task: topic for topic, tasks in TASKS_BY_TYPE.items() for task in tasks}

SPLIT: dict[str, tuple[int, ...]] = {
    "boil": (21, 22, 23),
    "melt": (21, 22, 23),
    "freeze": (21, 22, 23),
    "change-the-state-of-matter-of": (21, 22, 23),
    "use-thermometer": (405, 406, 407),
    "measure-melting-point-known-substance": (327, 328, 329),
    "measure-melting-point-unknown-substance": (225, 226, 227),
    "power-component": (15, 16, 17),
    "power-component-renewable-vs-nonrenewable-energy": (15, 16, 17),
    "test-conductivity": (675, 676, 677),
    "test-conductivity-of-unknown-substances": (450, 451, 452),
    "find-living-thing": (225, 226, 227),
    "find-non-living-thing": (225, 226, 227),
    "find-plant": (225, 226, 227),
    "find-animal": (225, 226, 227),
    "grow-plant": (93, 94, 95),
    "grow-fruit": (93, 94, 95),
    "chemistry-mix": (24, 25, 26),
    "chemistry-mix-paint-secondary-color": (27, 28, 29),
    "chemistry-mix-paint-tertiary-color": (27, 28, 29),
    "lifespan-longest-lived": (93, 94, 95),
    "lifespan-shortest-lived": (93, 94, 95),
    "lifespan-longest-lived-then-shortest-lived": (93, 94, 95),
    "identify-life-stages-1": (9, 10, 11),
    "identify-life-stages-2": (6, 7, 8),
    "inclined-plane-determine-angle": (126, 127, 128),
    "inclined-plane-friction-named-surfaces": (1038, 1039, 1040),
    "inclined-plane-friction-unnamed-surfaces": (120, 121, 122),
    "mendelian-genetics-known-plant": (90, 91, 92),
    "mendelian-genetics-unknown-plant": (360, 361, 362),
}
"""per task, the variations played, in order: the first three of the simulator's test variations
(``get_variations_test()``, the last quarter of each task's variations; scienceworld 1.2.3)."""
VARIATIONS_PER_TASK = 3

_ELECTRICAL_TASKS = frozenset(TASKS_BY_TYPE["electricity"])
_UNKNOWN_ACTION = "No known action matches that input."
_HIDDEN_TEMPLATES = frozenset({"reset task"})
"""templates not shown and refused: ``reset task`` would wipe the goal progress mid-episode (AgentBoard hides it)."""
_NO_STEP_LIMIT = 1_000_000
"""the simulator's own step limit, out of the way: the episode counts the steps (``max_env_steps``)."""


class SciworldMissingError(ConfigError):
    """The ``scienceworld`` package or the Java runtime is missing (the message says how to install them)."""


# --------------------------------------------------------------------------------------------- the split


def game_source(task: str, variation: int) -> str:
    """The ``source`` of a game: ``<task>:<variation>`` (``find-living-thing:225``)."""
    return f"{task}:{variation}"


def parse_source(source: str) -> tuple[str, int]:
    """``(task, variation)`` of a ``<task>:<variation>`` source; a ConfigError names a malformed one."""
    task, _, variation = source.rpartition(":")
    if task not in TYPE_OF_TASK or not variation.isdigit():
        raise ConfigError(f"SciWorld game {source!r} is not <task>:<variation> with one of the 30 ScienceWorld tasks")
    return task, int(variation)


def split_games(variations_per_task: int = VARIATIONS_PER_TASK) -> list[GameItem]:
    """The split's games, the first ``variations_per_task`` of each task, round-robin over :data:`TASK_TYPES` and,
    within a topic, over its tasks (variation by variation): any prefix is balanced over topics, then tasks."""
    groups: dict[str, list[GameItem]] = {}
    for task_type, tasks in TASKS_BY_TYPE.items():
        per_task = {task: [game_source(task, v) for v in SPLIT[task][:variations_per_task]] for task in tasks}
        groups[task_type] = [GameItem(source, task_type, source) for source in round_robin(per_task, tasks)]
    return round_robin(groups, TASK_TYPES)


def discover(settings: GameConfig) -> list[GameItem]:
    """The configured split (:func:`split_games`); :class:`SciworldMissingError` up front when the extra is missing,
    so that an evaluation fails before it loads a model."""
    require_sciworld()
    return split_games(getattr(settings, "variations_per_task", VARIATIONS_PER_TASK))


def simplifications_for(task: str, simplifications: str) -> str:
    """The simplifications a task is loaded with: ``noElectricalAction`` is dropped for the electrical tasks, which
    cannot be done without ``connect`` (the simulator refuses the combination)."""
    names = [name for name in simplifications.split(",") if name]
    if task in _ELECTRICAL_TASKS:
        names = [name for name in names if name != "noElectricalAction"]
    return ",".join(names)


# --------------------------------------------------------------------------------------------- the simulator


def require_sciworld() -> Any:
    """The ``ScienceWorldEnv`` class; :class:`SciworldMissingError` when the package or Java is missing."""
    import shutil

    try:
        from scienceworld import ScienceWorldEnv
    except ImportError as err:
        raise SciworldMissingError(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    if shutil.which("java") is None:  # py4j would fail later with a bare FileNotFoundError
        raise SciworldMissingError(f"{INSTALL_HINT} (no `java` on PATH)")
    return ScienceWorldEnv


class _SimulatorPool:
    """ScienceWorld simulators kept for reuse. Each is a JVM that takes seconds to start (and holds ~2 GB), while a
    game loads into a running one in under a second, so a process starts one per game it plays at once and reuses
    them; :func:`shutdown_simulators` (also run at interpreter exit) stops them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[Any] = []
        self._started: list[Any] = []

    def acquire(self) -> Any:
        with self._lock:
            if self._free:
                return self._free.pop()
        simulator = require_sciworld()("", envStepLimit=_NO_STEP_LIMIT)
        with self._lock:
            if not self._started:
                atexit.register(self.shutdown)  # registered at the first start, not at import
            self._started.append(simulator)
        return simulator

    def release(self, simulator: Any) -> None:
        with self._lock:
            if simulator in self._started:  # one stopped by shutdown() meanwhile is not handed out again
                self._free.append(simulator)

    def discard(self, simulator: Any) -> None:
        """Stop a simulator that failed (a dead JVM, a broken py4j link): the next game starts a fresh one."""
        with self._lock:
            if simulator in self._started:
                self._started.remove(simulator)
        with contextlib.suppress(Exception):  # it is broken already; what matters is that no game gets it again
            simulator.close()

    def shutdown(self) -> None:
        with self._lock:
            started, self._started, self._free = self._started, [], []
        for simulator in started:
            simulator.close()

    @property
    def started(self) -> int:
        """simulators (JVMs) running now."""
        return len(self._started)


_POOL = _SimulatorPool()


def shutdown_simulators() -> None:
    """Stop every simulator this process started (a game still open fails at its next step)."""
    _POOL.shutdown()


def running_simulators() -> int:
    """How many simulators (JVMs) this process runs now."""
    return _POOL.started


# --------------------------------------------------------------------------------------------- playing a game


def progress_from_score(score: float, start_score: float) -> float:
    """The share of the points still to gain at reset that the game has gained: ``max(score - start, 0) /
    (100 - start)``, in [0, 1]. 0 at reset and after anything that gains no point (a failure state, -100, too);
    1.0 only at 100, the win. Points held at reset (``openDoors`` meets "be in a room with an open door" at once)
    are not the agent's doing, so they count neither up nor in the denominator: every game's range is 0..1."""
    if start_score >= 100:  # nothing left to gain (no game of the split starts there)
        return 1.0 if score >= 100 else 0.0
    return min(max(score - start_score, 0.0), 100 - start_score) / (100 - start_score)


def state_from_score(
    observation: str,
    admissible: list[str],
    score: int,
    completed: bool,
    *,
    start_score: float = 0,
    end_on_failure: bool = False,
    valid: bool = True,
    goal: str = "",
) -> GameState:
    """The game state of a simulator answer. ``won``: the simulator completed the task with score 100 (a task it
    completes after a failure state keeps -100: never won). ``over``: a failure state (score -100) when
    ``end_on_failure``, else never for it (the game goes on, as AgentBoard's); a completion below 100 without a
    failure (not seen) ends it too. ``progress``: :func:`progress_from_score` from ``start_score``,
    the score at reset (1.0 when won)."""
    won = completed and score >= 100
    failure = score < 0
    progress = 1.0 if won else progress_from_score(score, start_score)
    over = (failure and end_on_failure) or (completed and not won and not failure)
    return GameState(observation, admissible, won, progress, over, float(score), valid, goal)


def failed(state: GameState) -> bool:
    """The game is in a ScienceWorld failure state (score -100, e.g. after focusing on a wrong object): it can no
    longer be won nor gain progress, whether or not the episode goes on (``end_on_failure``)."""
    return state.score is not None and state.score < 0


def _lean_step(simulator: Any, command: str) -> tuple[str, int, bool]:
    """``(observation, score 0..100 or -100, completed)`` after one command, as ``ScienceWorldEnv.step`` computes
    them, except that ``completed`` is the simulator's own flag (``step``'s done also holds at a failure state and
    after its step limit). Called on the simulator's interface directly because ``step`` also lists every valid
    action-object combination (hundreds), the look and the inventory: ~10x the cost of the step."""
    server = simulator.server
    observation = server.step(command).strip()
    score = round(100 * server.getScore())
    return observation, score, bool(server.getCompleted())


class SciworldGame:
    """One ScienceWorld task variation: ``reset()`` loads it into a pooled simulator, then ``step(command)`` until
    ``won`` or ``over``; ``close()`` (or a ``with`` block) hands the simulator back. ``gold_path=True`` also has
    the simulator generate its solution at reset (:attr:`gold_path`, :func:`expert_plan`)."""

    def __init__(self, game: GameRef, settings: SciworldConfig, *, gold_path: bool = False):
        self.game = game
        self.task, self.variation = parse_source(game.source)
        self.simplifications = simplifications_for(self.task, settings.simplifications)
        self.end_on_failure = settings.end_on_failure
        self.start_score = 0
        """the simulator's score at reset, the baseline of ``progress`` (:func:`progress_from_score`)."""
        self._want_gold_path = gold_path
        self._simulator: Any = None
        self._templates: list[str] = []
        self._last: GameState | None = None
        self._failed = False
        """the simulator raised: it is discarded at close, not handed to the next game."""

    def reset(self) -> GameState:
        if self._simulator is None:
            self._simulator = _POOL.acquire()
        simulator = self._simulator
        try:
            simulator.load(self.task, self.variation, self.simplifications, generateGoldPath=self._want_gold_path)
            look, info = simulator.reset()
        except Exception:
            self._failed = True
            raise
        goal = simulator.get_task_description().strip()
        self._templates = [name for name in simulator.get_possible_actions() if name not in _HIDDEN_TEMPLATES]
        observation = "\n\n".join(part for part in (goal, look.strip(), info["inv"].strip()) if part)
        self.start_score = info["score"]
        self._last = state_from_score(
            observation, self._templates, self.start_score, False, start_score=self.start_score, goal=goal
        )
        return self._last

    def step(self, command: str) -> GameState:
        """Send one command. One the simulator does not understand changes nothing (``valid=False``, its message);
        an ambiguous one is answered with numbered choices, and the next command picks one (``0``, ``1``, ...). After
        a failure state the simulator still plays every command (score -100 to the end, :func:`failed`)."""
        if self._last is None or self._simulator is None:
            raise RuntimeError("SciworldGame.step before reset()")
        command = " ".join(command.split())
        if not command or command in _HIDDEN_TEMPLATES:
            said = f'"{command}" is not available here; {_UNKNOWN_ACTION}' if command else _UNKNOWN_ACTION
            return dataclasses.replace(self._last, observation=said, valid=False)
        try:
            observation, score, completed = _lean_step(self._simulator, command)
        except Exception:
            self._failed = True
            raise
        valid = observation != _UNKNOWN_ACTION
        self._last = state_from_score(
            observation,
            self._templates,
            score,
            completed,
            start_score=self.start_score,
            end_on_failure=self.end_on_failure,
            valid=valid,
        )
        return self._last

    @property
    def simulator(self) -> Any:
        """The pooled ``ScienceWorldEnv`` this game holds (from ``reset`` to ``close``; None otherwise)."""
        return self._simulator

    @property
    def gold_path(self) -> list[str]:
        """The simulator's solution generated at reset (``gold_path=True`` only), as the agent would type it."""
        if self._simulator is None or not self._want_gold_path or self._last is None:
            return []
        actions = [" ".join(action.lower().split()) for action in self._simulator.get_gold_action_sequence()]
        if actions and actions[0].startswith("error"):
            raise RuntimeError(f"ScienceWorld generated no gold path for {self.game.source}: {actions[0]}")
        return actions

    def close(self) -> None:
        if self._simulator is not None:
            if self._failed:
                _POOL.discard(self._simulator)
            else:
                _POOL.release(self._simulator)
            self._simulator = None

    def __enter__(self) -> SciworldGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_game(game: GameRef, settings: GameConfig) -> SciworldGame:
    """One episode of ``game`` (not yet reset)."""
    return SciworldGame(game, _sciworld_settings(settings))


def expert_plan(game: GameRef, settings: GameConfig, *, tries: int = 3) -> list[str]:
    """A solution from the start state: the simulator's gold path, played through once to check that it wins, cut
    where it wins (with the waits right after it). The gold agent picks among equivalent targets at random and some
    of its picks fail (e.g. in find-living-thing, one animal of several), so a losing path is generated again, up to
    ``tries`` times. Generating and checking takes 0.2 s to 2 min (genetics)."""
    with SciworldGame(game, _sciworld_settings(settings), gold_path=True) as world:
        for _ in range(tries):
            world.reset()
            plan = world.gold_path
            for played, command in enumerate(plan, start=1):
                state = world.step(command)
                if state.won:
                    # keep the waits that follow the win: on a fresh load the simulator may count a circuit's or a
                    # plant's effect a tick later (an episode ends at the win, so surplus waits are never sent)
                    waits = itertools.takewhile(lambda later: later in ("wait1", "wait"), plan[played:])
                    return [*plan[:played], *waits]
                if state.over or failed(state):
                    break
    raise RuntimeError(f"ScienceWorld's gold path for {game.source} did not win in {tries} tries")


def _sciworld_settings(settings: GameConfig) -> SciworldConfig:
    """``settings`` as a SciworldConfig: another game's section keeps its shared budgets and gets SciWorld's
    defaults for the rest (the split, the simplifications)."""
    if isinstance(settings, SciworldConfig):
        return settings
    return SciworldConfig(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(GameConfig)})


def describe(settings: GameConfig) -> dict[str, Any]:
    """What identifies the split in a run's identity."""
    chosen = _sciworld_settings(settings)
    return {
        "split": "test",
        "variations_per_task": chosen.variations_per_task,
        "simplifications": chosen.simplifications,
        "end_on_failure": chosen.end_on_failure,  # the variant plays fewer steps after a failure state
        "scienceworld": installed_version("scienceworld"),  # another simulator may score or lay out games otherwise
    }


WORLD = (
    "You are an agent in ScienceWorld, a text simulation of a house (kitchen, workshop, greenhouse, outside and "
    "more) where you carry out an elementary-science task: boil or freeze a substance, build a circuit, grow a "
    "plant, mix paints, measure a temperature, find a living thing, and the like. Each command fills an action "
    "template with objects you can see, e.g. `go to kitchen`, `pick up thermometer`, `move metal pot to stove`, "
    "`activate stove`, `look at beaker`; `wait1` lets one time step pass (`wait`: ten). `focus on X` declares the "
    "object the task is about: focus only on what the task asks for, since focusing on a wrong object fails the "
    "task at once. When an object name is ambiguous, the game lists numbered choices and your next command is the "
    "number. The task is won when all its steps are done; its score (0-100) rises as you complete them."
)

SUITE = GameSuite(
    name="sciworld",
    title="SciWorld",
    world=WORLD,
    example_command="go to kitchen",
    task_types=TASK_TYPES,
    discover=discover,
    open=open_game,
    task_labels=TASK_LABELS,
    headline="SR",
    strict_admissible=False,
    has_progress=True,
    has_score=True,
    split_note="90 ScienceWorld games: the first 3 test variations of each of the 30 tasks (AgentBoard's size)",
    describe=describe,
    settings=SciworldConfig,
    expert=expert_plan,
    evaluation=Evaluation(
        "ScienceWorld tasks with the memory tools: SR and the environment's score per topic, steps, TC",
        "sciworld.limit",
    ),
)

SCIWORLD = register_suite(SUITE)

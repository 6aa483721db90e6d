"""The text-game seam: what an environment adapter gives the game episode, and the suite that names a benchmark.

A text game (ALFWorld, SciWorld, PDDL, BabyAI) is played the same way whatever the environment: the first
observation carries the goal, the agent acts with ``<answer>COMMAND</answer>`` and may call the memory tools between
commands, and each command's result comes back with the actions that are valid now
(:class:`agemem.tasks.games.GameEpisode`). What differs is behind two small protocols:

* :class:`TextGame`: one episode of the environment (``reset``, ``step``, ``close``), each returning a
  :class:`GameState`: the observation, the valid actions, won / over, the progress towards the goal in [0, 1] and
  the environment's own score where it has one;
* :class:`GameSuite`: a benchmark: its name (the config section, ``data.source`` and ``agemem eval NAME``), its
  task types, its headline metric (SR or PR), the first paragraph of the system prompt, how the split is found
  (``discover``) and how a game is opened (``open``).

A new game benchmark is one module: an adapter, its config section (a :class:`GameConfig` subclass, named by
:attr:`GameSuite.settings`) and a :class:`GameSuite`, registered with :func:`agemem.tasks.games.register_suite`.
Every root config that plays tasks then holds the section as ``<name>``
(:func:`agemem.tasks.config.with_task_sections`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agemem.core.configlib import ConfigError

if TYPE_CHECKING:
    from agemem.tasks.base import Evaluation
    from agemem.tasks.stream import StreamSpec


class NoPlanError(RuntimeError):
    """A suite's expert has no plan for a game: the goal cannot be reached, or no plan was found within the expert's
    budget (:attr:`GameSuite.expert` raises it; callers skip and list the game). A ``RuntimeError``, as the experts
    raised before it had a type."""


@dataclass
class GameConfig:
    """What every text game shares (ALFWorld, SciWorld, PDDL, BabyAI: :mod:`agemem.tasks.games`): the episode's
    budget, the reply budget per step, the debrief and what the agent is shown. Each game's section extends it."""

    limit: int = 0
    """play the first N games of the split (round-robin over the task types: a prefix is balanced); 0 = all."""
    task_types: list[str] = field(default_factory=list)
    """play only the games of these task types (e.g. [blocksworld] for PDDL); empty = all. Applied before limit."""
    max_env_steps: int = 50
    """environment steps per game (commands sent, invalid ones and replies without a command included)."""
    max_replies_per_step: int = 3
    """agent replies per environment step: memory-tool calls and format errors take a reply; when they are spent
    without a command, the step passes with no action."""
    debrief_replies: int = 2
    """agent replies after a game ends (told whether it won), to store what worked; 0 = none. Only when
    Add_memory is offered."""
    show_admissible: bool = True
    """list the valid actions after every observation, as the game provides them."""
    max_live_games: int = 0
    """games an evaluation plays side by side at most (0: eval.chunk_size); memory is shared as within a chunk."""

    def validate(self) -> None:
        if self.limit < 0 or self.debrief_replies < 0 or self.max_live_games < 0:
            raise ConfigError(
                f"limit={self.limit}, debrief_replies={self.debrief_replies} and max_live_games={self.max_live_games} "
                "must be >= 0"
            )
        if self.max_env_steps < 1 or self.max_replies_per_step < 1:
            raise ConfigError(
                f"max_env_steps={self.max_env_steps} and max_replies_per_step={self.max_replies_per_step} must be >= 1"
            )


@dataclass
class GameState:
    """What the environment says after ``reset`` or a ``step``."""

    observation: str
    """what the game says, as the agent reads it."""
    admissible: list[str]
    """the actions to show the agent now (empty: the game lists none)."""
    won: bool
    """the goal is reached (the episode ends)."""
    progress: float = 0.0
    """how far the goal is reached now, in [0, 1] (1 when won): the share of goal conditions met (PDDL), the share
    of the score still to gain at reset that was gained (SciWorld), the share of the mission's milestones (BabyAI),
    else 0 until won. The episode's progress rate (AgentBoard's) starts at 0 at reset, whatever this says then, and
    keeps the best value after an accepted command: a game that is never acted on scores 0."""
    over: bool = False
    """the episode ended without the goal (e.g. SciWorld's failure states); ``won`` ends it too."""
    score: float | None = None
    """the environment's own score where it has one (SciWorld: -100..100), else None."""
    valid: bool = True
    """the last command was understood and acted on (False: it changed nothing and the observation says why)."""
    goal: str = ""
    """the task sentence (set at ``reset``; empty: the first observation is the task)."""


class TextGame(Protocol):
    """One episode of a text environment. ``step`` is only called after ``reset``; ``close`` frees the engine."""

    def reset(self) -> GameState: ...

    def step(self, command: str) -> GameState: ...

    def close(self) -> None: ...


class GameRef(Protocol):
    """A game of a split: its id, its task type, and ``source``: what :attr:`GameSuite.open` needs to play it
    (a file, ``task:variation``, ``level:seed``), as a string so that a task record can carry it."""

    @property
    def id(self) -> str: ...

    @property
    def task_type(self) -> str: ...

    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class GameItem:
    """A game of a split (the :class:`GameRef` of the suites that need nothing more)."""

    id: str
    task_type: str
    source: str
    """what the suite's ``open`` plays, e.g. ``BabyAI-GoToLocal-v0:3`` or ``blocksworld/p05.pddl``."""


@dataclass(frozen=True)
class GameSuite:
    """A text-game benchmark: everything :mod:`agemem.tasks.games` (training) and :mod:`agemem.eval.games`
    (``agemem eval NAME``) need besides the episode itself."""

    name: str
    """the registry key: ``data.source``, the config section (``<name>.*``), ``agemem eval <name>`` and the
    long-term memory scope of an evaluation run."""
    title: str
    """the benchmark's name in tables and plots (``SciWorld``)."""
    world: str
    """the first paragraph of the system prompt: what the game is and how it is won (the step budget and the
    memory are added after it)."""
    example_command: str
    """a command shown in the reply format (``<answer>go to countertop 1</answer>``)."""
    task_types: tuple[str, ...]
    """the split's task types, in table order (a game's ``task_type`` is one of them)."""
    discover: Callable[[GameConfig], Sequence[GameRef]]
    """every game of the configured split, ordered round-robin over the task types (a prefix is balanced); a
    missing package or data folder raises a :class:`~agemem.core.configlib.ConfigError` that says how to fix it."""
    open: Callable[[GameRef, GameConfig], TextGame]
    """one episode of a game, not yet reset."""
    reopen: Callable[[str, str, str], GameRef] = GameItem
    """``(id, task_type, source) -> game``: a game back from a task record's metadata."""
    task_labels: Mapping[str, str] = field(default_factory=dict)
    """short column names of the task types (default: the type itself)."""
    headline: Literal["SR", "PR"] = "SR"
    """the paper's metric for this benchmark: success rate, or progress rate (PDDL)."""
    strict_admissible: bool = True
    """``GameState.admissible`` is every command the game accepts now: one outside it is refused without a step
    of the environment (ALFWorld, BabyAI). False: the list is guidance (templates, say) and the game itself
    decides, through ``GameState.valid`` (SciWorld)."""
    has_progress: bool = False
    """``GameState.progress`` moves before the game is won (PDDL's goal conditions, SciWorld's score): the table
    shows PR beside SR."""
    has_score: bool = False
    """the environment reports its own score (``GameState.score``; SciWorld): the table shows its mean."""
    split_note: str = ""
    """one line on what the split is (shown in ``results.json`` as ``split``): e.g. ``AgentBoard's 112 episodes``."""
    describe: Callable[[GameConfig], dict[str, Any]] = lambda settings: {}
    """what identifies the split in a run's identity (a resume with another split is refused)."""
    evaluation: Evaluation | None = None
    """how ``agemem eval <name>`` offers the suite (its help, ``--limit`` key and flags); None: training only."""
    stream: StreamSpec | None = None
    """how ``agemem eval stream --task <name>`` streams its games; None: it does not."""
    settings: type[GameConfig] = GameConfig
    """the class of the suite's config section: every root that plays tasks holds one as ``<name>``, built from its
    defaults, the YAML's ``<name>:`` mapping and ``<name>.key=value`` overrides."""
    expert: Callable[[GameRef, GameConfig], list[str]] | None = None
    """a solution from the start state (the gold path, a planner's plan, the bot's actions): the commands that win
    the game when sent in order. Scripted agents and tests play it."""

    def label(self, task_type: str) -> str:
        return self.task_labels.get(task_type, task_type)


def round_robin(groups: Mapping[str, Sequence[Any]], order: Sequence[str]) -> list[Any]:
    """The items of ``groups`` taken one per group in ``order`` in turn: any prefix covers the groups as evenly as
    its length allows (what ``--limit`` keeps)."""
    queues = [list(groups.get(key, ())) for key in order]
    items: list[Any] = []
    while any(queues):
        items.extend(queue.pop(0) for queue in queues if queue)
    return items


def installed_version(package: str) -> str:
    """The installed version of ``package`` (``missing`` when it is not): part of a split's identity where another
    version plays the same game differently."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "missing"

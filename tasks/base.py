"""The task seam: what a task is to the trainer and the rollout CLI, and the registry that names them.

A task registers one :class:`TaskSpec` under its name (``register_task``); ``data.source`` picks it
(:func:`task_for_source`: a registered name, or ``<name>:<location>`` for a file, folder or hub id of its data,
e.g. ``hotpotqa:/data/hotpot_dev.json``).
A spec says

* how its items load (:meth:`TaskSpec.load`, from the whole config: ``data.*``, its own section ``<name>.*``);
* the class of its own config section, if it has one (``settings``);
* what the run needs set up for it (:meth:`TaskSpec.configure`: e.g. the ALFWorld system prompt);
* what each stage shows (:meth:`TaskSpec.stages`) and how an episode runs (:meth:`TaskSpec.episodes`: a factory
  the rollout driver calls with the shared :class:`~agemem.rollouts.episode.EpisodeSetup`);
* whether Stage 2 draws distractors (``uses_distractors``), and how a finished trajectory is scored
  (:meth:`TaskSpec.scorer`);
* how ``agemem eval <name>`` offers it (``evaluation``: an :class:`Evaluation`, or None for a training-only task),
  and how ``agemem eval stream --task <name>`` streams it (``stream``: a :class:`agemem.tasks.stream.StreamSpec`).

A new environment is one module with one ``register_task(...)`` (or ``register_suite(...)``) call, imported by
``agemem.tasks`` (or by its user): the training task, ``data.source=<name>`` and the ``agemem eval`` command all
come from that one registration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from agemem.core.configlib import ConfigError

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.rewards.base import TrajectoryScorer
    from agemem.rollouts.config import RolloutConfig
    from agemem.rollouts.driver import EpisodeFactory
    from agemem.rollouts.episode import Stages
    from agemem.rollouts.records import Task
    from agemem.tasks.stream import StreamSpec


@dataclass
class SyntheticConfig:
    num_tasks: int = 64
    """tasks generated."""
    seed: int = 0
    """generator seed: the same seed gives the same tasks."""
    entities_per_task: int = 3
    """invented people per task, one Stage-1 paragraph each."""
    attributes_per_entity: int = 3
    """facts stated about each person (the question asks one of them)."""
    distractors_per_task: int = 5
    """look-alike distractor texts each task carries (distractors.generator=task plays them)."""
    revisions: int = 0
    """stated facts that a later Stage-1 message changes ("... has moved to Lima."); the question then asks the
    current value of one of them, so a stale memory must be updated or deleted. 0 = facts never change."""
    distractor_sentences: int = 1
    """look-alike sentences in each distractor text (one Stage-2 message): more make a long Stage 2."""
    revised_question_share: float = 1.0
    """with revisions: the share of questions that ask a changed fact; the rest ask an unchanged one (any person's),
    so storing only the change fails them and a deleted or overwritten entry loses its other facts."""
    restate_unchanged: bool = False
    """with revisions: a change message also restates the person's unchanged facts, so overwriting the stale entry
    with the message as it came (one Update_memory, a copy like any Add_memory) loses nothing."""

    def validate(self) -> None:
        if self.num_tasks < 1:
            raise ConfigError(f"num_tasks={self.num_tasks} must be >= 1")
        if not 0.0 <= self.revised_question_share <= 1.0:
            raise ConfigError(
                f"revised_question_share={self.revised_question_share} must be in [0, 1] "
                "(1: every question asks a changed fact)"
            )
        if self.restate_unchanged and not self.revisions:
            raise ConfigError(
                "restate_unchanged=true restates a person's unchanged facts in the message that changes one, but "
                "revisions=0 changes nothing: set revisions >= 1 or restate_unchanged=false"
            )


@dataclass
class DataConfig:
    source: str = "bundled:hotpotqa"
    """a registered task (hotpotqa, synthetic, alfworld, ...: agemem.tasks.task_names()), or <task>:<location> for a
    file, `datasets` directory or hub id of that task's data (hotpotqa:/data/dev.json; a location whose name says
    hotpot may drop the prefix). Checked against the registry when the run loads its tasks (task_for_source)."""
    split: str = "validation"
    """split for `datasets` sources."""
    hub_config: str = "distractor"
    """hub dataset config (HotpotQA: distractor or fullwiki)."""
    limit: int = 0
    """use the first N tasks; 0 = all."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    """settings of source=synthetic."""

    def validate(self) -> None:
        if self.limit < 0:
            raise ConfigError(f"limit={self.limit} must be >= 0 (0 = all tasks)")


class RunConfig(Protocol):
    """What a task reads of a command's config: ``data``, the shared sections and its own section ``<name>`` (the
    roots that play tasks extend :class:`agemem.tasks.config.TaskRunConfig`)."""

    data: DataConfig


@dataclass(frozen=True)
class Option:
    """A command-line flag of one ``agemem eval`` command, set as a dotted config override."""

    flag: str
    key: str
    """the dotted config key the flag sets."""
    help: str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    listed: bool = False
    """the flag takes comma-separated values for a list key (``--conversations conv-26,conv-30``)."""


@dataclass(frozen=True)
class Evaluation:
    """How ``agemem eval <name>`` offers an environment: the command's help, its flags and its table's names."""

    help: str
    """the command's one-line help."""
    limit_key: str
    """the config key ``--limit N`` sets (``data.limit``, ``alfworld.limit``, ...)."""
    options: tuple[Option, ...] = ()
    """the command's own flags besides the shared ones (``--model``, ``--variant``, ``--limit``, ``--out``)."""
    title: str = ""
    """the benchmark's name in tables and plots (default: a game suite's title, else the environment's name)."""
    harness: str = ""
    """``"module:function"`` building the environment's own :class:`agemem.eval.runner.Benchmark` from its
    registration (``function(task) -> Benchmark``, imported when the command first runs; a string, so the
    environment module needs no import of the evaluation layer); empty: the QA or text-game harness."""


class TaskSpec(Protocol):
    """One kind of task: its items, its episode, what each stage shows, and its reward."""

    name: str
    """the registry key, and the ``data.source`` that picks the task."""
    uses_distractors: bool
    """Stage 2 shows distractors made by ``distractors.*`` (False: an empty Stage 2)."""
    evaluation: Evaluation | None
    """``agemem eval <name>``'s help and flags; None: a training task only."""
    stream: StreamSpec | None
    """the items ``agemem eval stream --task <name>`` streams; None: it does not stream."""
    settings: type | None
    """the dataclass of the task's own config section (``<name>.*``, e.g. a game's step budget and split), which
    every root that plays tasks holds (:func:`agemem.tasks.config.with_task_sections`); None: it needs none."""

    def accepts(self, source: str) -> bool:
        """Whether ``data.source`` (other than a registered name) means this task, e.g. a HotpotQA file."""
        ...

    def configure(self, config: RunConfig) -> RunConfig:
        """``config`` as the task's runs need it (return it unchanged when nothing is needed)."""
        ...

    def load(self, config: RunConfig) -> list[Task]:
        """Every item of the configured split, in a fixed order (``data.limit`` is applied by the caller)."""
        ...

    def stages(self, task: Task, distractors: list[str], rollout: RolloutConfig) -> Stages:
        """What Stage 1, 2 and 3 show for ``task``."""
        ...

    def episodes(self, config: RunConfig) -> EpisodeFactory:
        """How one rollout of a task plays: ``(task, distractors, env, setup, rollout_index) -> episode run``."""
        ...

    def scorer(self, config: RunConfig, encoder: Encoder | None) -> TrajectoryScorer:
        """Fills ``trajectory.reward`` with the composite breakdown (``total`` is the reward GRPO uses)."""
        ...


_REGISTRY: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec, *, replace: bool = False) -> TaskSpec:
    """Add ``spec`` under ``spec.name``; a second task of the same name is an error unless ``replace``."""
    if spec.name in _REGISTRY and not replace and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"a task named {spec.name!r} is registered already; pass replace=True to replace it")
    _REGISTRY[spec.name] = spec
    return spec


def unregister_task(name: str) -> None:
    _REGISTRY.pop(name, None)


def task_names() -> list[str]:
    """The registered tasks, sorted."""
    return sorted(_REGISTRY)


def evaluations() -> dict[str, Evaluation]:
    """Every registered task that ``agemem eval`` offers, by name (sorted): the built-in evaluation commands."""
    found = {name: getattr(_REGISTRY[name], "evaluation", None) for name in task_names()}
    return {name: evaluation for name, evaluation in found.items() if evaluation is not None}


def streams() -> dict[str, StreamSpec]:
    """Every registered task that ``agemem eval stream --task`` can stream, by name (sorted)."""
    found = {name: getattr(_REGISTRY[name], "stream", None) for name in task_names()}
    return {name: spec for name, spec in found.items() if spec is not None}


def stream_of(name: str) -> StreamSpec:
    """The stream of task ``name``; an error names the tasks that stream."""
    found = streams()
    if name not in found:
        raise ConfigError(
            f"stream.task={name!r} is no stream; choose one of {', '.join(map(repr, found))}, or register a task "
            "with a stream (agemem.tasks.stream.StreamSpec)"
        )
    return found[name]


def task_sections() -> dict[str, type]:
    """The config section of every registered task that declares one: ``{task name: its settings class}``."""
    found = {name: getattr(_REGISTRY[name], "settings", None) for name in task_names()}
    return {name: settings for name, settings in found.items() if settings is not None}


def get_task(name: str) -> TaskSpec:
    """The task registered as ``name``; an error names the known tasks and how to add one."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"no task named {name!r}; known tasks: {', '.join(task_names())}. To fix: pick one of them, or register "
            "yours with agemem.tasks.register_task(spec) in a plugin module (--plugin MODULE, or plugins: [MODULE])"
        ) from None


def source_location(source: str) -> tuple[str, str]:
    """``data.source`` as ``(task name, location)``: ``hotpotqa:/data/dev.json`` → ``("hotpotqa", "/data/dev.json")``
    when the part before the first colon is a registered task; else ``("", source)``."""
    name, colon, location = source.partition(":")
    return (name, location) if colon and location and name in _REGISTRY else ("", source)


def _owner(source: str) -> TaskSpec | None:
    """The task ``data.source`` names: a registered name; ``<task>:<location>``; else the task whose
    :meth:`TaskSpec.accepts` claims it (narrowly: HotpotQA claims ``bundled:hotpotqa`` and locations named hotpot)."""
    name = source if source in _REGISTRY else source_location(source)[0]
    if name:
        return _REGISTRY[name]
    return next((_REGISTRY[name] for name in task_names() if _REGISTRY[name].accepts(source)), None)


def source_of(task_name: str, source: str) -> str:
    """``source`` given to task ``task_name`` (``agemem eval hotpotqa --data dev.json``): kept when it names a task,
    else that task's location (``hotpotqa:dev.json``)."""
    return source if _owner(source) is not None else f"{task_name}:{source}"


def task_for_source(source: str) -> TaskSpec:
    """The task ``data.source`` names (a registered name, ``<task>:<location>`` for a file, folder or hub id of that
    task's data, or a source a task claims); an error shows the forms."""
    owner = _owner(source)
    if owner is not None:
        return owner
    raise ConfigError(
        f"data.source={source!r} names no task; known tasks: {', '.join(task_names())}. A file, folder or hub id "
        "is written <task>:<location>, e.g. hotpotqa:/data/dev.json or hotpotqa:hotpotqa/hotpot_qa. Fix "
        "data.source, or register a task with agemem.tasks.register_task(spec)"
    )


def load_tasks(config: RunConfig, *, apply_limit: bool = True) -> list[Task]:
    """The items of the task ``data.source`` names (the first ``data.limit`` unless ``apply_limit=False``)."""
    tasks = task_for_source(config.data.source).load(config)
    return tasks[: config.data.limit] if config.data.limit and apply_limit else tasks


def load_task_pool(config: RunConfig) -> tuple[list[Task], list[Task]]:
    """``(tasks, pool)``: the first ``data.limit`` items to play and every item (the corpus distractor pool)."""
    pool = load_tasks(config, apply_limit=False)
    return (pool[: config.data.limit] if config.data.limit else pool), pool


def no_distractors(tasks: Sequence[Task]) -> dict[str, list[str]]:
    """An empty Stage 2 for every task (tasks with ``uses_distractors = False``)."""
    return {task.id: [] for task in tasks}

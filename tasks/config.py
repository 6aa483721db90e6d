"""The shared root of every command (:class:`AgentConfig`, with the ``logging`` section), the root of `agemem rollout`,
and the tasks' own sections, composed from the registrations.

:class:`AgentConfig` holds the memory environment, the policy and how it samples, the tasks, the three-stage
episode and its reward: what playing an episode needs. Each section is defined beside the code that reads it
(``env``: :mod:`agemem.core.config`; ``policy``, ``sampling``, ``engine``, ``distractors``, ``rollout``:
:mod:`agemem.rollouts.config`; ``reward``: :mod:`agemem.rewards.config`; ``data``: :mod:`agemem.tasks.base`), and
each command's root extends it with the sections of its own component (:mod:`agemem.entrypoints.roots`).

A task whose episodes need settings beyond ``data`` (a text game: its step budget, its split) declares the class of
its section where it registers (``settings`` on its :class:`~agemem.tasks.base.TaskSpec`; a game suite's
:attr:`~agemem.tasks.textgame.GameSuite.settings`), in its own module. Every root that plays tasks (rollout, train,
eval, stream, learn) extends :class:`TaskRunConfig`, and :func:`with_task_sections` gives it a field per registered
task section, so a new environment, built in or from a plugin, is one module and no edit here.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from agemem.core.config import EnvConfig
from agemem.core.configlib import ConfigError
from agemem.rewards.config import RewardConfig
from agemem.rollouts.config import DistractorConfig, EngineConfig, PolicyConfig, RolloutConfig, SamplingConfig
from agemem.tasks.base import DataConfig, task_sections

Root = TypeVar("Root", bound=type)


@dataclass
class LoggingConfig:
    wandb: Literal["disabled", "online", "offline"] = "disabled"
    """Weights & Biases logging (offline writes a run directory to sync later)."""
    wandb_project: str = "agemem"
    """wandb project."""
    wandb_run_name: str = ""
    """wandb run name; empty: the output directory's name."""
    tensorboard: bool = False
    """also write tensorboard event files under output_dir/tensorboard (needs the tensorboard package)."""
    trajectory_samples: int = 4
    """trajectories written to output_dir/trajectories.jsonl per step (per rank 0's batch); 0 = none."""
    progress: bool = True
    """progress bars for rollouts and steps."""
    console_every: int = 1
    """agemem train prints one line of a step's metrics (reward, task score, KL, loss, throughput, time split,
    ETA) every this many steps; 0 = none."""

    def validate(self) -> None:
        if self.trajectory_samples < 0:
            raise ConfigError(f"trajectory_samples={self.trajectory_samples} must be >= 0")
        if self.console_every < 0:
            raise ConfigError(f"console_every={self.console_every} must be >= 0 (0 prints no step lines)")


@dataclass
class AgentConfig:
    """The sections every command shares: what playing an episode needs."""

    output_dir: str = "runs/agemem"
    """run directory: metrics.jsonl, trajectories.jsonl, checkpoints/ (agemem train), rollouts (agemem rollout)."""
    seed: int = 0
    """run seed: task order, sampling seeds per step, dropout."""
    plugins: list[str] = field(default_factory=list)
    """modules imported before the config is read, each registering environments, tools, memory systems or reward
    terms (agemem.core.plugins; `--plugin M` adds one); a run's config.json keeps them for resume and evaluation."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """the memory environment: LTM, STM, tools, encoder, summarizer."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """the policy model and its tokenizer."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """sampling settings applied to every policy generation call."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """the generation engine."""
    data: DataConfig = field(default_factory=DataConfig)
    """where tasks come from."""
    distractors: DistractorConfig = field(default_factory=DistractorConfig)
    """Stage-2 distractor turns."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """the three-stage episode and the batched driver."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """the composite reward (paper Appendix A.2)."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics, wandb, tensorboard, trajectory samples, progress bars."""

    def validate(self) -> None:
        # the cross-section checks of a root, each a named function; a root that extends this one calls
        # super().validate() and adds its own (roots combine)
        introspection_fits_the_store(self)


def introspection_fits_the_store(config: AgentConfig) -> None:
    """``rollout.introspective_top_k <= env.ltm.max_top_k``: the introspective retrieval asks the store for that many
    entries, and the store refuses more than its maximum."""
    if config.rollout.introspective_top_k > config.env.ltm.max_top_k:
        raise ConfigError(
            f"rollout.introspective_top_k={config.rollout.introspective_top_k} exceeds "
            f"env.ltm.max_top_k={config.env.ltm.max_top_k}; lower the first or raise the second"
        )


@dataclass
class TaskRunConfig(AgentConfig):
    """`agemem rollout`'s root: the shared sections; each registered task's own section is added by
    :func:`with_task_sections` (``alfworld``, ``sciworld``, ``pddl``, ``babyai``, a plugin's)."""

    @classmethod
    def composed(cls) -> type[TaskRunConfig]:
        """This root with the registered tasks' sections: what :func:`~agemem.core.configlib.load_config` builds."""
        return with_task_sections(cls)


def with_task_sections(root: Root) -> Root:
    """``root`` with a field per registered task section (``<task name>: <its settings class>``, default: the
    class's defaults): the class the commands load. A root that plays no tasks comes back unchanged.

    The composed class is cached per root and set of sections, keeps ``root``'s name, and pickles by value. A
    section whose name is one of ``root``'s own keys is refused: it would be shadowed."""
    if not (isinstance(root, type) and issubclass(root, TaskRunConfig)):
        return root
    static = vars(root).get("__task_sections__", (root,))[0]  # composing a composed root starts from its base
    return _composed(static, tuple(sorted(task_sections().items())))


@functools.cache
def _composed(root: type, sections: tuple[tuple[str, type], ...]) -> type:
    own = typing.get_type_hints(root)
    for name, settings in sections:
        declared = own.get(name)
        if declared is not None and not (isinstance(declared, type) and issubclass(declared, settings)):
            raise ConfigError(
                f"the task {name!r} has a config section of its own ({settings.__name__}), but {root.__name__} "
                f"already has a key {name!r}; rename the task (its section would shadow the root's)"
            )
    missing = [(name, settings) for name, settings in sections if name not in own]  # a root may declare it itself
    if not missing:
        return root
    fields = [(name, settings, dataclasses.field(default_factory=settings)) for name, settings in missing]
    composed = dataclasses.make_dataclass(root.__name__, fields, bases=(root,))
    composed.__module__ = root.__module__
    composed.__qualname__ = root.__qualname__
    composed.__doc__ = root.__doc__
    composed.__task_sections__ = (root, sections)  # type: ignore[attr-defined]
    composed.__reduce__ = _reduce  # type: ignore[attr-defined]
    return composed


def _reduce(config: Any) -> tuple[Any, ...]:
    # a composed class is no attribute of its module, so pickle (and deepcopy) rebuild it from its recipe
    root, sections = type(config).__task_sections__
    return (_blank, (root, sections), dict(vars(config)))


def _blank(root: type, sections: tuple[tuple[str, type], ...]) -> Any:
    composed = _composed(root, sections)
    return composed.__new__(composed)

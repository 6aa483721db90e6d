"""One config root per command, and what a YAML file (or a run's ``config.json``) may hold.

Each command reads its own root: the shared sections (:class:`agemem.tasks.config.AgentConfig`) plus the sections
of the components it runs, each defined beside its component:

| command | root |
|---|---|
| ``demo`` | :class:`agemem.entrypoints.demo.DemoRunConfig` |
| ``rollout``, ``chat`` | :class:`agemem.tasks.config.TaskRunConfig` |
| ``train``, ``plan``, ``export`` | :class:`agemem.train.config.TrainRunConfig` |
| ``eval hotpotqa``, ``eval alfworld`` | :class:`agemem.eval.config.EvalRunConfig` |
| ``eval stream`` | :class:`agemem.eval.stream.config.StreamRunConfig` |
| ``learn`` | :class:`agemem.recipes.learn.LearnRunConfig` |

A root that plays tasks also holds each registered task's own section (``alfworld``, ``pddl``, a plugin's game),
added when the command loads it (:func:`agemem.tasks.config.with_task_sections`): the section is declared where the
task registers, so a new environment edits nothing here.

A file may hold the sections of several commands (``configs/learn_cpu.yaml`` drives ``learn``, ``train`` and
``export``): every section it names is validated, against :class:`AgeMemConfig`, the union of all roots, so a typo
is caught by any command ("unknown config key 'max_step'; did you mean 'max_steps'?"), and each command keeps the
sections of its own root.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agemem.core.configlib import ConfigError, from_dict, parse_override, read_yaml, set_dotted, to_dict
from agemem.core.plugins import load_plugins, plugins_of
from agemem.entrypoints.demo import DemoRunConfig
from agemem.eval.config import EvalRunConfig
from agemem.eval.stream.config import StreamRunConfig
from agemem.recipes.learn import LearnRunConfig
from agemem.tasks.config import AgentConfig, TaskRunConfig, with_task_sections
from agemem.train.config import TrainRunConfig

Root = TypeVar("Root", bound=AgentConfig)


def check_union(*roots: type) -> None:
    """Every config key of ``roots`` is declared by one class: a key two roots declare apart (two ``eval`` sections,
    say) would be settled silently by a union's method resolution order, so it is a :class:`TypeError` here."""
    owners: dict[str, type] = {}
    for root in roots:
        for field in dataclasses.fields(root):
            owner = next(base for base in root.__mro__ if field.name in vars(base).get("__annotations__", {}))
            if owners.setdefault(field.name, owner) is not owner:
                raise TypeError(
                    f"config key {field.name!r} is declared by both {owners[field.name].__qualname__} and "
                    f"{owner.__qualname__}; rename one, or declare it once in a root both extend"
                )


check_union(LearnRunConfig, StreamRunConfig, DemoRunConfig)


@dataclass
class AgeMemConfig(LearnRunConfig, StreamRunConfig, DemoRunConfig):
    """Every section of every command: what a config file may hold (`agemem config` prints it). Its roots declare
    each key once (:func:`check_union`), so no section of one command shadows another's."""


COMMAND_ROOTS: dict[str, type[AgentConfig]] = {
    "demo": DemoRunConfig,
    "rollout": TaskRunConfig,
    "chat": TaskRunConfig,
    "train": TrainRunConfig,
    "plan": TrainRunConfig,
    "export": TrainRunConfig,
    "eval": EvalRunConfig,
    "stream": StreamRunConfig,
    "learn": LearnRunConfig,
    "config": AgeMemConfig,
}
"""the root each command reads."""


def project(config: AgentConfig, root: type[Root]) -> Root:
    """The sections of ``config`` that ``root`` has (validated again as that root)."""
    names = {f.name for f in dataclasses.fields(root)}
    return from_dict(root, {key: value for key, value in to_dict(config).items() if key in names})


def root_of(command: str) -> type[AgentConfig]:
    """The class ``command`` loads: its root, with the registered tasks' sections where it plays tasks."""
    if command not in COMMAND_ROOTS:
        raise ConfigError(f"no config root for command {command!r}; known: {', '.join(COMMAND_ROOTS)}")
    return with_task_sections(COMMAND_ROOTS[command])


def load_command_config(command: str, path: str | Path | None, overrides: list[str]) -> Any:
    """``command``'s root from its defaults, ``path`` and ``overrides``; every section named anywhere is validated,
    after the ``plugins`` it names are imported (they register what the values may name)."""
    tree = read_yaml(path) if path is not None else {}
    for item in overrides:
        set_dotted(tree, *parse_override(item))
    return config_from_tree(tree, command)


def config_from_tree(tree: Mapping[str, Any], command: str) -> Any:
    """``command``'s root from a raw tree (a YAML file's, a run's ``config.json``), which may hold other commands'
    sections; its ``plugins`` are imported first."""
    load_plugins(plugins_of(tree))
    return project(from_dict(with_task_sections(AgeMemConfig), dict(tree)), root_of(command))


RUN_ENVIRONMENT = ("env", "sampling", "rollout", "distractors", "reward")
"""the sections of a run's ``config.json`` that describe the environment its policy was trained in: the default
when its checkpoint is evaluated without ``--config`` (device, dtype, engine and the benchmark's own sections
stay the evaluation's)."""


def run_environment(specs: list[str]) -> tuple[Path, dict[str, Any]] | None:
    """``(run dir, environment sections)`` of the training run behind ``specs`` (``--model`` values), if any.

    Several models from runs with different environments are ambiguous: a :class:`ConfigError` asks for
    ``--config``. Models that are no run (a base model, an endpoint) take the run's environment too, so a
    base-vs-trained comparison plays both in the same one.
    """
    from agemem.eval.models import training_layout

    found: dict[Path, dict[str, Any]] = {}
    for spec in specs:
        path = Path(spec).expanduser()
        if not path.is_dir():
            continue
        _, run_dir, _ = training_layout(path)
        if run_dir is not None and (run_dir / "config.json").is_file():
            tree = json.loads((run_dir / "config.json").read_text())
            found[run_dir] = {section: tree[section] for section in RUN_ENVIRONMENT if section in tree}
    distinct = {json.dumps(sections, sort_keys=True) for sections in found.values()}
    if len(distinct) > 1:
        raise ConfigError(
            f"the models come from runs trained in different environments ({', '.join(map(str, found))}); "
            "pass --config with the environment to evaluate them in"
        )
    return next(iter(found.items()), None)


def load_eval_config(path: str | Path | None, overrides: list[str], models: list[str], command: str = "eval") -> Any:
    """An evaluation's config (``command``: ``eval`` or ``stream``): ``--config`` when given; else the environment of
    the run being evaluated (:func:`run_environment`) over the defaults; then ``overrides``."""
    found = run_environment(models) if path is None else None
    if found is None:
        return load_command_config(command, path, overrides)
    tree: dict[str, Any] = dict(found[1])
    for item in overrides:
        set_dotted(tree, *parse_override(item))
    return config_from_tree(tree, command)


def load_resume_config(path: str | Path | None, overrides: list[str]) -> TrainRunConfig:
    """``agemem train --resume`` without ``--config``: the run's own ``config.json`` (all of it), then overrides."""
    config = load_command_config("train", path, overrides)
    saved = Path(config.output_dir) / "config.json"
    if path is not None or not saved.is_file():
        return config
    tree = json.loads(saved.read_text())
    for item in overrides:
        set_dotted(tree, *parse_override(item))
    return config_from_tree(tree, "train")

"""Which config root a YAML file (or a run's ``config.json``) was written for.

Each command has its own root: ``AgeMemConfig`` for train / rollout / eval / export / chat / plan / demo, and
a recipe's own root (``LearnRunConfig``: the training config plus the recipe's ``learn`` section) for its
command. A file written for a recipe still drives the plain commands (``agemem train --config
configs/learn_cpu.yaml``, exporting a recipe's run): the recipe's section is recognised, validated and left
to the recipe, so that every shipped config loads everywhere it did before.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agemem.core.config import AgeMemConfig
from agemem.core.configlib import from_dict, load_config, read_yaml
from agemem.recipes.learn import LearnRunConfig

RECIPE_ROOTS: dict[str, type[AgeMemConfig]] = {"learn": LearnRunConfig}
"""a recipe's section name -> the root that owns it."""


def root_for(tree: Mapping[str, Any]) -> type[AgeMemConfig]:
    """The root whose sections ``tree`` uses: a recipe's root when it has that recipe's section."""
    for section, root in RECIPE_ROOTS.items():
        if section in tree:
            return root
    return AgeMemConfig


def load_command_config(path: str | Path | None, overrides: list[str]) -> AgeMemConfig:
    """``load_config`` with the root chosen by the file's (and the overrides') sections."""
    sections = set(read_yaml(path)) if path is not None else set()
    sections |= {item.split("=", 1)[0].split(".", 1)[0] for item in overrides}
    return load_config(root_for(dict.fromkeys(sections)), path, overrides)


def config_from_tree(tree: Mapping[str, Any]) -> AgeMemConfig:
    """A config from a saved tree (a run's ``config.json``), with the root it was written for."""
    return from_dict(root_for(tree), dict(tree))


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
    import json

    from agemem.core.configlib import ConfigError
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


def load_eval_config(path: str | Path | None, overrides: list[str], models: list[str]) -> AgeMemConfig:
    """An evaluation's config: ``--config`` when given; else the environment of the run being evaluated
    (:func:`run_environment`) over the defaults; then ``overrides``."""
    from agemem.core.configlib import parse_override, set_dotted

    found = run_environment(models) if path is None else None
    if found is None:
        return load_command_config(path, overrides)
    tree: dict[str, Any] = dict(found[1])
    for item in overrides:
        set_dotted(tree, *parse_override(item))
    return from_dict(root_for(tree), tree)


def load_resume_config(path: str | Path | None, overrides: list[str]) -> AgeMemConfig:
    """``agemem train --resume`` without ``--config``: the run's own ``config.json`` (all of it), then overrides."""
    import json

    from agemem.core.configlib import parse_override, set_dotted

    config = load_command_config(path, overrides)
    saved = Path(config.output_dir) / "config.json"
    if path is not None or not saved.is_file():
        return config
    tree = json.loads(saved.read_text())
    for item in overrides:
        set_dotted(tree, *parse_override(item))
    return from_dict(root_for(tree), tree)

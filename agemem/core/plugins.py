"""Plugins: a user's modules that register environments, tools, memory systems or reward terms, without editing agemem.

A plugin is a module whose import registers what it brings (``agemem.tasks.register_task``,
``agemem.tasks.games.register_suite``, ``agemem.core.tools.register``, ``agemem.eval.benchmarks.register_benchmark``,
...). Two ways in, both before a command reads its config (the registries decide which config values and
subcommands exist):

* by name: ``--plugin my_pkg.tasks`` on any command, or ``plugins: [my_pkg.tasks]`` in a config file (a run's
  ``config.json`` keeps the list, so a resumed or evaluated run imports the same modules);
* installed: an entry point in one of :data:`ENTRY_POINT_GROUPS` in the plugin's ``pyproject.toml``
  (``[project.entry-points."agemem.environments"] trivia = "my_pkg.trivia"``), loaded by every ``agemem`` command.
  An entry point that names a function (``"my_pkg.trivia:register"``) is called once, with no arguments.

Nothing here runs at import time; :func:`load_plugins` and :func:`load_entry_points` load each module once.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from importlib import metadata
from types import ModuleType
from typing import Any

from agemem.core.configlib import CliText, ConfigError

ENTRY_POINT_GROUPS: dict[str, str] = {
    "agemem.environments": "tasks, text games and benchmarks (register_task, register_suite, register_benchmark)",
    "agemem.tools": "memory tools (agemem.core.tools.register)",
    "agemem.memory_systems": "memory-system baselines for `agemem eval --variant`",
    "agemem.reward_terms": "reward terms",
}
"""the entry-point groups agemem reads, and what a plugin in each registers."""

_LOADED: dict[str, Any] = {}


def load_plugins(modules: Iterable[str]) -> list[str]:
    """Import each module of ``modules`` (once); a module that cannot be imported is a :class:`ConfigError` that
    names it and the fix."""
    loaded = []
    for name in modules:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"plugins: {name!r} is not a module name; give dotted module names such as my_pkg.tasks")
        if name not in _LOADED:
            try:
                _LOADED[name] = importlib.import_module(name)
            except ImportError as err:
                raise ConfigError(
                    f"plugin {name!r} (--plugin or plugins:) cannot be imported ({type(err).__name__}: {err}); "
                    "install the package that provides it, or fix the module name"
                ) from err
        loaded.append(name)
    return loaded


def load_entry_points(groups: Iterable[str] = ENTRY_POINT_GROUPS) -> list[str]:
    """Load every installed entry point of ``groups`` (once): import its module, and call it when it names a
    function. A broken plugin is a :class:`ConfigError` naming its distribution, so the fix is clear."""
    loaded = []
    for group in groups:
        for entry in metadata.entry_points(group=group):
            key = f"{group}:{entry.name}={entry.value}"
            if key not in _LOADED:
                where = f"{entry.dist.name} {entry.dist.version}" if entry.dist is not None else "an installed package"
                try:
                    target = entry.load()
                    _LOADED[key] = target() if callable(target) and not isinstance(target, ModuleType) else target
                except Exception as err:
                    raise ConfigError(
                        f"the {group} plugin {entry.name!r} ({entry.value}, from {where}) failed to load "
                        f"({type(err).__name__}: {err}); fix or uninstall that package"
                    ) from err
            loaded.append(key)
    return loaded


def plugins_of(tree: Mapping[str, Any]) -> list[str]:
    """The ``plugins`` list of a raw config tree (a YAML file's mapping, a run's ``config.json``); checked."""
    value = tree.get("plugins", [])
    if isinstance(value, CliText):  # a `plugins=[a, b]` override, as typed
        value = value.as_yaml()
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ConfigError(f"plugins={value!r} must be a list of module names, e.g. plugins: [my_pkg.tasks]")
    return list(value)

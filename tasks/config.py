"""The root of `agemem rollout`, and the tasks' own sections, composed from the registrations.

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
from dataclasses import dataclass
from typing import Any, TypeVar

from agemem.core.config import AgentConfig
from agemem.core.configlib import ConfigError

Root = TypeVar("Root", bound=type)


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
    from agemem.tasks.base import task_sections

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

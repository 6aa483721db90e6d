"""Tasks: what an episode plays and how it is scored, by name (:mod:`agemem.tasks.base`).

Importing the package registers the built-in environments, each one module: ``hotpotqa``, ``synthetic``,
``locomo``, and the text games (:mod:`agemem.tasks.games`) ``alfworld``, ``sciworld``, ``pddl``, ``babyai`` and
``frozenlake``. Each
registration is a training task (``data.source=<name>``), its config section (``<name>.*``) if it declares one, and,
with its ``evaluation``, an ``agemem eval <name>`` command.
"""

from agemem.tasks import alfworld, babyai, frozenlake, hotpotqa, locomo, pddl, sciworld, synthetic  # noqa: F401  (each registers)
from agemem.tasks.base import (
    Evaluation,
    Option,
    TaskSpec,
    evaluations,
    get_task,
    load_task_pool,
    load_tasks,
    register_task,
    source_location,
    source_of,
    stream_of,
    streams,
    task_for_source,
    task_names,
    unregister_task,
)

__all__ = [
    "Evaluation",
    "Option",
    "TaskSpec",
    "evaluations",
    "get_task",
    "load_task_pool",
    "load_tasks",
    "register_task",
    "source_location",
    "source_of",
    "stream_of",
    "streams",
    "task_for_source",
    "task_names",
    "unregister_task",
]

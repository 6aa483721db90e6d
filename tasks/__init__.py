"""Tasks: what an episode plays and how it is scored, by name (:mod:`agemem.tasks.base`).

Importing the package registers the built-in tasks: ``hotpotqa``, ``synthetic``, ``alfworld``.
"""

from agemem.tasks import alfworld, hotpotqa, synthetic  # noqa: F401  (each registers its task)
from agemem.tasks.base import (
    TaskSpec,
    get_task,
    load_task_pool,
    load_tasks,
    register_task,
    task_for_source,
    task_names,
    unregister_task,
)

__all__ = [
    "TaskSpec",
    "get_task",
    "load_task_pool",
    "load_tasks",
    "register_task",
    "task_for_source",
    "task_names",
    "unregister_task",
]

"""The memory-system registry: which ``--variant`` names a memory-system baseline, and how to build it.

A memory system (:class:`agemem.eval.baselines.MemorySystem`) writes long-term memory with its own LLM calls from
the messages an episode shows, and its search results are shown before every agent step. Each registers a
:class:`MemorySystemSpec` here: its variant name, the name tables print, and a factory. The four of the paper
(Mem0, Mem0 with graph memory, A-Mem, LangMem) are registered below with factories in
:mod:`agemem.eval.baselines.systems`; a plugin registers its own with :func:`register_memory_system`
(``--plugin`` or the ``agemem.memory_systems`` entry point, :mod:`agemem.core.plugins`), and
``agemem eval --variant <name>`` plays it.

This module imports nothing of the harness: ``eval.config`` validates ``eval.variants`` against it, and a factory
given as ``"module:function"`` is imported only when a run builds that system.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TOOL_VARIANTS: tuple[str, ...] = ("agemem", "no_memory", "rag", "ltm_only", "full_context")
"""the variants of AgeMem's own memory (which tools the agent gets, what stays in its context): not memory
systems."""


@dataclass(frozen=True)
class MemorySystemSpec:
    """One memory-system baseline, as ``--variant <name>`` plays it."""

    name: str
    """the variant name (``eval.variants``, ``--variant``) and the folder its stores live in."""
    title: str
    """the method's name in comparison tables (``Mem0g``)."""
    build: str | Callable[..., Any]
    """``(llm: LLMTarget, config: EvalRunConfig, encoder: Encoder, folder: Path) -> MemorySystem``, or the
    ``"module:function"`` that holds it (imported when a run first builds the system)."""
    install: str = ""
    """what to install when its library is missing (shown in errors and ``docs/baselines.md``)."""

    def factory(self) -> Callable[..., Any]:
        if callable(self.build):
            return self.build
        module, _, function = self.build.partition(":")
        return getattr(importlib.import_module(module), function)


_SYSTEMS: dict[str, MemorySystemSpec] = {}


def register_memory_system(spec: MemorySystemSpec, *, replace: bool = False) -> MemorySystemSpec:
    """Make ``spec`` the variant ``spec.name``; a second, different one of the same name (or a tool variant's name)
    is refused unless ``replace``."""
    if spec.name in TOOL_VARIANTS:
        raise ValueError(f"{spec.name!r} is a tool variant of AgeMem; name the memory system otherwise")
    known = _SYSTEMS.get(spec.name)
    if known is not None and known != spec and not replace:
        raise ValueError(f"a memory system named {spec.name!r} is registered already; pass replace=True to swap it")
    _SYSTEMS[spec.name] = spec
    return spec


def unregister_memory_system(name: str) -> None:
    _SYSTEMS.pop(name, None)


def memory_system_names() -> tuple[str, ...]:
    """The registered memory systems, in registration order (the built-ins first)."""
    return tuple(_SYSTEMS)


def memory_system(name: str) -> MemorySystemSpec:
    if name not in _SYSTEMS:
        raise ValueError(f"{name!r} is not a memory-system variant; choose one of {', '.join(_SYSTEMS)}")
    return _SYSTEMS[name]


def eval_variants() -> tuple[str, ...]:
    """Every variant ``agemem eval`` can play: AgeMem's tool variants, then the memory systems."""
    return (*TOOL_VARIANTS, *memory_system_names())


SEED_ORDER: tuple[str, ...] = ("agemem", "no_memory", "rag", "ltm_only", "mem0", "mem0g", "amem", "langmem")
"""the built-in variants in the order they were added to the project, before ``full_context``."""


def seed_position(variant: str) -> int:
    """The number that seeds ``variant``'s sampling (:func:`agemem.eval.runner.chunk_seed`): its place in the order
    variants joined the project, so a variant added later never changes the samples of the ones before it
    (``full_context`` came after the four memory systems; a registered system comes after every built-in)."""
    order = (*SEED_ORDER, *(v for v in eval_variants() if v not in SEED_ORDER))
    if variant not in order:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(eval_variants())}")
    return order.index(variant)


BASELINES_EXTRA = "pip install 'agemem[baselines]'"
for _spec in (
    MemorySystemSpec("mem0", "Mem0", "agemem.eval.baselines.systems:mem0", BASELINES_EXTRA),
    MemorySystemSpec("mem0g", "Mem0g", "agemem.eval.baselines.systems:mem0g", BASELINES_EXTRA),
    MemorySystemSpec("amem", "A-Mem", "agemem.eval.baselines.systems:amem", BASELINES_EXTRA),
    MemorySystemSpec("langmem", "LangMem", "agemem.eval.baselines.systems:langmem", BASELINES_EXTRA),
):
    register_memory_system(_spec)

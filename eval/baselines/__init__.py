"""The paper's memory-system baselines as variants of the same agent: ``--variant mem0 | mem0g | amem | langmem``
(and any system registered with :func:`agemem.eval.memory_systems.register_memory_system`).

The harness plays the same tasks, stages and prompts as for AgeMem; what changes is who writes and reads
long-term memory. The system observes every incoming user message (Stage-1 facts, Stage-2 distractors, game
observations) and writes memory with its own LLM calls; before every agent step its search results for the
latest message are shown (as the ``rag`` variant shows AgeMem's memory); the agent has no memory tools.
Its LLM is the model under test, through an OpenAI-compatible endpoint (:mod:`agemem.eval.baselines.endpoint`),
and every call is counted.

| variant | system | library (pinned) | stores |
|---|---|---|---|
| ``mem0`` | Mem0 | ``mem0ai`` 1.0.11 | Qdrant (local mode), SQLite history |
| ``mem0g`` | Mem0 with graph memory | ``mem0ai`` 1.0.11, ``kuzu`` 0.11.3 | as mem0, plus an embedded Kùzu graph |
| ``amem`` | A-Mem | ``a-mem`` 0.2.6 | ChromaDB (embedded) |
| ``langmem`` | LangMem | ``langmem`` 0.0.30 | LangGraph InMemoryStore |
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.eval.baselines.base import MemorySystem, Recalled, SystemMemory
from agemem.eval.baselines.libraries import LLMTarget
from agemem.eval.memory_systems import memory_system, memory_system_names

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.eval.baselines.endpoint import EngineServer, ForwardingServer
    from agemem.eval.config import EvalRunConfig
    from agemem.eval.models import Backend

MEMORY_SYSTEMS = ("mem0", "mem0g", "amem", "langmem")
"""the paper's four memory-system variants (built in; :func:`memory_system_names` adds the registered ones)."""

__all__ = [
    "MEMORY_SYSTEMS",
    "BuiltSystem",
    "MemorySystem",
    "Recalled",
    "SystemMemory",
    "build_memory_system",
    "memory_system_names",
]


@dataclass
class BuiltSystem:
    """A baseline's memory store and the endpoint its LLM calls go through (both closed with :meth:`close`)."""

    store: SystemMemory
    endpoint: EngineServer | ForwardingServer

    def describe(self) -> dict[str, Any]:
        """``results.json``'s ``memory_system``: the system's settings and the endpoint it called."""
        return {
            "name": self.store.system.name,
            **self.store.system.settings(),
            "endpoint": type(self.endpoint).__name__,
            "upstream": getattr(self.endpoint, "upstream", None),
            "failed_calls": {**self.store.failures, "llm": self.endpoint.meter.failures},
            "last_failure": self.store.last_failure,
        }

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            self.endpoint.close()


def open_endpoint(config: EvalRunConfig, backend: Backend) -> EngineServer | ForwardingServer:
    """Where the system's LLM calls go: ``eval.memory_system.base_url`` if set; else the model under test, its own
    endpoint (``--model openai:...``) behind a metering proxy, or a local server over the harness's engine."""
    from agemem.eval.baselines.endpoint import EngineServer, ForwardingServer, check_reachable
    from agemem.rollouts.build import sampling_params
    from agemem.rollouts.engines.chat import EngineChat

    settings = config.eval.memory_system
    upstream = settings.base_url or (config.engine.openai.base_url if config.engine.backend == "openai" else "")
    if upstream:
        model = settings.model or config.engine.openai.model
        check_reachable(upstream, settings.timeout_s)
        return ForwardingServer(
            upstream, model, timeout_s=settings.timeout_s, api_key=settings.api_key, max_tokens_cap=settings.max_tokens
        )
    chat = EngineChat(backend.engine, backend.tokenizer, sampling_params(config.sampling))
    return EngineServer(
        chat, settings.model or config.policy.model, max_tokens_cap=settings.max_tokens, seed=config.sampling.seed
    )


def build_memory_system(
    variant: str, config: EvalRunConfig, backend: Backend, encoder: Encoder, folder: Path
) -> BuiltSystem:
    """The memory store of a baseline variant, its stores under ``folder``, its LLM the model under test."""
    spec = memory_system(variant)  # an unknown name fails before an endpoint opens
    settings = config.eval.memory_system
    endpoint = open_endpoint(config, backend)
    try:
        llm = LLMTarget(
            endpoint.base_url,
            endpoint.model,
            settings.api_key,
            settings.temperature,
            settings.max_tokens,
            settings.timeout_s,
        )
        system: MemorySystem = spec.factory()(llm, config, encoder, folder / variant)
    except BaseException:
        endpoint.close()
        raise
    return BuiltSystem(SystemMemory(system, endpoint.meter), endpoint)

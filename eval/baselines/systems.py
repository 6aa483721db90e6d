"""Factories of the paper's four memory systems (registered in :mod:`agemem.eval.memory_systems`): each builds one
system over the LLM endpoint the harness opened, its stores under ``folder``. Each library is imported here, when
its variant is played."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.eval.baselines.base import MemorySystem
    from agemem.eval.baselines.libraries import LLMTarget
    from agemem.eval.config import EvalRunConfig


def mem0(llm: LLMTarget, config: EvalRunConfig, encoder: Encoder, folder: Path) -> MemorySystem:
    from agemem.eval.baselines.mem0 import Mem0System

    threshold = config.eval.memory_system.search_threshold
    return Mem0System(llm, encoder, folder, graph=False, search_threshold=threshold)


def mem0g(llm: LLMTarget, config: EvalRunConfig, encoder: Encoder, folder: Path) -> MemorySystem:
    from agemem.eval.baselines.mem0 import Mem0System

    settings = config.eval.memory_system
    return Mem0System(
        llm,
        encoder,
        folder,
        graph=True,
        search_threshold=settings.search_threshold,
        relation_top_k=settings.relation_top_k,
    )


def amem(llm: LLMTarget, config: EvalRunConfig, encoder: Encoder, folder: Path) -> MemorySystem:
    from agemem.core.encoders import sentence_transformer_path
    from agemem.eval.baselines.amem import AMemSystem

    return AMemSystem(llm, sentence_transformer_path(config.env.encoder.model), folder)


def langmem(llm: LLMTarget, config: EvalRunConfig, encoder: Encoder, folder: Path) -> MemorySystem:
    from agemem.eval.baselines.langmem import LangMemSystem

    return LangMemSystem(llm, encoder, enable_deletes=config.eval.memory_system.langmem_enable_deletes)

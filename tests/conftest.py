"""Shared fixtures. Real components (bundled MiniLM, bundled Qwen2.5 tokenizer) are loaded once
per session; ``WordSetEncoder`` is a test double whose cosine similarities are exact fractions,
so threshold and ranking tests can compute the expected answer by hand."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable

import numpy as np
import pytest

from agemem.core.chat import ChatTemplateTokenCounter, load_tokenizer
from agemem.core.config import EncoderConfig, EnvConfig
from agemem.core.context import Message
from agemem.core.encoders import build_encoder
from agemem.core.env import EnvResources, MemoryEnv
from agemem.core.ltm import LongTermMemory

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the network


@pytest.fixture(scope="session", autouse=True)
def _user_cache(tmp_path_factory):
    """What `auto` caches write (distractors.cache_dir=auto) goes to a session folder, not the user's ~/.cache."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


class WordSetEncoder:
    """One dimension per distinct lower-case word: cos(a, b) = |A ∩ B| / sqrt(|A| · |B|)."""

    name = "test-word-set"

    def __init__(self, dim: int = 2048):
        self.dim = dim
        self.vocab: dict[str, int] = {}
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in set(re.findall(r"[a-z0-9_]+", text.lower())):
                out[row, self.vocab.setdefault(word, len(self.vocab))] = 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class RecordingSummarizer:
    """Returns a fixed text and remembers what it was asked to summarise."""

    def __init__(self, text: str = "the gist", error: Exception | None = None):
        self.text = text
        self.error = error
        self.seen: list[list[Message]] = []

    def summarize(self, messages: list[Message]) -> str:
        self.seen.append(list(messages))
        if self.error is not None:
            raise self.error
        return self.text


@pytest.fixture
def word_encoder() -> WordSetEncoder:
    return WordSetEncoder()


@pytest.fixture(scope="session")
def minilm():
    return build_encoder(EncoderConfig())


@pytest.fixture(scope="session")
def qwen_tokenizer():
    return load_tokenizer()


@pytest.fixture
def make_env(qwen_tokenizer, word_encoder) -> Callable[..., MemoryEnv]:
    """Build a MemoryEnv on the real tokenizer with a chosen encoder and summarizer."""

    def build(config: EnvConfig | None = None, *, encoder=None, summarizer=None, scope="default", ltm=None):
        config = config or EnvConfig()
        encoder = encoder or word_encoder
        ltm = ltm or LongTermMemory(encoder, max_top_k=config.ltm.max_top_k, max_entry_chars=config.ltm.max_entry_chars)
        resources = EnvResources(
            config, encoder, ltm, summarizer or RecordingSummarizer(), ChatTemplateTokenCounter(qwen_tokenizer)
        )
        return MemoryEnv(resources, scope=scope)

    return build


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory):
    """The tiny training run (tests/train/tiny_run.py), 3 steps without interruption (checkpoints at steps 2
    and 3): what resumed runs must reproduce, and what export tests export. Tests copy it before changing it."""
    from agemem.entrypoints.cli import main
    from tests.train.tiny_run import TINY

    out = tmp_path_factory.mktemp("full")
    assert main(["train", *TINY, "max_steps=3", f"output_dir={out}"]) == 0
    return out


def parses_as_json(text: str | None) -> bool:
    """Whether ``text`` is one JSON document (what a library's bare ``json.loads`` accepts)."""
    try:
        json.loads(text or "")
    except ValueError:
        return False
    return True

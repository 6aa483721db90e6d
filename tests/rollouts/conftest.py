"""Fixtures of the engine tests: the tiny policy on one torch thread."""

from __future__ import annotations

import pytest
import torch

from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import load_policy


@pytest.fixture(scope="module")
def one_torch_thread():
    """The tiny model gains nothing from intra-op threads, and on a busy 2-core box their spinning makes every
    generate call ~30x slower; restored afterwards so other modules keep their setting."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def policy():
    """The embedded tiny random Qwen2 and the bundled Qwen2.5 tokenizer, built once per module."""
    return load_policy(PolicyConfig(device="cpu"))

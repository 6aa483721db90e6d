"""Fixtures shared by the training tests."""

from __future__ import annotations

import pytest

from tests.train.tiny_run import TINY


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory):
    """The tiny run, 3 steps without interruption (checkpoints at steps 2 and 3): what resumed runs must
    reproduce. Tests copy it before changing anything in it."""
    from agemem.entrypoints.cli import main

    out = tmp_path_factory.mktemp("full")
    assert main(["train", *TINY, "max_steps=3", f"output_dir={out}"]) == 0
    return out

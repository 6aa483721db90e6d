"""Atomic writes (agemem.core.files): all or nothing, and the mode the user's umask gives any new file."""

from __future__ import annotations

import os
import stat

import pytest

from agemem.core.files import atomic_open


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077, 0o027])
def test_an_atomic_write_gets_the_mode_open_would_give_it(tmp_path, umask):
    # mkstemp's 0600 made results unreadable to colleagues on a shared cluster whatever their umask said
    previous = os.umask(umask)
    try:
        with atomic_open(tmp_path / "results.json") as handle:
            handle.write("{}")
        with open(tmp_path / "plain.json", "w") as handle:
            handle.write("{}")
    finally:
        os.umask(previous)
    mode = stat.S_IMODE((tmp_path / "results.json").stat().st_mode)
    assert mode == 0o666 & ~umask == stat.S_IMODE((tmp_path / "plain.json").stat().st_mode)


def test_a_write_that_raises_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(path) as handle:
        handle.write("half")
        raise RuntimeError("killed")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["run.json"]

"""Writing files so that a reader (or a resumed run) sees the old content or the new, never half."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` for writing; it replaces ``path`` when the block ends
    without an error and is removed when it raises (a killed process leaves only a ``.tmp`` file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; the result gets the mode open() would give it (0666 less the umask),
        # so results and run records are as readable to colleagues as any other file the user writes
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask: read from /proc/self/status where it is (Linux; no side effect on other threads),
    else by setting it and setting it back (Python has no getter)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/agemem/<parts>`` (``~/.cache/agemem/<parts>`` when the variable is unset or empty):
    where what outlives a run and is not part of it goes, never the working directory."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root, "agemem", *parts)


def cache_setting_dir(setting: str, name: str) -> Path | None:
    """A ``cache_dir`` setting resolved: None when empty (no cache), :func:`user_cache_dir` ``(name)`` for
    ``auto``, else the folder it names (``~`` expanded)."""
    if not setting:
        return None
    return user_cache_dir(name) if setting == "auto" else Path(setting).expanduser()

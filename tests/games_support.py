"""Skip markers for the game extras (sciworld, pddl, babyai): a test that needs a missing package skips, unless
``AGEMEM_REQUIRE_GAMES=1`` (CI, which installs the extras), where it fails and names what is missing."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import pytest


def _missing(modules: tuple[str, ...], programs: tuple[str, ...] = ()) -> str:
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            return f"{module} is not installed ({err})"
    for program in programs:
        if shutil.which(program) is None:
            return f"{program} is not on PATH"
    return ""


def needs(extra: str, modules: tuple[str, ...], programs: tuple[str, ...] = ()) -> pytest.MarkDecorator:
    """Skip when the extra's modules or programs are missing; with AGEMEM_REQUIRE_GAMES=1 the test module fails to
    collect instead, naming what is missing (CI installs every extra, so a skip there would hide a broken install)."""
    missing = _missing(modules, programs)
    if missing and os.environ.get("AGEMEM_REQUIRE_GAMES") == "1":
        pytest.fail(f"AGEMEM_REQUIRE_GAMES=1 but the {extra} extra is broken: {missing}", pytrace=False)
    return pytest.mark.skipif(bool(missing), reason=f"pip install 'agemem[{extra}]': {missing}")


def shared_data(name: str) -> Path | None:
    """``<name>`` of the project's shared data (real, licensed data the package never ships: AgentBoard's PDDL
    problems, LoCoMo): ``$AGEMEM_SHARED_DATA/<name>``, else ``../shared/data/<name>`` beside the checkout, else
    ``/work/shared/data/<name>``; None when none exists."""
    roots = [os.environ.get("AGEMEM_SHARED_DATA", ""), Path(__file__).resolve().parents[2] / "shared" / "data"]
    roots.append("/work/shared/data")
    for root in roots:
        if root and (Path(root) / name).exists():
            return Path(root) / name
    return None


def needs_shared(name: str) -> pytest.MarkDecorator:
    """Skip when the shared data ``name`` is not on this machine (it is never downloaded)."""
    return pytest.mark.skipif(shared_data(name) is None, reason=f"shared data {name} is not on this machine")

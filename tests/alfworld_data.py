"""The bundled ALFWorld test games, and a skip marker for machines without the ``alfworld`` extra."""

import os
from pathlib import Path

import pytest

from agemem.tasks.alfworld import AlfworldMissingError, require_alfworld

DATA = Path(__file__).resolve().parent / "data" / "alfworld"
os.environ.setdefault("ALFWORLD_DATA", str(DATA))  # importing alfworld creates $ALFWORLD_DATA (default: in ~/.cache)
try:
    require_alfworld()
    MISSING = ""
except AlfworldMissingError as err:
    MISSING = str(err)
needs_alfworld = pytest.mark.skipif(bool(MISSING), reason=MISSING)

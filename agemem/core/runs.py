"""The layout of a training run's directory, shared by whoever reads or writes it.

``<output_dir>/config.json`` is the run's full config; ``<output_dir>/checkpoints/step_000050/`` a complete
checkpoint (``trainer_state.json`` is written inside it before the directory is renamed from ``.tmp``).
The trainer writes this layout (``agemem.train.checkpoint``); evaluation, export and recipes only read it,
through here, so none of them has to import the trainer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

CHECKPOINT_NAME = re.compile(r"^step_(\d+)$")
"""a complete checkpoint's directory name; ``step_N.tmp`` is one being written."""


@dataclass
class TrainerState:
    step: int
    """optimizer steps completed."""
    tasks_seen: int
    """global data position: tasks consumed so far, over all epochs of the shuffled order."""
    world_size: int
    """processes of the run that wrote the checkpoint (resuming needs the same number)."""


def checkpoint_dir(output_dir: Path, step: int) -> Path:
    return output_dir / "checkpoints" / f"step_{step:06d}"


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    root = output_dir / "checkpoints"
    if not root.is_dir():
        return None
    complete = [p for p in root.iterdir() if CHECKPOINT_NAME.match(p.name) and (p / "trainer_state.json").exists()]
    return max(complete, key=lambda p: int(CHECKPOINT_NAME.match(p.name).group(1)), default=None)  # type: ignore[union-attr]


def read_trainer_state(path: Path) -> TrainerState:
    """The step and data position a complete checkpoint directory was saved at."""
    return TrainerState(**json.loads((path / "trainer_state.json").read_text()))

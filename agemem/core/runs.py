"""The layout of a training run's directory, shared by whoever reads or writes it.

``<output_dir>/config.json`` is the run's full config; ``<output_dir>/checkpoints/step_000050/`` a complete
checkpoint (``trainer_state.json`` and, last, ``manifest.json`` are written inside it before the directory is
renamed from ``.tmp``). The trainer writes this layout (``agemem.train.checkpoint``); evaluation, export and
recipes only read it, through here, so none of them has to import the trainer.

Readers take the newest checkpoint that *verifies* against its manifest (:func:`scan_checkpoints`): a
checkpoint cut short by a full disk or overwritten by an interrupted copy is skipped, with the reason, and
the one before it is used.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from agemem.core.manifest import MANIFEST_NAME, header_problems, verify

CHECKPOINT_NAME = re.compile(r"^step_(\d+)$")
"""a complete checkpoint's directory name; ``step_N.tmp`` is one being written."""


def is_main_process() -> bool:
    """Rank 0 under accelerate / torchrun (RANK unset in a single process): the one that prints and writes."""
    return os.environ.get("RANK", "0") == "0"


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


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: missing, unverifiable, or written by an incompatible run."""


@dataclass
class CheckpointScan:
    """The newest checkpoint of a run that verifies, and the newer ones skipped on the way to it."""

    chosen: Path | None
    skipped: list[tuple[Path, list[str]]] = field(default_factory=list)
    """(checkpoint, its problems) for each newer checkpoint that failed verification, newest first."""

    def describe_skipped(self) -> list[str]:
        return [f"skipped {path.name}: {'; '.join(problems)}" for path, problems in self.skipped]


def checkpoint_step(path: Path) -> int:
    match = CHECKPOINT_NAME.match(path.name)
    if match is None:
        raise CheckpointError(f"{path} is not a checkpoint directory (expected a name like step_000050)")
    return int(match.group(1))


def list_checkpoints(output_dir: Path) -> list[Path]:
    """The run's renamed (finished writing) checkpoint directories, newest first."""
    root = output_dir / "checkpoints"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if CHECKPOINT_NAME.match(p.name)), key=checkpoint_step, reverse=True)


def checkpoint_problems(path: Path, *, checksums: bool = False) -> list[str]:
    """Why the checkpoint directory ``path`` cannot be used (empty: it verifies); see agemem.core.manifest."""
    if not path.is_dir():
        return [f"{path} does not exist"]
    # written before manifests: its rename from .tmp says it finished; its headers must still read
    has_manifest = (path / MANIFEST_NAME).exists()
    problems = verify(path, checksums=checksums) if has_manifest else header_problems(path)
    if not problems:
        try:
            read_trainer_state(path)
        except CheckpointError as error:
            problems.append(str(error))
    return problems


def scan_checkpoints(output_dir: Path, *, checksums: bool = False) -> CheckpointScan:
    """The newest checkpoint under ``output_dir`` that verifies (sizes and headers; sha256 with
    ``checksums``), and the newer ones it skipped with their problems."""
    skipped = []
    for path in list_checkpoints(output_dir):
        problems = checkpoint_problems(path, checksums=checksums)
        if not problems:
            return CheckpointScan(path, skipped)
        skipped.append((path, problems))
    return CheckpointScan(None, skipped)


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest checkpoint that verifies (sizes and readable headers), or None."""
    return scan_checkpoints(output_dir).chosen


def resolve_checkpoint(output_dir: Path, name: str) -> Path:
    """``--resume-from``: ``step_N`` / ``N`` (a checkpoint of this run) or a checkpoint directory's path."""
    path = Path(name)
    if not path.is_dir():
        step = name.removeprefix("step_")
        if not step.isdigit():
            raise CheckpointError(
                f"--resume-from {name!r}: not a directory, nor step_N / N; the run's checkpoints: "
                + (", ".join(p.name for p in list_checkpoints(output_dir)) or "none")
            )
        path = checkpoint_dir(output_dir, int(step))
    if not path.is_dir():
        raise CheckpointError(
            f"--resume-from {name!r}: {path} does not exist; the run's checkpoints: "
            + (", ".join(p.name for p in list_checkpoints(output_dir)) or "none")
        )
    return path


def read_trainer_state(path: Path) -> TrainerState:
    """The step and data position a complete checkpoint directory was saved at."""
    state_file = path / "trainer_state.json"
    try:
        return TrainerState(**json.loads(state_file.read_text()))
    except FileNotFoundError as error:
        raise CheckpointError(f"{state_file} is missing: {path} is not a complete checkpoint") from error
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"{state_file} is unreadable ({type(error).__name__}: {error})") from error

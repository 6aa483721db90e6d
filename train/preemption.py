"""Stopping cleanly when the cluster says so: SIGTERM (preemption) or SIGUSR1 (SLURM's ``--signal``
warning before the time limit) become a flag that the training loop polls at safe points.

The handler only records the signal; the loop does the work. Each rank may see the signal at a
different moment, so the decision is collective (:func:`any_rank`, one all-reduce at fixed points of
every step, the same on every rank): after the rollout (a rank that stopped its rollout early has
drained the engine's collectives first) and after the update. When any rank asks to stop,

* after the rollout: the step is abandoned (its rollouts are thrown away; the weights are those of the
  last complete step, which is what gets checkpointed);
* after the update: the step is finished, logged and checkpointed.

Then ``preempted.json`` is written into the run directory (launch scripts requeue when they find it: the
exit code does not survive ``torchrun``, which exits 1 after forwarding a signal) and the command exits
with :data:`PREEMPTED_EXIT_CODE`. A requeued run continues with ``--resume`` from that checkpoint.

SIGINT (Ctrl-C, in the default ``checkpoint.on_signals``) stops the same way but is a person's request, not
a preemption: no ``preempted.json`` (nothing should requeue it) and exit code 130, the shell's for Ctrl-C. A
second Ctrl-C stops at once, without a checkpoint (the last one stays): ``KeyboardInterrupt`` from the handler.
A second SIGINT within :data:`SAME_PRESS_S` of the first is the same press: under ``torchrun`` a worker gets
the terminal's SIGINT and the launcher's forwarded copy.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.core.runs import is_main_process

if TYPE_CHECKING:
    from accelerate import Accelerator

PREEMPTED_EXIT_CODE = 75
"""EX_TEMPFAIL of sysexits.h: a temporary failure, run again (the checkpoint is written)."""
INTERRUPTED_EXIT_CODE = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""
SAME_PRESS_S = 1.0
"""a second SIGINT sooner than this after the first is the same Ctrl-C (the launcher's forwarded copy)."""
MARKER_NAME = "preempted.json"


def parse_signals(names: list[str]) -> list[signal.Signals]:
    """``["SIGTERM", "USR1"]`` → signals; a ConfigError names an unknown one."""
    signals = []
    for name in names:
        full = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
        try:
            signals.append(signal.Signals[full])
        except KeyError:
            raise ConfigError(
                f"checkpoint.on_signals: {name!r} is not a signal of this platform; use names such as SIGTERM, SIGUSR1"
            ) from None
        if signals[-1] in (signal.SIGKILL, signal.SIGSTOP):
            raise ConfigError(f"checkpoint.on_signals: {full} cannot be caught; SIGTERM and SIGUSR1 are the usual ones")
    return signals


@dataclass
class Preemption:
    """What stopped the run, written to ``<output_dir>/preempted.json``."""

    signal: str
    step: int
    """the last complete step: the checkpoint's step."""
    checkpoint: str
    abandoned_step: bool
    """True when the signal came during a rollout and that step was thrown away."""
    seconds_to_exit: float
    """from the signal to the checkpoint being complete."""


class TrainingPreemptedError(Exception):
    """Training stopped on a signal after checkpointing; the CLI exits with PREEMPTED_EXIT_CODE, or with
    INTERRUPTED_EXIT_CODE when the signal was a Ctrl-C (``interrupted``)."""

    def __init__(self, preemption: Preemption):
        self.preemption = preemption
        super().__init__(
            f"stopped by {preemption.signal}: checkpoint of step {preemption.step} at {preemption.checkpoint} "
            f"({preemption.seconds_to_exit:.1f} s after the signal)"
        )

    @property
    def interrupted(self) -> bool:
        return self.preemption.signal == "SIGINT"

    @property
    def exit_code(self) -> int:
        return INTERRUPTED_EXIT_CODE if self.interrupted else PREEMPTED_EXIT_CODE


class TrainingStoppedAtOnceError(Exception):
    """Training stopped where it was (a second Ctrl-C, or one outside the watched loop): no checkpoint was
    written for it; ``checkpoint`` is the last one the run has (None: none yet)."""

    def __init__(self, checkpoint: Path | None):
        self.checkpoint = checkpoint
        where = f"the last checkpoint is {checkpoint}" if checkpoint is not None else "no checkpoint was written"
        super().__init__(f"stopped at once by Ctrl-C; {where}")


class PreemptionWatch:
    """Installs handlers for ``signals`` (in the main thread) while open; ``requested()`` says one came."""

    def __init__(self, signals: list[signal.Signals]):
        self.signals = signals
        self.received: signal.Signals | None = None
        self.received_at = 0.0
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> PreemptionWatch:
        if threading.current_thread() is threading.main_thread():  # signal.signal only works there
            for sig in self.signals:
                if sig == signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # a background job (`cmd &`, nohup): Ctrl-C is not meant for it, as Python itself does
                self._previous[sig] = signal.signal(sig, self._record)
        elif self.signals:
            print("agemem train: not in the main thread; preemption signals keep their default action", file=sys.stderr)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _record(self, signum: int, frame: object) -> None:
        now = time.monotonic()
        if signum == signal.SIGINT and self.received is not None and now - self.received_at >= SAME_PRESS_S:
            raise KeyboardInterrupt  # Ctrl-C again: stop now; the CLI names the last checkpoint
        if self.received is None:  # the first signal counts; a second (SLURM repeats) changes nothing
            self.received = signal.Signals(signum)
            self.received_at = now
            if signum == signal.SIGINT and is_main_process():
                print(
                    "agemem train: Ctrl-C: stopping after the current rollout or update, with a checkpoint of the "
                    "last complete step; Ctrl-C again stops at once (the last checkpoint stays)",
                    file=sys.stderr,
                    flush=True,
                )

    def requested(self) -> bool:
        return self.received is not None


def any_rank(accelerator: Accelerator, flag: bool) -> bool:
    """Whether ``flag`` is true on any rank: one all-reduce, so every rank must call it at the same point."""
    if accelerator.num_processes == 1:
        return flag
    import torch
    import torch.distributed as dist

    value = torch.tensor([1 if flag else 0], device=accelerator.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def write_marker(output_dir: Path, preemption: Preemption) -> None:
    (output_dir / MARKER_NAME).write_text(json.dumps(asdict(preemption), indent=2))


def clear_marker(output_dir: Path) -> None:
    (output_dir / MARKER_NAME).unlink(missing_ok=True)

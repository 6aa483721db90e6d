"""Signals at chosen points of `agemem train`, for the preemption tests: in-process (``patch`` is
``monkeypatch.setattr``) or under ``accelerate launch`` (run as a script: ``python preempt_hooks.py
rollout|update RANK STEP SIGNAL -- <agemem train arguments>`` signals only rank RANK)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import agemem.train.update
from agemem.rollouts.driver import RolloutDriver

Patch = Callable[[Any, str, Any], None]


def signal_during_rollout(patch: Patch, step: int, sig: signal.Signals = signal.SIGTERM, times: int = 1) -> None:
    """Send ``sig`` to this process ``times`` times after the first engine call of ``step``'s rollout."""
    real_run = RolloutDriver.run
    calls = []

    def run(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            real_generate = self.engine.generate

            def generate(*g_args, **g_kwargs):
                out = real_generate(*g_args, **g_kwargs)
                for _ in range(times):
                    os.kill(os.getpid(), sig)  # handled at the next bytecode: the handler only records it
                return out

            patch(self.engine, "generate", generate)
        return real_run(self, *args, **kwargs)

    patch(RolloutDriver, "run", run)


def signal_during_update(patch: Patch, step: int, sig: signal.Signals = signal.SIGUSR1) -> None:
    """Send ``sig`` to this process as ``step``'s update starts."""
    real_update = agemem.train.update.policy_update
    calls = []

    def update(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            os.kill(os.getpid(), sig)  # the update carries on to its end; the step is kept
        return real_update(*args, **kwargs)

    patch(agemem.train.update, "policy_update", update)


if __name__ == "__main__":
    from agemem.entrypoints.cli import main

    where, rank, step, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if int(os.environ.get("RANK", "0")) == rank:
        hook = {"rollout": signal_during_rollout, "update": signal_during_update}[where]
        hook(setattr, step, signal.Signals[name])
    raise SystemExit(main(sys.argv[sys.argv.index("--") + 1 :]))

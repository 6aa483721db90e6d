"""Running 2-process CPU launches from tests: ``accelerate launch`` with the shipped configs of
``launch/accelerate/`` (so they cannot rot), overridden on the command line for a GPU-less machine.

The overrides are what a CPU needs and nothing else: 2 processes on 1 machine, no mixed precision
(DeepSpeed bf16 and DDP autocast are exercised on GPUs; a CPU bf16 update is slow and approximate), a
free local port, ``CUDA_VISIBLE_DEVICES=""``. ``use_cpu`` stays false in every file because
``accelerate launch --cpu`` starts a single process; ``agemem.train.distributed.build_accelerator`` puts the
ranks in a gloo process group (DDP) or a DeepSpeed engine on gloo.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ACCELERATE_CONFIGS = REPO / "launch" / "accelerate"
TIMEOUT_S = 400


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # a pytest started under a launcher must not hand its own rank/world to the children
        if key not in {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}
        and not key.startswith("ACCELERATE_")
    }
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        CUDA_VISIBLE_DEVICES="",
        PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    return env


def launch_prefix(config_name: str, processes: int = 2) -> list[str]:
    """``accelerate launch`` with ``launch/accelerate/<config_name>`` and the CPU overrides."""
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    command += ["--config_file", str(ACCELERATE_CONFIGS / config_name)]
    command += ["--num_processes", str(processes), "--num_machines", "1", "--machine_rank", "0"]
    command += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    command += ["--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port())]
    return command


def run(command: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(command, cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{command} did not finish in {TIMEOUT_S} s:\n{(err.stderr or '')[-4000:]}")
    if check:
        assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}"
    return result


def finish(process: subprocess.Popen) -> None:
    """Wait for ``process`` (started with ``stderr=PIPE``); it must exit 0."""
    assert process.wait(timeout=TIMEOUT_S) == 0, process.stderr.read().decode()[-3000:]


def kill_repeatedly(
    start: Callable[[], subprocess.Popen],
    *,
    progress: Callable[[], int],
    finished: Callable[[], bool],
    plan: Callable[[random.Random], tuple[int, float]],
    kills: int,
    seed: int,
    label: str = "after",
    before_kill: Callable[[], dict[str, Any]] = dict,
    after_kill: Callable[[], dict[str, Any]] = dict,
) -> list[dict[str, Any]]:
    """SIGKILL a command at random points, re-running it (it resumes) after each, ``kills`` times or until
    ``finished()``; then run it to the end. Returns the kill points.

    Each attempt: ``start()``; ``plan(rng)`` gives the progress to wait for and the seconds to wait beyond it
    (0 progress past the current: a kill in start-up); a process still running then gets SIGKILL (no handler, no
    clean-up: only what is on disk survives) and the point is recorded as ``{label: target, "plus_s": extra}``
    with what ``before_kill()`` and ``after_kill()`` add. A process that ends first must exit 0."""
    rng, points = random.Random(seed), []
    while len(points) < kills and not finished():
        process = start()
        target, extra = plan(rng)
        deadline = time.monotonic() + TIMEOUT_S
        while progress() < target and process.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        try:
            process.wait(timeout=extra)
        except subprocess.TimeoutExpired:
            seen = before_kill()
            process.send_signal(signal.SIGKILL)
            process.wait()
            points.append({label: target, "plus_s": round(extra, 2), **seen, **after_kill()})
            continue
        assert process.returncode == 0, process.stderr.read().decode()[-3000:]
    if not finished():
        finish(start())
    return points

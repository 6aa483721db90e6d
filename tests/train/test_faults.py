"""Faults across processes (the ``faults`` tier: ``python -m pytest -m faults``, run by .ci/run after the main
suite). Each interrupted run is resumed and must end where the uninterrupted run ends, metrics and weights:

* 2 ranks under ``accelerate launch``: one rank alone signalled mid-rollout (both stop at the same point,
  the step is abandoned); SIGUSR1 to every process of the launch with the launcher ignoring it (SLURM's
  time-limit warning, as launch/slurm_multi_node.sbatch sets it up); SIGTERM to the launcher, which forwards
  it (a preemption);
* ``agemem train`` SIGKILLed at random moments (startup, rollout, update, checkpoint writing), resumed each
  time: no clean exit, no signal handler, only what is on disk.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from agemem.core.runs import latest_checkpoint, read_trainer_state
from agemem.train.preemption import MARKER_NAME
from tests.train.launching import REPO, TIMEOUT_S, child_env, kill_repeatedly, launch_prefix, run
from tests.train.tiny_run import TINY, metrics, weights

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(
        not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
        reason="torch.distributed with the gloo backend is not available",
    ),
]
HOOKS = Path(__file__).with_name("preempt_hooks.py")
STEPS = 4
TRAIN = [*TINY, f"max_steps={STEPS}"]


def assert_same_run(run_dir: Path, reference: Path) -> None:
    assert metrics(run_dir / "metrics.jsonl") == metrics(reference / "metrics.jsonl")
    again, full = weights(run_dir, STEPS), weights(reference, STEPS)
    assert again.keys() == full.keys()
    for key in full:
        torch.testing.assert_close(again[key], full[key], rtol=0, atol=0)


@pytest.fixture(scope="module")
def two_rank_reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("two_ranks") / "reference"
    run([*launch_prefix("ddp.yaml"), "-m", "agemem", "train", *TRAIN, f"output_dir={out}"])
    return out


def test_one_rank_signalled_mid_rollout_stops_both_ranks_at_the_same_step(two_rank_reference, tmp_path):
    out = tmp_path / "run"
    hooked = [str(HOOKS), "rollout", "1", "2", "SIGTERM", "--", "train", *TRAIN, "checkpoint.every=0"]
    result = run([*launch_prefix("ddp.yaml"), *hooked, f"output_dir={out}"], check=False)
    assert result.returncode != 0  # the workers exit 75; torchrun reports a failed worker
    assert "stopped by SIGTERM: checkpoint of step 1" in result.stderr, result.stderr[-3000:]  # rank 1
    assert "stopped by a signal on another rank: checkpoint of step 1" in result.stderr  # rank 0
    marker = json.loads((out / MARKER_NAME).read_text())
    assert marker["step"] == 1 and marker["abandoned_step"] is True
    assert [m["step"] for m in metrics(out / "metrics.jsonl")] == [1]

    run([*launch_prefix("ddp.yaml"), "-m", "agemem", "train", *TRAIN, f"output_dir={out}", "--resume"])
    assert_same_run(out, two_rank_reference)


def _ignore_usr1() -> None:
    """What the SLURM script does for the launcher (``trap '' USR1`` before ``exec accelerate launch``):
    torchrun does not handle SIGUSR1 and would die of it; the workers install their own handler."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants: what slurmstepd signals (every process of the step's cgroup; torchrun
    starts each worker in a session of its own, so a process-group signal would miss them)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, queue = [], [pid]
    while queue:
        current = queue.pop()
        tree.append(current)
        queue += parents.get(current, [])
    return tree


@pytest.mark.parametrize(
    "how",
    ["usr1_to_every_process", "sigterm_to_the_launcher"],
    ids=["time_limit_warning", "preemption"],
)
def test_a_signalled_launch_checkpoints_and_resumes_to_the_uninterrupted_run(two_rank_reference, tmp_path, how):
    """SLURM's ``--signal=USR1@N`` reaches every process of the job step: the launcher ignores it, the
    workers stop. A preemption's SIGTERM reaches the launcher too, which
    forwards it to the workers and waits ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` before SIGKILL."""
    out = tmp_path / "run"
    command = [*launch_prefix("ddp.yaml"), "-m", "agemem", "train", *TRAIN, f"output_dir={out}"]
    launcher = subprocess.Popen(
        command, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ignore_usr1,
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT_S
    while latest_checkpoint(out) is None:  # step 1 is done: the signal lands in a later step (of 4)
        assert launcher.poll() is None, launcher.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    if how == "usr1_to_every_process":
        for pid in process_tree(launcher.pid):
            os.kill(pid, signal.SIGUSR1)
    else:
        launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=TIMEOUT_S)
    expected = "SIGUSR1" if how == "usr1_to_every_process" else "SIGTERM"
    assert launcher.returncode != 0 and f"stopped by {expected}" in stderr, stderr[-3000:]
    marker = json.loads((out / MARKER_NAME).read_text())
    assert marker["signal"] == expected and 1 <= marker["step"] < STEPS
    assert latest_checkpoint(out).name == f"step_{marker['step']:06d}"
    assert [m["step"] for m in metrics(out / "metrics.jsonl")][-1] == marker["step"]

    run([*launch_prefix("ddp.yaml"), "-m", "agemem", "train", *TRAIN, f"output_dir={out}", "--resume"])
    assert_same_run(out, two_rank_reference)


KILL_STEPS = 10
KILLS = 6


def _train(out: Path, resume: bool) -> subprocess.Popen:
    command = [sys.executable, "-m", "agemem", "train", *TINY, f"max_steps={KILL_STEPS}", f"output_dir={out}"]
    return subprocess.Popen(
        [*command, *(["--resume"] if resume else [])], cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def _finished(out: Path) -> bool:
    checkpoint = latest_checkpoint(out)
    return checkpoint is not None and read_trainer_state(checkpoint).step == KILL_STEPS


def _logged_steps(out: Path) -> int:
    try:
        return max((json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()), default=0)
    except (OSError, ValueError, KeyError):
        return 0  # absent, or a line being written


def test_agemem_train_killed_anywhere_resumes_to_the_uninterrupted_run(tmp_path):
    """Each attempt is SIGKILLed at a random point: after 0-2 more steps are logged (0: in start-up or the
    first step), plus a random part of a step (a step is logged before its checkpoint is written, so short
    extras land in checkpoint writing). Resume, again, KILLS times; then run to the end."""
    reference = tmp_path / "reference"
    started = time.monotonic()
    assert _train(reference, resume=False).wait(timeout=TIMEOUT_S) == 0
    full_s = time.monotonic() - started
    reference_metrics = metrics(reference / "metrics.jsonl")
    raw = [json.loads(line) for line in (reference / "metrics.jsonl").read_text().splitlines()]
    step_s = sum(m["time/step_s"] for m in raw) / len(raw)
    out = tmp_path / "run"

    def plan(rng: random.Random) -> tuple[int, float]:
        checkpoint = latest_checkpoint(out)
        done = read_trainer_state(checkpoint).step if checkpoint else 0
        return done + rng.randint(0, 2), rng.uniform(0.0, 1.2 * step_s)

    def left() -> dict:
        after = latest_checkpoint(out)
        return {"checkpoint_left": after.name if after else None}

    kills = kill_repeatedly(
        lambda: _train(out, resume=latest_checkpoint(out) is not None),
        progress=lambda: _logged_steps(out),
        finished=lambda: _finished(out),
        plan=plan,
        kills=KILLS,
        seed=0,
        label="after_step",
        before_kill=lambda: {"while_saving": any((out / "checkpoints").glob("*.tmp"))},
        after_kill=left,
    )
    print(f"\n{len(kills)} kill points; uninterrupted run {full_s:.0f} s, {step_s:.1f} s a step: {kills}")
    assert len(kills) == KILLS, kills
    assert metrics(out / "metrics.jsonl") == reference_metrics
    again, full = weights(out, KILL_STEPS), weights(reference, KILL_STEPS)
    for key in full:
        torch.testing.assert_close(again[key], full[key], rtol=0, atol=0)

"""Preemption and corrupted checkpoints, on the tiny run in one process (the 2-process signal test is in
test_faults.py): a signal mid-rollout or mid-update checkpoints the last complete step and exits 75, and the
resumed run reproduces the uninterrupted one bit for bit; a corrupted newest checkpoint is skipped with the
reason; ``--resume-from`` chooses; nothing here is a raw traceback."""

from __future__ import annotations

import json
import shutil
import signal

import pytest
import torch

from agemem.entrypoints.cli import main, resume_command
from agemem.train import preemption
from agemem.train.preemption import INTERRUPTED_EXIT_CODE, MARKER_NAME, PREEMPTED_EXIT_CODE
from tests.train.preempt_hooks import signal_during_rollout, signal_during_update
from tests.train.tiny_run import TINY, metrics, weights

pytestmark = pytest.mark.faults  # the faults tier: .ci/run runs it with -m faults

# a checkpoint only at the end: a preempted run must write the one it resumes from
NO_PERIODIC = [*TINY, "checkpoint.every=0", "max_steps=3"]


def assert_same_run(run_dir, reference):
    assert metrics(run_dir / "metrics.jsonl") == metrics(reference / "metrics.jsonl")
    resumed, full = weights(run_dir, 3), weights(reference, 3)
    for key in full:
        torch.testing.assert_close(resumed[key], full[key], rtol=0, atol=0)


def exits_with(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err


def test_a_signal_mid_rollout_abandons_the_step_checkpoints_the_last_and_resumes_exactly(
    uninterrupted, tmp_path, monkeypatch, capsys
):
    signal_during_rollout(monkeypatch.setattr, step=3)
    code, err = exits_with(["train", *NO_PERIODIC, f"output_dir={tmp_path}"], capsys)
    assert code == PREEMPTED_EXIT_CODE and "stopped by SIGTERM: checkpoint of step 2" in err
    marker = json.loads((tmp_path / MARKER_NAME).read_text())
    assert marker["signal"] == "SIGTERM" and marker["step"] == 2 and marker["abandoned_step"] is True
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_000002"]  # written on the signal
    assert [m["step"] for m in metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are gone with the run

    assert main(["train", *NO_PERIODIC, f"output_dir={tmp_path}", "--resume"]) == 0
    assert not (tmp_path / MARKER_NAME).exists()
    assert_same_run(tmp_path, uninterrupted)


def test_a_signal_mid_update_finishes_the_step_and_resumes_exactly(uninterrupted, tmp_path, monkeypatch, capsys):
    signal_during_update(monkeypatch.setattr, step=2)
    code, err = exits_with(["train", *NO_PERIODIC, f"output_dir={tmp_path}"], capsys)
    assert code == PREEMPTED_EXIT_CODE and "stopped by SIGUSR1: checkpoint of step 2" in err
    marker = json.loads((tmp_path / MARKER_NAME).read_text())
    assert marker["step"] == 2 and marker["abandoned_step"] is False
    assert [m["step"] for m in metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    monkeypatch.undo()
    assert main(["train", *NO_PERIODIC, f"output_dir={tmp_path}", "--resume"]) == 0
    assert_same_run(tmp_path, uninterrupted)


@pytest.fixture
def ctrl_c_reaches_us():
    """SIGINT as in a terminal's foreground job (a background job, as CI runs this suite, ignores it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_like_a_preemption_but_exits_130_without_a_requeue_marker(
    uninterrupted, tmp_path, monkeypatch, capsys, ctrl_c_reaches_us
):
    # the terminal's SIGINT and the launcher's forwarded copy arrive together: one press, a clean stop
    signal_during_rollout(monkeypatch.setattr, step=3, sig=signal.SIGINT, times=2)
    code, err = exits_with(["train", *NO_PERIODIC, f"output_dir={tmp_path}"], capsys)
    assert code == INTERRUPTED_EXIT_CODE and "stopped by SIGINT: checkpoint of step 2" in err
    assert err.count("Ctrl-C: stopping after the current rollout or update") == 1
    assert err.rstrip().endswith(f"continue with: agemem train {' '.join(NO_PERIODIC)} output_dir={tmp_path} --resume")
    assert not (tmp_path / MARKER_NAME).exists()  # a person's stop: launch scripts must not requeue it
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_000002"]
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert main(["train", *NO_PERIODIC, f"output_dir={tmp_path}", "--resume"]) == 0
    assert f"resuming from step_000002 ({tmp_path / 'checkpoints' / 'step_000002'})" in capsys.readouterr().err
    assert_same_run(tmp_path, uninterrupted)


def test_a_second_ctrl_c_stops_at_once_and_names_the_last_checkpoint(tmp_path, monkeypatch, capsys, ctrl_c_reaches_us):
    monkeypatch.setattr(preemption, "SAME_PRESS_S", 0.0)  # the second press comes "later"
    signal_during_rollout(monkeypatch.setattr, step=2, sig=signal.SIGINT, times=2)
    code, err = exits_with(["train", *TINY, "max_steps=3", f"output_dir={tmp_path}"], capsys)
    assert code == INTERRUPTED_EXIT_CODE and "Traceback" not in err
    assert f"stopped at once by Ctrl-C; the last checkpoint is {tmp_path / 'checkpoints' / 'step_000001'}" in err
    assert not (tmp_path / "checkpoints" / "step_000002").exists()  # nothing of step 2 was saved


def test_an_ignored_sigint_stays_ignored(monkeypatch):
    # a background job (`agemem train ... &`, nohup): the shell ignores Ctrl-C for it, and so does the run
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with preemption.PreemptionWatch([signal.SIGTERM, signal.SIGINT]):
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["train", "max_steps=3"], "agemem train max_steps=3 --resume"),
        (["train", "--resume", "a=1"], "agemem train --resume a=1"),
        (["train", "--resume-from", "step_2", "a=1"], "agemem train a=1 --resume"),
        (["train", "--resume-from=2", "--config", "my run.yaml"], "agemem train --config 'my run.yaml' --resume"),
    ],
)
def test_the_resume_command_repeats_the_arguments_with_resume(argv, expected):
    assert resume_command(argv) == expected


def test_signals_can_be_left_to_their_default_action(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(signal, "signal", lambda sig, handler: seen.append(sig))
    assert main(["train", *TINY, "max_steps=1", f"output_dir={tmp_path}", "checkpoint.on_signals=[]"]) == 0
    assert seen == []


def test_an_unknown_signal_is_a_configuration_error(tmp_path, capsys):
    code, err = exits_with(["train", *TINY, f"output_dir={tmp_path}", "checkpoint.on_signals=[SIGBOGUS]"], capsys)
    assert code == 2 and "'SIGBOGUS' is not a signal" in err


def copy_run(source, target):
    shutil.copytree(source, target)
    return target / "checkpoints"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda c: (c / "trainer_state.json").write_text("garbage"), "trainer_state.json has 7 bytes"),
        (lambda c: (c / "policy" / "model.safetensors").write_bytes(b"\x00" * 9), "model.safetensors has 9 bytes"),
        (lambda c: (c / "accelerate" / "optimizer.bin").unlink(), "accelerate/optimizer.bin is missing"),
    ],
    ids=["garbage_state", "truncated_weights", "missing_optimizer"],
)
def test_resume_skips_a_corrupted_newest_checkpoint_and_says_why(uninterrupted, tmp_path, capsys, damage, reason):
    checkpoints = copy_run(uninterrupted, tmp_path / "run")
    damage(checkpoints / "step_000003")
    assert main(["train", *TINY, "max_steps=3", f"output_dir={tmp_path / 'run'}", "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"skipped step_000003: {'accelerate/' if 'optimizer' in reason else ''}" in err and reason in err
    assert "resuming from step_000002" in err
    assert_same_run(tmp_path / "run", uninterrupted)  # step 3 trained again from step 2: the same result


def test_resume_from_chooses_a_checkpoint_and_refuses_a_broken_one(uninterrupted, tmp_path, capsys):
    checkpoints = copy_run(uninterrupted, tmp_path / "run")
    run = [*TINY, "max_steps=3", f"output_dir={tmp_path / 'run'}"]
    assert main(["train", *run, "--resume-from", "step_2"]) == 0  # step 3 again, over the old step 3
    assert_same_run(tmp_path / "run", uninterrupted)

    (checkpoints / "step_000002" / "trainer_state.json").write_text("{}")
    code, err = exits_with(["train", *run, "--resume-from", "2"], capsys)
    assert code == 1 and "checkpoint error: --resume-from 2" in err and "does not verify" in err
    code, err = exits_with(["train", *run, "--resume-from", "step_9"], capsys)
    assert code == 1 and "step_000009 does not exist; the run's checkpoints: step_000003, step_000002" in err


def test_when_no_checkpoint_verifies_resume_says_so(uninterrupted, tmp_path, capsys):
    checkpoints = copy_run(uninterrupted, tmp_path / "run")
    for step in (2, 3):
        (checkpoints / f"step_{step:06d}" / "policy" / "model.safetensors").write_bytes(b"")
    code, err = exits_with(["train", *TINY, "max_steps=3", f"output_dir={tmp_path / 'run'}", "--resume"], capsys)
    assert code == 1 and "no complete checkpoint" in err and "verifies (2 skipped above)" in err
    assert err.count("skipped step_") == 2

"""launch/slurm_multi_node.sbatch's preemption logic, run by bash against fake SLURM commands (``srun`` runs
its command here, ``scontrol`` records requeues, ``accelerate`` records how it was called): the launchers
ignore SIGUSR1, a requeued job resumes, a job whose trainers checkpointed on a signal is requeued, and a
failed job is not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "launch" / "slurm_multi_node.sbatch"

FAKES = {
    "scontrol": """#!/bin/bash
if [[ "$1 $2" == "show hostnames" ]]; then printf 'gen0\\ntrain0\\ntrain1\\n'; exit 0; fi
echo "scontrol $*" >> "$FAKE_LOG"
""",
    # srun options all come as --key=value: drop them and run the command here
    "srun": """#!/bin/bash
while [[ $# -gt 0 && "$1" == --* ]]; do shift; done
SLURM_PROCID=0 exec "$@"
""",
    "curl": "#!/bin/bash\nexit 0\n",
    "trl": "#!/bin/bash\nexec sleep 300\n",
    # the launcher: records its arguments and whether SIGUSR1 is ignored (bit 10 of SigIgn), then plays the
    # trainers: FAKE_OUTCOME=preempted writes the marker and fails as torchrun does, failed exits 3
    "accelerate": """#!/bin/bash
ignored=$(( 0x$(awk '/^SigIgn/ {print $2}' /proc/$$/status) >> 9 & 1 ))
printf '%s\\n' "usr1_ignored=${ignored}" "$@" > "$FAKE_ARGS"
for arg in "$@"; do [[ "$arg" == output_dir=* ]] && out="${arg#output_dir=}"; done
case "$FAKE_OUTCOME" in
    preempted) mkdir -p "$out"; echo '{"signal": "SIGUSR1", "step": 3}' > "$out/preempted.json"; exit 1 ;;
    failed) exit 3 ;;
esac
""",
}


@pytest.fixture
def slurm(tmp_path):
    if shutil.which("bash") is None or not Path("/proc/self/status").exists():
        pytest.skip("needs bash and /proc")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name, text in FAKES.items():
        (fake_bin / name).write_text(text)
        (fake_bin / name).chmod(0o755)

    def submit(outcome: str, restart_count: int, *args: str) -> tuple[int, list[str], list[str]]:
        log, recorded = tmp_path / "log", tmp_path / "accelerate_args"
        log.write_text("")
        env = {
            **os.environ,
            "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
            "SLURM_SUBMIT_DIR": str(REPO),
            "SLURM_JOB_NODELIST": "gen0,train[0-1]",
            "SLURM_JOB_ID": "4242",
            "SLURM_CPUS_PER_TASK": "2",
            "SLURM_RESTART_COUNT": str(restart_count),
            "CONFIG": "configs/tiny_cpu.yaml",
            "FAKE_LOG": str(log),
            "FAKE_ARGS": str(recorded),
            "FAKE_OUTCOME": outcome,
        }
        result = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)
        return result.returncode, log.read_text().splitlines(), recorded.read_text().splitlines()

    return submit


def test_a_job_stopped_by_a_signal_is_requeued_and_its_launcher_ignores_usr1(slurm, tmp_path):
    run_dir = tmp_path / "run"
    code, log, launcher = slurm("preempted", 0, f"output_dir={run_dir}", "max_steps=5")
    assert code == 0 and log == ["scontrol requeue 4242"]
    assert launcher[0] == "usr1_ignored=1"  # torchrun would die of SIGUSR1; the workers handle it
    assert f"output_dir={run_dir}" in launcher and "max_steps=5" in launcher and "--resume" not in launcher
    assert json.loads((run_dir / "preempted.json").read_text())["step"] == 3


def test_a_requeued_job_resumes_and_a_stale_marker_does_not_requeue_it_again(slurm, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "preempted.json").write_text("{}")  # the previous job's
    code, log, launcher = slurm("finished", 1, f"output_dir={run_dir}")
    assert code == 0 and log == [] and launcher[-1] == "--resume"
    assert not (run_dir / "preempted.json").exists()


def test_a_failed_job_keeps_its_exit_code_and_is_not_requeued(slurm, tmp_path):
    code, log, _ = slurm("failed", 0, f"output_dir={tmp_path / 'run'}")
    assert code == 3 and log == []

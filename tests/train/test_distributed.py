"""Data parallelism is exact: a 2-process CPU run (gloo, ``accelerate launch``) of one ``policy_update``
produces the same weights and the same global metrics as one process on the whole batch.

The two ranks get different samples, different token counts and different numbers of micro-batches
(the short rank runs zero-weight padding repeats), so this checks the global loss weights, the
world-size factor against DDP's gradient average, the equalised micro-batch counts, the global
gradient norm used for clipping and the all-reduced metrics. The work is done by
``distributed_update.py`` in subprocesses.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from tests.train.distributed_update import CASES, LEARNING_RATE  # noqa: E402

SCRIPT = Path(__file__).with_name("distributed_update.py")
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240
ADAMW_CASES = [name for name, (optimizer, _, _) in CASES.items() if optimizer == "adamw"]

# accelerate's default config (if the user has one) must not change the launch; use_cpu stays false because
# `accelerate launch --cpu` starts a single process (multi-CPU runs are left to mpirun there): the script
# builds its Accelerator with cpu=True, so the launched ranks join a gloo process group
ACCELERATE_CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_machines: 1
machine_rank: 0
num_processes: 2
mixed_precision: 'no'
use_cpu: false
debug: false
"""

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with the gloo backend is not available",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
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


def _run(command: list[str]) -> None:
    try:
        result = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{command} did not finish in {TIMEOUT_S} s:\n{(err.stderr or '')[-4000:]}")
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("distributed")
    single, double = root / "single", root / "two_ranks"
    _run([sys.executable, str(SCRIPT), str(single)])
    config = root / "accelerate.yaml"
    config.write_text(ACCELERATE_CONFIG)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config), "--multi_gpu"]
    launch += ["--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    launch += ["--main_process_ip", "127.0.0.1", "--main_process_port", str(_free_port())]
    _run([*launch, str(SCRIPT), str(double)])
    return {"single": single, "double": double}


def _load(directory: Path, name: str) -> tuple[dict[str, torch.Tensor], dict]:
    weights = torch.load(directory / f"{name}.pt", map_location="cpu", weights_only=True)
    return weights, json.loads((directory / f"{name}.json").read_text())


def test_two_ranks_trained_in_one_process_group(runs):
    for name in CASES:
        _, single = _load(runs["single"], name)
        _, double = _load(runs["double"], name)
        assert single["world_size"] == 1
        # without cpu=True accelerate ignores LOCAL_RANK on a GPU-less machine: two independent runs
        assert double["world_size"] == 2, double
        assert double["distributed_type"].endswith("MULTI_CPU"), double


@pytest.mark.parametrize("name", list(CASES))
def test_updated_weights_match_one_process(runs, name):
    initial = torch.load(runs["single"] / "initial.pt", map_location="cpu", weights_only=True)
    single, _ = _load(runs["single"], name)
    double, _ = _load(runs["double"], name)
    assert single.keys() == double.keys() == initial.keys()
    # the update moved the weights (by about the learning rate per AdamW step), so a mismatch can show
    moved = max(float((single[key] - initial[key]).abs().max()) for key in single)
    assert moved > 0.5 * LEARNING_RATE
    loose, total = 0, 0
    for key in single:
        if name in ADAMW_CASES:
            # AdamW's first steps are lr * g / (|g| + eps): for the few coordinates whose gradient is
            # rounding noise of size ~eps (k_proj.bias, whose exact gradient is 0 under softmax's shift
            # invariance) float32 summation order shows. Bound them at 2% of one step; all but a handful
            # of the 9.8M coordinates must agree to the tight tolerance.
            torch.testing.assert_close(double[key], single[key], atol=2e-5, rtol=1e-5, msg=lambda m, k=key: f"{k}: {m}")
            loose += int((~torch.isclose(double[key], single[key], atol=1e-6, rtol=1e-5)).sum())
            total += single[key].numel()
        else:  # SGD: the step is the gradient itself
            torch.testing.assert_close(double[key], single[key], atol=1e-6, rtol=1e-5, msg=lambda m, k=key: f"{k}: {m}")
    assert loose <= 1e-5 * total, f"{loose} of {total} coordinates differ by more than 1e-6"


@pytest.mark.parametrize("name", list(CASES))
def test_global_metrics_match_one_process(runs, name):
    _, single = _load(runs["single"], name)
    _, double = _load(runs["double"], name)
    assert single["metrics"].keys() == double["metrics"].keys()
    for key in ("loss", "kl", "clip_fraction", "ratio_mean", "mismatch_kl_k1", "mismatch_abs_logp", "grad_norm"):
        assert double["metrics"][key] == pytest.approx(single["metrics"][key], rel=1e-5, abs=1e-7), key
    assert double["metrics"]["tokens_trained"] == single["metrics"]["tokens_trained"]
    assert double["metrics"]["learning_rate"] == single["metrics"]["learning_rate"]
    if name == "multi_update":  # later updates are off-policy: the comparison covers clipping and the KL
        assert single["metrics"]["clip_fraction"] > 0
        assert single["metrics"]["kl"] > 0

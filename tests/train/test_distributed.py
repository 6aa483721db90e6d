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
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from tests.train.distributed_update import CASES, LEARNING_RATE, LORA_CASES  # noqa: E402
from tests.train.launching import launch_prefix, run  # noqa: E402

SCRIPT = Path(__file__).with_name("distributed_update.py")
ADAMW_CASES = [name for name, (optimizer, _, _) in CASES.items() if optimizer == "adamw"]

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with the gloo backend is not available",
)


def single_process_run(tmp_path_factory) -> Path:
    """Every case in one process, the reference of the DDP and ZeRO tests: run once per pytest session."""
    out = tmp_path_factory.getbasetemp() / "distributed_single"
    if not (out / "done").exists():
        run([sys.executable, str(SCRIPT), str(out)])
        (out / "done").write_text("")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    double = tmp_path_factory.mktemp("distributed") / "two_ranks"
    # the shipped DDP config (8 GPUs, bf16) with the CPU overrides of tests/train/launching.py
    run([*launch_prefix("ddp.yaml"), str(SCRIPT), str(double)])
    return {"single": single_process_run(tmp_path_factory), "double": double}


def _load(directory: Path, name: str) -> tuple[dict[str, torch.Tensor], dict]:
    weights = torch.load(directory / f"{name}.pt", map_location="cpu", weights_only=True)
    return weights, json.loads((directory / f"{name}.json").read_text())


def assert_weights_match(single_dir: Path, double_dir: Path, name: str, *, noise_atol: float) -> None:
    """The weights a 2-rank run trained equal the one-process run's (``noise_atol``: see the callers)."""
    initial = torch.load(single_dir / f"initial_{name}.pt", map_location="cpu", weights_only=True)
    single, _ = _load(single_dir, name)
    double, _ = _load(double_dir, name)
    assert single.keys() == double.keys() == initial.keys()
    # the update moved the weights (by about the learning rate per AdamW step), so a mismatch can show
    moved = max(float((single[key] - initial[key]).abs().max()) for key in single)
    assert moved > 0.5 * LEARNING_RATE
    loose, total = 0, 0
    for key in single:
        if name in ADAMW_CASES:
            # AdamW's first steps are lr * g / (|g| + eps): for the few coordinates whose gradient is
            # rounding noise of size ~eps (k_proj.bias, whose exact gradient is 0 under softmax's shift
            # invariance) float32 summation order shows, up to noise_atol; all but a handful of the 9.8M
            # coordinates must agree to the tight tolerance.
            torch.testing.assert_close(
                double[key], single[key], atol=noise_atol, rtol=1e-5, msg=lambda m, k=key: f"{k}: {m}"
            )
            loose += int((~torch.isclose(double[key], single[key], atol=1e-6, rtol=1e-5)).sum())
            total += single[key].numel()
        else:  # SGD: the step is the gradient itself
            torch.testing.assert_close(double[key], single[key], atol=1e-6, rtol=1e-5, msg=lambda m, k=key: f"{k}: {m}")
    assert loose <= 1e-5 * total, f"{loose} of {total} coordinates differ by more than 1e-6"


def assert_metrics_match(single_dir: Path, double_dir: Path, name: str) -> None:
    _, single = _load(single_dir, name)
    _, double = _load(double_dir, name)
    assert single["world_size"] == 1 and double["world_size"] == 2, double
    metrics = set(double["metrics"]) - {"engine_steps"}  # DeepSpeed's own step counter, checked by its test
    assert single["metrics"].keys() == metrics
    for key in ("loss", "kl", "clip_fraction", "ratio_mean", "mismatch_kl_k1", "mismatch_abs_logp", "grad_norm"):
        assert double["metrics"][key] == pytest.approx(single["metrics"][key], rel=1e-5, abs=1e-7), key
    assert double["metrics"]["tokens_trained"] == single["metrics"]["tokens_trained"]
    assert double["metrics"]["learning_rate"] == single["metrics"]["learning_rate"]
    if name == "multi_update":  # later updates are off-policy: the comparison covers clipping and the KL
        assert single["metrics"]["clip_fraction"] > 0
        assert single["metrics"]["kl"] > 0
    if name in LORA_CASES:  # the adapter-free reference equals the policy before the first step only
        assert single["metrics"]["kl"] > 0


def test_two_ranks_trained_in_one_process_group(runs):
    for name in CASES:
        _, double = _load(runs["double"], name)
        # without cpu=True accelerate ignores LOCAL_RANK on a GPU-less machine: two independent runs
        assert double["world_size"] == 2, double
        assert double["distributed_type"].endswith("MULTI_CPU") and double["zero_stage"] is None, double


@pytest.mark.parametrize("name", list(CASES))
def test_updated_weights_match_one_process(runs, name):
    # DDP all-reduces whole buckets in fp32: the noise coordinates stay within 2% of one step (2e-5)
    assert_weights_match(runs["single"], runs["double"], name, noise_atol=2e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_global_metrics_match_one_process(runs, name):
    assert_metrics_match(runs["single"], runs["double"], name)

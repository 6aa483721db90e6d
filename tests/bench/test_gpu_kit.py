"""bench/gpu: the GPU kit's CPU smoke (the same checks and JSON at tiny shapes), its arithmetic, its failure
handling and the carry builder's checks. The smoke is what keeps the kit from rotting between GPU runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "bench" / "gpu"
sys.path.insert(0, str(KIT))

import checks  # noqa: E402
import common  # noqa: E402
import kit  # noqa: E402
import pack  # noqa: E402

from agemem.rollouts.config import PolicyConfig  # noqa: E402
from agemem.train.model_size import resolve_model_dims  # noqa: E402


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    """``python bench/gpu/kit.py --cpu-smoke``, as .ci/run runs it (through these tests: ``-m gpukit``)."""
    out = tmp_path_factory.mktemp("smoke")
    done = subprocess.run(
        [sys.executable, str(KIT / "kit.py"), "--cpu-smoke", "--out", str(out), "--work", str(out / "work")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    report = json.loads((out / "gpu_cpu-smoke.json").read_text())
    return {"code": done.returncode, "stdout": done.stdout, "report": report, "out": out}


def _deepspeed_expected() -> bool:
    if importlib.util.find_spec("deepspeed") is not None:
        return True
    if os.environ.get("AGEMEM_REQUIRE_DEEPSPEED") == "1":
        pytest.fail("AGEMEM_REQUIRE_DEEPSPEED=1 but deepspeed is not installed")
    return False


@pytest.mark.gpukit
def test_smoke_runs_every_check_and_prints_the_table_last(smoke):
    checks_run = smoke["report"]["checks"]
    assert list(checks_run) == list(checks.CHECKS)
    failed = {name: r.get("error") for name, r in checks_run.items() if r["status"] != "ok"}
    if not _deepspeed_expected():
        failed.pop("zero2_1.5b", None)
    assert not failed, failed
    lines = smoke["stdout"].strip().splitlines()
    assert lines[-1].startswith("[kit] ") and lines[-1].endswith(" s")
    header = next(i for i, line in enumerate(lines) if line.startswith("check "))
    assert [line.split()[0] for line in lines[header + 1 : -1]] == list(checks.CHECKS)
    assert (smoke["out"] / "gpu_kit.log").stat().st_size > 0


@pytest.mark.gpukit
def test_smoke_train_check_is_agemem_train_at_the_planned_shape(smoke):
    train = smoke["report"]["checks"]["train"]
    scale = common.CPU_SMOKE
    assert len(train["steps"]) == scale.train_steps
    assert "policy.init=random" in train["overrides"] and "rollout.rollouts_per_task=4" in train["overrides"]
    for row in train["steps"]:
        parts = row["rollout_s"] + row["score_s"] + row["update_s"] + row["sync_s"]
        assert 0 < parts <= row["step_s"]
        assert row["update_tokens_per_s"] == pytest.approx(row["tokens_forwarded"] / row["update_s"], rel=1e-6)
        # MFU is the update's FLOP rate over the bf16 matmul rate this run measured; on a CPU an fp32 update may beat
        # that bf16 rate (and a shared machine moves both), so only the formula is checked here, not MFU < 1
        peak = smoke["report"]["checks"]["matmul"]["bf16_tflops"]
        assert row["update_mfu"] == pytest.approx(row["update_tflops"] / peak, rel=1e-6) and row["update_mfu"] > 0
        assert row["gpu_peak_gib"] == {}  # no CUDA: no GPU keys, never zeros
    assert train["gpu_reserved_gib"] == {}
    # the 0.5B config shrunk: the real vocabulary, tied head and biases at the smoke's width and depth
    dims = resolve_model_dims(PolicyConfig(model=str(smoke["out"] / "work" / "models" / checks.TRAIN_MODEL)))
    assert (dims.vocab_size, dims.hidden_size, dims.num_layers) == (151936, 64, 2)


@pytest.mark.gpukit
def test_smoke_memory_checks_run_the_precision_they_name(smoke):
    run = smoke["report"]["checks"]
    full, lora = run["update_full_1.5b"], run["update_lora_7b"]
    assert full["precision"]["master"] == "fp32 parameters" and full["precision"]["compute"] == "bf16"
    assert lora["precision"] == {
        "load_dtype": "bfloat16",
        "frozen_dtype": "bfloat16",
        "compute": "bf16",
        "master": "fp32 LoRA adapters",
    }
    assert lora["parameters"]["trainable"] < lora["parameters"]["total"] / 100
    for result in (full, lora):
        assert len(result["update_s"]) == common.CPU_SMOKE.update_repeats
        assert math.isfinite(result["loss"]) and result["grad_norm"] > 0
        assert result["tokens"] == common.CPU_SMOKE.update_samples * (
            common.CPU_SMOKE.update_prompt_tokens + common.CPU_SMOKE.update_completion_tokens
        )
        assert set(result["plan"]["phases_gib"]) == {"rollout", "backward", "step"}
    if run["zero2_1.5b"]["status"] == "ok":
        zero2 = run["zero2_1.5b"]
        assert zero2["distributed"].endswith("DEEPSPEED") and zero2["precision"]["master"] == "DeepSpeed fp32 master"
        assert zero2["vs_plain_accelerate"] == pytest.approx(zero2["median_update_s"] / full["median_update_s"])
        # the same samples and initial weights: the same loss to the rounding of DeepSpeed's bf16 module
        assert zero2["loss"] == pytest.approx(full["loss"], rel=0.05, abs=1e-6)


@pytest.mark.gpukit
def test_smoke_logprob_gaps(smoke):
    gaps = smoke["report"]["checks"]["logprobs"]
    assert gaps["tokens"] == common.CPU_SMOKE.logprob_prompts * common.CPU_SMOKE.logprob_max_tokens
    assert gaps["engine_vs_fp32"]["max_abs"] < 1e-4  # the engine's fp32 log-probs are the trainer's
    for key in ("bf16_autocast_vs_fp32", "bf16_autocast_bf16_head_vs_fp32", "bf16_weights_vs_fp32"):
        assert 0 < gaps[key]["mean_abs"] <= gaps[key]["max_abs"] < 0.5
    # the fp32 head removes the logits' bf16 rounding: what is left is the decoder's autocast
    assert gaps["bf16_autocast_vs_fp32"]["mean_abs"] < gaps["bf16_autocast_bf16_head_vs_fp32"]["mean_abs"]
    cost = gaps["head_cost"]
    assert cost["positions"] == common.CPU_SMOKE.update_samples * common.CPU_SMOKE.update_completion_tokens
    for weight in ("float32", "bfloat16"):
        row = cost[f"qwen2.5-7b_{weight}_weight"]
        assert row["fp32_s"] > 0 and row["autocast_s"] > 0
        assert row["extra_s"] == pytest.approx(row["fp32_s"] - row["autocast_s"])


@pytest.mark.gpukit
def test_smoke_foreach_adamw_beside_fused(smoke):
    run = smoke["report"]["checks"]
    foreach, fused = run["update_full_1.5b_foreach"], run["update_full_1.5b"]
    assert "train.adamw_impl=foreach" in foreach["overrides"]
    assert foreach["fused_update_s"] == fused["median_update_s"]
    assert foreach["vs_fused"] == pytest.approx(foreach["median_update_s"] / fused["median_update_s"])
    # the same samples and initial weights: AdamW's kernels differ, its first update's loss cannot
    assert foreach["loss"] == pytest.approx(fused["loss"], rel=1e-4, abs=1e-6)


@pytest.mark.gpukit
def test_smoke_plan_check_compares_nothing_without_a_gpu(smoke):
    plan = smoke["report"]["checks"]["plan"]
    assert plan["phases_gib"]["rollout"] > plan["runtime_reserve_gib"]
    assert "reduce bucket" not in plan["components"]  # one process, plain accelerate: no DeepSpeed rows
    for phase in ("rollout", "update"):
        assert plan["compared"][phase]["tensors"]["ratio"] is None  # never a made-up measurement
    assert plan["compared"]["peak"]["device"]["ratio"] is None


def test_forward_flops_by_hand():
    dims = resolve_model_dims(PolicyConfig(model=str(KIT / "models" / "qwen2.5-0.5b-instruct")))
    # h 896, q 14 x 64 = 896, kv 2 x 64 = 128, i 4864, L 24, V 151936
    # weights per layer: 896*896 + 2*896*128 + 896*896 + 3*896*4864 = 802816 + 229376 + 802816 + 13074432 = 14909440
    # s = 10, c = 4: 24 * (2*14909440*10 + 2*896*10*11) + 2*896*151936*4 = 24*(298188800 + 197120) + 1089077248
    assert common.forward_flops(dims, 10, 4) == 24 * (298_188_800 + 197_120) + 1_089_077_248
    one = common.forward_flops(dims, 10, 4)
    assert common.update_flops(dims, [(10, 4)], reference=True, lora=False) == 4 * one  # fwd + 2 bwd + ref
    assert common.update_flops(dims, [(10, 4)] * 2, reference=False, lora=True) == 2 * 2 * one
    assert common.mfu(1e12, 2.0, 1e12) == 0.5 and common.mfu(1.0, 1.0, None) is None


def test_gpu_slugs_and_ratios():
    assert common.gpu_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert common.gpu_slug("NVIDIA H200") == "h200"
    assert common.gpu_slug("NVIDIA A100-SXM4-80GB") == "a100"
    assert common.gpu_slug("Some New Card") == "some-new-card"
    assert common.plan_ratio(11.6, 10.0) == {
        "planned_gib": 11.6,
        "measured_gib": 10.0,
        "ratio": 1.16,
        "within_15pct": False,
    }
    assert common.plan_ratio(11.4, 10.0)["within_15pct"] is True
    assert common.plan_ratio(5.0, None)["ratio"] is None


def test_a_check_over_its_budget_is_killed_and_the_rest_run(tmp_path):
    scale = dataclasses.replace(common.CPU_SMOKE, budgets_s={**common.CPU_SMOKE.budgets_s, "matmul": 0.01})
    report = kit.run_kit(scale, tmp_path / "out", tmp_path / "work", only=["matmul", "plan"])
    assert report["checks"]["matmul"]["status"] == "timeout"
    assert report["checks"]["plan"]["status"] == "ok"
    written = json.loads((tmp_path / "out" / "gpu_cpu-smoke.json").read_text())
    assert written["checks"]["matmul"]["error"].startswith("over its")


def test_a_result_written_before_a_hang_on_exit_is_kept(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    # a result already on disk when the budget runs out (the child is killed before it can even start)
    (results / "matmul.json").write_text(json.dumps({"status": "ok", "bf16_tflops": 1.0}))
    found = kit.run_check("matmul", common.CPU_SMOKE, tmp_path, results, tmp_path / "log", budget=0.01)
    assert found["status"] == "ok" and "hung on exit" in found["note"]


def test_a_check_that_raises_records_its_error(tmp_path, monkeypatch):
    def broken(scale, work, results):
        raise ValueError("no such layer")

    monkeypatch.setitem(checks.CHECKS, "matmul", broken)
    code = checks.main(["matmul", "--scale", "cpu-smoke", "--work", str(tmp_path), "--results", str(tmp_path)])
    result = json.loads((tmp_path / "matmul.json").read_text())
    assert code == 1 and result["status"] == "error" and result["error"] == "ValueError: no such layer"
    assert "broken" in result["traceback"]


def test_the_deadline_skips_what_cannot_start(tmp_path):
    scale = dataclasses.replace(common.CPU_SMOKE, deadline_s=1)
    report = kit.run_kit(scale, tmp_path, tmp_path / "work", only=["matmul"])
    assert report["checks"]["matmul"]["status"] == "skipped" and "budget" in report["checks"]["matmul"]["error"]


def test_a_stale_carry_is_refused_before_any_check(tmp_path, monkeypatch):
    (tmp_path / "carry").mkdir()
    (tmp_path / "carry" / "manifest.json").write_text(json.dumps({"source_hash": "0" * 64}))
    monkeypatch.setattr(kit, "CARRY", tmp_path / "carry")
    monkeypatch.setattr(kit, "REPO", tmp_path)  # as on the device: agemem imported from the carried wheel
    report = kit.run_kit(common.CPU_SMOKE, tmp_path, tmp_path / "work", only=["matmul"])
    assert report["checks"]["matmul"]["status"] == "skipped"
    assert "rerun `python bench/gpu/pack.py`" in report["checks"]["matmul"]["error"]
    # a carry built from these sources but with other pins is refused too
    (tmp_path / "carry" / "manifest.json").write_text(json.dumps({"source_hash": pack.source_hash(), "pins": []}))
    report = kit.run_kit(common.CPU_SMOKE, tmp_path, tmp_path / "work", only=["matmul"])
    assert "other pins" in report["checks"]["matmul"]["error"]


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")
    return path


def test_pack_names_what_the_device_would_lack(tmp_path):
    wheels = [
        _wheel(
            tmp_path,
            "alpha",
            "1.0",
            ["beta>=2", "torch>=2", "gamma; python_version < '3.10'", "delta; extra == 'docs'"],
        ),
        _wheel(tmp_path, "beta", "1.5", []),
        _wheel(tmp_path, "agemem", "0.1.0", ["wandb>=0.19", "epsilon"]),
    ]
    missing = pack.missing_requirements(wheels)
    # beta is carried but too old; torch is on the image; gamma and delta do not apply; wandb is left on purpose
    assert missing == [
        "alpha-1.0-py3-none-any.whl requires beta>=2 (carried: 1.5)",
        "agemem-0.1.0-py3-none-any.whl requires epsilon (carried: nothing)",
    ]


def test_pack_copies_the_encoder_without_its_weights(tmp_path):
    source = tmp_path / "encoder"
    (source / "1_Pooling").mkdir(parents=True)
    for name in ("config.json", "vocab.txt", "model.safetensors", "pytorch_model.bin", "README.md"):
        (source / name).write_text("x")
    (source / "1_Pooling" / "config.json").write_text("{}")
    copied = pack.copy_encoder_skeleton(source, tmp_path / "skeleton")
    assert copied == ["1_Pooling/config.json", "config.json", "vocab.txt"]


def test_source_hash_moves_with_any_source_file(tmp_path):
    for folder in pack.SOURCE_FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "module.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    before = pack.source_hash(tmp_path)
    (tmp_path / "agemem" / "__pycache__").mkdir()
    (tmp_path / "agemem" / "__pycache__" / "module.pyc").write_bytes(b"\0")
    assert pack.source_hash(tmp_path) == before  # caches do not count
    (tmp_path / "train" / "module.py").write_text("x = 2\n")
    assert pack.source_hash(tmp_path) != before

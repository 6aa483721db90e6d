"""The GPU kit: the main job measured on one GPU in one prepared command, or its CPU smoke.

    bash bench/gpu/run.sh                                   # on the GPU machine (installs .gpukit, then this)
    python bench/gpu/kit.py --cpu-smoke --out DIR           # here and in CI: tiny shapes, same code, same JSON

Runs each check of ``checks.py`` in a process of its own with its own time limit (a failed or timed-out check
records its error and the rest run), streams their output to ``OUT/gpu_kit.log``, prints a short table last and
writes ``OUT/gpu_<gpu>.json`` (``gpu_cpu-smoke.json`` for the smoke). docs/gpu.md says how to read it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checks import CHECKS, ZERO2
from common import CARRY, CPU_SMOKE, GPU, REPO, Scale, gpu_slug, nvidia_smi, package_versions

KIT_VERSION = 1
CHECKS_PY = Path(__file__).resolve().parent / "checks.py"


def check_command(name: str, scale: Scale, work: Path, results: Path) -> list[str]:
    """The child process of one check; ZeRO-2 goes through ``accelerate launch`` with the shipped config."""
    args = [str(CHECKS_PY), name, "--scale", scale.name, "--work", str(work), "--results", str(results)]
    if name.startswith("zero2"):
        # the same launch on CPU (gloo) and GPU (NCCL); the run's train.mixed_precision=bf16 sets DeepSpeed's bf16
        launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ZERO2)]
        return [*launch, "--num_processes", "1", "--num_machines", "1", *args]
    return [sys.executable, *args]


def run_check(name: str, scale: Scale, work: Path, results: Path, log: Path, budget: float) -> dict[str, Any]:
    """Run one check within ``budget`` seconds; its result, or why there is none."""
    command = check_command(name, scale, work, results)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if scale.shrink:  # a GPU on a developer's machine must not change the smoke
        env["CUDA_VISIBLE_DEVICES"] = ""
    with log.open("a") as sink:
        sink.write(f"\n===== {name}: {' '.join(command)}\n")
        sink.flush()
        child = subprocess.Popen(
            command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = child.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # the whole group: accelerate launch's child too
            child.wait()
            code = None
    wall = time.perf_counter() - start
    path = results / f"{name}.json"
    if code is None and path.is_file():  # it finished its work and then hung on exit (NCCL or DeepSpeed teardown)
        return {
            **json.loads(path.read_text()),
            "wall_s": wall,
            "note": f"killed at its {budget:.0f}-s budget after writing its result: it hung on exit",
        }
    if code is None:
        return {"status": "timeout", "error": f"over its {budget:.0f}-s budget", "wall_s": wall}
    if not path.is_file():
        return {"status": "error", "error": f"exited {code} without a result; see gpu_kit.log", "wall_s": wall}
    return {**json.loads(path.read_text()), "wall_s": wall}


def carried_problem() -> str | None:
    """Why the agemem the checks would import cannot be trusted: a carried wheel built from other sources than
    this tree's (None: fine, or agemem comes from this checkout, as in an editable install)."""
    import importlib.util

    manifest = CARRY / "manifest.json"
    spec = importlib.util.find_spec("agemem")  # finds without importing: no torch in this process
    if not manifest.is_file() or spec is None or REPO in Path(spec.origin or "").resolve().parents:
        return None
    from pack import pins, source_hash

    built = json.loads(manifest.read_text())
    if built.get("pins") != pins():
        return (
            f"{CARRY.name}/ was built with other pins than bench/gpu/pack.py's: rerun `python bench/gpu/pack.py` here "
            "before the device call"
        )
    if built["source_hash"] != source_hash():
        return (
            f"{CARRY.name}/ holds an agemem wheel built from other sources than this tree: rerun "
            "`python bench/gpu/pack.py` here before the device call"
        )
    return None


def headline(name: str, result: dict[str, Any]) -> str:
    """One line of the table for a check's result."""
    if result.get("status") != "ok":
        return str(result.get("error", ""))[:110]

    def pct(value: float | None) -> str:
        return f"{100 * value:.1f}%" if value is not None else "n/a"

    def ratio(compared: dict[str, Any]) -> str:
        value = compared.get("ratio")
        return f"{value:.2f}" if value is not None else "n/a"

    if name == "matmul":
        return f"bf16 {result['bf16_tflops']:.1f} TFLOP/s ({result['n']}^3 on {result['on']})"
    if name == "train":
        m = result["median_after_first"]
        peak = max(result["gpu_reserved_gib"].values(), default=None)
        return (
            f"step {m['step_s']:.2f}s = rollout {m['rollout_s']:.2f} + score {m['score_s']:.2f} + update "
            f"{m['update_s']:.2f} + sync {m['sync_s']:.2f}; gen {m['generated_tokens_per_s']:.0f} tok/s; update "
            f"{m['update_tokens_per_s']:.0f} tok/s, MFU {pct(m['update_mfu'])}"
            + (f"; peak {peak:.1f} GiB" if peak is not None else "")
        )
    if name == "plan":
        c = result["compared"]
        return (
            f"plan/measured: peak {ratio(c['peak']['device'])} (device), {ratio(c['peak']['tensors'])} (tensors); "
            f"tensors per phase: rollout {ratio(c['rollout']['tensors'])}, update {ratio(c['update']['tensors'])}"
        )
    if name == "logprobs":
        a, w, e = result["bf16_autocast_vs_fp32"], result["bf16_weights_vs_fp32"], result["engine_vs_fp32"]
        b = result["bf16_autocast_bf16_head_vs_fp32"]
        cost = result["head_cost"].get("qwen2.5-7b_bfloat16_weight", {})
        return (
            f"|dlogp| vs fp32: bf16 autocast mean {a['mean_abs']:.2e} max {a['max_abs']:.2e} (bf16 head: mean "
            f"{b['mean_abs']:.2e}); bf16 weights mean {w['mean_abs']:.2e}; engine max {e['max_abs']:.1e}; "
            f"fp32 head +{cost.get('extra_tf32_s', float('nan')):.3f}s/update in TF32, "
            f"+{cost.get('extra_s', float('nan')):.3f}s exact (7B bf16 head)"
        )
    line = (
        f"update {result['median_update_s']:.2f}s, {result['update_tokens_per_s']:.0f} tok/s, "
        f"MFU {pct(result['update_mfu'])}"
    )
    peak = result.get("compared", {}).get("peak", {}).get("device", {})
    if peak.get("measured_gib") is not None:
        line += f"; peak {peak['measured_gib']:.1f} GiB, plan/measured {ratio(peak)}"
    if result.get("vs_plain_accelerate") is not None:
        line += f"; {result['vs_plain_accelerate']:.2f}x plain accelerate"
    if result.get("vs_fused") is not None:
        line += f"; {result['vs_fused']:.2f}x fused AdamW's time"
    if result.get("step_gib_over_fused") is not None:
        line += f", step +{result['step_gib_over_fused']:.2f} GiB"
    return line


def write_report(report: dict[str, Any], target: Path, began: float) -> None:
    report["wall_s"] = time.perf_counter() - began
    device = report["checks"].get("matmul", {}).get("device")
    if device:
        report["device"] = device
    target.write_text(json.dumps(report, indent=2, default=str) + "\n")


def table(checks: dict[str, dict[str, Any]]) -> str:
    rows = [(name, r.get("status", "?"), f"{r.get('wall_s', 0):.0f}", headline(name, r)) for name, r in checks.items()]
    widths = [max(len(row[i]) for row in [("check", "status", "s", ""), *rows]) for i in range(3)]
    lines = [f"{'check':<{widths[0]}}  {'status':<{widths[1]}}  {'s':>{widths[2]}}  result"]
    lines += [f"{n:<{widths[0]}}  {s:<{widths[1]}}  {w:>{widths[2]}}  {h}" for n, s, w, h in rows]
    return "\n".join(lines)


def run_kit(scale: Scale, out: Path, work: Path, only: list[str] | None = None) -> dict[str, Any]:
    """Every check (or ``only``) in order within the scale's deadline; returns and writes the report."""
    out.mkdir(parents=True, exist_ok=True)
    results = work / "results"
    results.mkdir(parents=True, exist_ok=True)
    log = out / "gpu_kit.log"
    log.write_text("")
    # from nvidia-smi: a CUDA context in this process would count in every check's memory readings
    name = nvidia_smi("name") if not scale.shrink else None
    slug = gpu_slug(name) if name else scale.name
    report: dict[str, Any] = {
        "kit_version": KIT_VERSION,
        "scale": scale.name,
        "gpu": name,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "packages": package_versions(),
        "budgets_s": scale.budgets_s,
        "deadline_s": scale.deadline_s,
        "checks": {},
    }
    began = time.perf_counter()
    target = out / f"gpu_{slug}.json"
    problem = carried_problem()
    for check in CHECKS:
        if only and check not in only:
            continue
        budget = scale.budgets_s[check]
        left = scale.deadline_s - (time.perf_counter() - began)
        if problem is not None:
            result = {"status": "skipped", "error": problem, "wall_s": 0.0}
        elif left < budget:
            result = {
                "status": "skipped",
                "error": f"{left:.0f} s left of the kit's {scale.deadline_s} s, under this check's {budget} s budget",
                "wall_s": 0.0,
            }
        else:
            print(f"[kit] {check}: running (budget {budget} s, {left:.0f} s left)", flush=True)
            result = run_check(check, scale, work, results, log, budget)
        print(f"[kit] {check}: {result['status']} in {result['wall_s']:.0f} s", flush=True)
        report["checks"][check] = result
        write_report(report, target, began)  # after every check: a command killed later still returns these
    write_report(report, target, began)
    print(table(report["checks"]))
    print(f"[kit] {target} in {report['wall_s']:.0f} s")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU: the same checks and JSON")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("OUT") or REPO / "bench" / "results"),
        help="where gpu_<gpu>.json and gpu_kit.log go (default: $OUT, else bench/results)",
    )
    parser.add_argument("--work", type=Path, help="scratch folder for runs and checkpoints (default: a temporary one)")
    parser.add_argument("--only", help="comma-separated checks to run, e.g. matmul,train (default: all)")
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    unknown = [name for name in only or [] if name not in CHECKS]
    if unknown:
        parser.error(f"--only {','.join(unknown)}: not a check; choose from {', '.join(CHECKS)}")
    scale = CPU_SMOKE if args.cpu_smoke else GPU
    with tempfile.TemporaryDirectory(prefix="agemem-gpu-kit-") as scratch:
        report = run_kit(scale, args.out, args.work or Path(scratch), only)
    return 0 if all(r["status"] == "ok" for r in report["checks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

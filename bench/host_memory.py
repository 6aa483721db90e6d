"""Host memory of `agemem learn`: peak resident memory per stage, with and without returning freed memory.

glibc keeps the heap pages a CPU training process frees resident (agemem/core/hostmem.py explains why);
``train.release_memory_s`` returns them from a background thread every that many seconds. Each setting runs
the same small `agemem learn` seed (``--overrides`` shrink the shipped recipe; the stages are the real ones)
in its own process, one after another, with the run directory reset before each: the per-stage peak
(``result.json: peak_resident_gib``, VmHWM reset at each stage), the stage times and the process's peak
(``ru_maxrss`` of the child) are reported, settings rotated over ``--repeats``. Numbers:
docs/training.md#host-memory.

    python bench/host_memory.py                              # release every 0 (never), 10 and 2 seconds
    python bench/host_memory.py --settings 0 10 --repeats 2
    OMP_NUM_THREADS=1 python bench/host_memory.py            # beside another job on a 2-core machine
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

SMALL = [
    "learn.sft_tasks=300",
    "learn.sft_drills=300",
    "learn.sft_answer_copies=2000",
    "learn.copy_steps=200",
    "learn.eval_tasks=20",
    "max_steps=4",
    "logging.progress=false",
]
"""the shipped recipe at about a fifth of its size: a few minutes a run on 2 cores."""
STAGES = ("tokenizer", "demonstrate", "warm_start", "eval_warm_start", "grpo", "eval_grpo")


def run_once(config: str, overrides: list[str], release_s: float, out: Path) -> dict[str, Any]:
    """One `agemem learn` seed in a child process; its per-stage peaks and times, and its whole peak."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "agemem", "learn", "--config", config, f"output_dir={out}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([*command, *overrides, f"train.release_memory_s={release_s}"], check=True, capture_output=True)
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child's so far, in KiB
    result = json.loads((out / "seed_0" / "result.json").read_text())
    return {
        "release_memory_s": release_s,
        "peak_gib": result["peak_resident_gib"],
        "seconds": {stage: result["timings"][f"{stage}_s"] for stage in STAGES},
        # None: an earlier child peaked higher (RUSAGE_CHILDREN keeps the largest)
        "process_peak_gib": child_peak / (1 << 20) if child_peak > before else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/learn_cpu.yaml")
    parser.add_argument("--settings", type=float, nargs="+", default=[0, 10, 2], help="release_memory_s values")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--overrides", nargs="*", default=SMALL, help="config overrides of every run")
    parser.add_argument("--json", default="bench/results/host_memory.json")
    args = parser.parse_args()

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            settings = args.settings[repeat % len(args.settings) :] + args.settings[: repeat % len(args.settings)]
            for release_s in settings:
                runs.append(run_once(args.config, args.overrides, release_s, Path(tmp) / "run"))
    summary = {}
    for release_s in args.settings:
        mine = [r for r in runs if r["release_memory_s"] == release_s]
        summary[str(release_s)] = {
            "peak_gib": {s: statistics.median(r["peak_gib"][s] for r in mine) for s in STAGES},
            "seconds": {s: statistics.median(r["seconds"][s] for r in mine) for s in STAGES},
        }
    baseline = summary[str(args.settings[0])]
    table = Table(title="agemem learn (small seed): peak resident GiB and seconds per stage")
    table.add_column("stage")
    for release_s in args.settings:
        table.add_column(f"release {release_s:g} s: GiB", justify="right")
        table.add_column("s", justify="right")
    for stage in STAGES:
        cells = []
        for release_s in args.settings:
            row = summary[str(release_s)]
            cells += [f"{row['peak_gib'][stage]:.2f}", f"{row['seconds'][stage]:.0f}"]
        table.add_row(stage, *cells)
    for release_s in args.settings[1:]:
        row = summary[str(release_s)]
        time_ratio = sum(row["seconds"].values()) / sum(baseline["seconds"].values())
        peak_ratio = max(row["peak_gib"].values()) / max(baseline["peak_gib"].values())
        summary[str(release_s)]["vs_first"] = {"time_ratio": time_ratio, "peak_ratio": peak_ratio}
        table.add_row(f"vs release {args.settings[0]:g} s", f"time x{time_ratio:.2f}", "", f"peak x{peak_ratio:.2f}")
    Console().print(table)
    report = {
        "what": "per-stage peak resident memory and time of a small agemem learn seed, by train.release_memory_s",
        "overrides": args.overrides,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "glibc": platform.libc_ver()[1]},
        "summary": summary,
        "runs": runs,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()

"""The README's first command as a new user meets it: how long until training starts, and what the console says.

Runs ``agemem learn --config configs/learn_first.yaml`` (the README's first command, as written: GRPO from the bundled
warm start between two held-out evaluations) in fresh working folders, each a separate process, and measures the
wall-clock time, the GRPO steps' own time (``time/step_s`` of ``metrics.jsonl``), the rest (setup, the two
evaluations, the report) and the held-out table it ends with. Three runs:

* ``before``   — another installation of agemem (``--before-path``: a folder with that version's package, put first
  on PYTHONPATH), e.g. the commit before a change;
* ``cold``     — this checkout, an empty user cache (``XDG_CACHE_HOME``): what a first run costs;
* ``warm``     — this checkout again, the cache the cold run left: what every later run costs.

Prints a table and writes ``bench/results/first_run.json`` with each run's console (stderr and stdout, progress
bars' carriage returns resolved to their last state) so a page can quote what a user sees.

    python bench/first_run.py                                        # cold and warm
    python bench/first_run.py --before-path /tmp/before_site         # and an older version beside them
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["agemem", "learn", "--config", "configs/learn_first.yaml"]
RUN_FOLDER = Path("runs") / "first"  # configs/learn_first.yaml's output_dir
METRICS = RUN_FOLDER / "seed_0" / "grpo" / "metrics.jsonl"


def console_text(raw: str) -> list[str]:
    """The lines as a terminal shows them at the end: each carriage-return-updated bar in its last state."""
    return [line.rsplit("\r", 1)[-1] for line in raw.replace("\r\n", "\n").split("\n") if line.rsplit("\r", 1)[-1]]


def left_behind(work: Path) -> list[str]:
    """Files the command wrote into the working folder outside its run folder (runs/) and the copied configs/."""
    kept = (work / "configs", work / "runs")
    return sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file() and not p.is_relative_to(kept[0])
                  and not p.is_relative_to(kept[1]))  # fmt: skip


def run_once(name: str, *, cache: Path, before_path: str | None, configs: Path = ROOT / "configs") -> dict:
    """One run of the command in a fresh working folder (``configs`` copied in, as in a clone)."""
    work = Path(tempfile.mkdtemp(prefix=f"first_run_{name}_"))
    shutil.copytree(configs, work / "configs")
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if before_path:
        env["PYTHONPATH"] = before_path + os.pathsep + env.get("PYTHONPATH", "")
    argv = [sys.executable, "-m", "agemem", *COMMAND[1:]]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
    steps = [json.loads(line) for line in (work / METRICS).read_text().splitlines()]
    step_s = sum(step["time/step_s"] for step in steps)
    report = json.loads((work / RUN_FOLDER / "learning.json").read_text())
    lines = console_text(done.stderr) + console_text(done.stdout)
    result = {
        "run": name,
        "wall_s": round(wall, 1),
        "steps": len(steps),
        "steps_s": round(step_s, 1),
        "outside_steps_s": round(wall - step_s, 1),
        "held_out": {"before": report["before"], "after": report["after"], "em_gain": report["em_improvement_pooled"]},
        "console_lines": len(lines),
        "warnings": sum("Warning" in line or "WARNING" in line for line in lines),
        "console": lines,
        "repository_files": left_behind(work),
    }
    shutil.rmtree(work, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-path", help="a folder holding another agemem version's package (PYTHONPATH)")
    parser.add_argument("--before-configs", help="that version's configs/ folder (default: this checkout's)")
    parser.add_argument("--no-warm", action="store_true", help="only the cold run (the command takes minutes)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "first_run.json"))
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="first_run_cache_"))
    runs = []
    if args.before_path:
        before_cache = Path(tempfile.mkdtemp(prefix="first_run_cache_before_"))
        configs = Path(args.before_configs) if args.before_configs else ROOT / "configs"
        runs.append(run_once("before", cache=before_cache, before_path=args.before_path, configs=configs))
    runs.append(run_once("cold", cache=cache, before_path=None))
    if not args.no_warm:
        runs.append(run_once("warm", cache=cache, before_path=None))
    table = Table(
        title=" ".join(COMMAND) + f" ({runs[-1]['steps']} steps, 2 CPU cores, a fresh process and folder each)"
    )
    for column in (
        "run",
        "wall s",
        "steps s",
        "outside the steps s",
        "held-out EM",
        "console lines",
        "warning lines",
        "files left in the folder",
    ):
        table.add_column(column, justify="left" if column == "run" else "right")
    for run in runs:
        table.add_row(
            run["run"], f"{run['wall_s']:.1f}", f"{run['steps_s']:.1f}", f"{run['outside_steps_s']:.1f}",
            f"{run['held_out']['before']['em']:.2f} -> {run['held_out']['after']['em']:.2f}",
            str(run["console_lines"]), str(run["warnings"]), ", ".join(run["repository_files"]) or "none",
        )  # fmt: skip
    Console().print(table)
    record = {
        "command": " ".join(COMMAND),
        "what": "the README's first command in fresh folders: before = --before-path's version, cold = this checkout "
        "with an empty user cache, warm = again with the cache the cold run left; outside the steps = setup, "
        "the two held-out evaluations and the report (wall minus the sum of time/step_s)",
        "before_path": args.before_path,
        "machine": f"{os.cpu_count()} CPU cores",
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

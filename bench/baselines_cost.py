"""What each memory-system baseline costs per task, beside AgeMem and No-Memory, on this machine.

Runs ``agemem compare`` (resumable: a second run with the same ``--out`` plays nothing) over HotpotQA and ALFWorld
with one model under no_memory, agemem, mem0, mem0g, amem and langmem, then prints per benchmark and variant the
LLM calls, the memory system's share, tokens and seconds per task, and writes them to JSON. With the default tiny
random model the scores mean nothing; the calls, tokens and seconds are what the harness and each library spend
(Mem0's and LangMem's calls are lower bounds: nothing a random model writes parses, so no update calls follow).
Numbers: docs/baselines.md#cost.

    python bench/baselines_cost.py                                   # ~25 min on 2 cores
    python bench/baselines_cost.py --model openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 --limit 50 \
        --out runs/bench/baselines_7b --json runs/bench/baselines_7b.json engine.openai.api=chat
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

from rich.console import Console
from rich.table import Table

VARIANTS = ("no_memory", "agemem", "mem0", "mem0g", "amem", "langmem")
DEFAULTS = (
    "alfworld.max_env_steps=10",
    "sampling.max_tokens=48",
    "eval.memory_system.max_tokens=48",
    "env.summarizer.backend=extractive",
    "logging.progress=false",
)
"""the tiny model's settings: short replies and games keep the run near 25 minutes on 2 cores."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-random-qwen2")
    parser.add_argument("--limit", type=int, default=6, help="questions and games per benchmark")
    parser.add_argument("--alfworld-data", default=os.environ.get("ALFWORLD_DATA", "tests/data/alfworld"))
    parser.add_argument("--out", default="runs/bench/baselines_cost")
    parser.add_argument("--json", default="bench/results/baselines_tiny_cpu.json")
    parser.add_argument("overrides", nargs="*", help="more dotted config overrides")
    args = parser.parse_args()

    from agemem.entrypoints.cli import main as agemem

    overrides = [*DEFAULTS, f"alfworld.data_dir={args.alfworld_data}", *args.overrides]
    command = ["compare", "--benchmark", "hotpotqa", "--benchmark", "alfworld", "--model", args.model]
    command += [arg for variant in VARIANTS for arg in ("--variant", variant)]
    command += ["--limit", str(args.limit), "--out", args.out, *overrides]
    if agemem(command) != 0:
        raise SystemExit("agemem compare failed")
    comparison = json.loads((Path(args.out) / "comparison.json").read_text())
    rows = [
        {
            "method": row["method"],
            "variant": row["variant"],
            "scores": row["values"],
            "cost": row["cost"],
        }
        for row in comparison["rows"]
    ]
    report = {
        "what": "LLM calls, tokens and seconds per task of each memory-system baseline beside AgeMem and No-Memory",
        "command": "agemem " + " ".join(command),
        "model": args.model,
        "items_per_benchmark": args.limit,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "columns": comparison["columns"],
        "rows": rows,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")

    table = Table(title=f"cost per task ({args.model}, {args.limit} items per benchmark)")
    for header in ("benchmark", "method", "LLM calls", "memory calls", "tokens", "memory s", "s/task"):
        table.add_column(header, justify="left" if header in ("benchmark", "method") else "right")
    for column in comparison["columns"]:
        name = column["name"]
        for row in rows:
            cost = dict(row["cost"]["llm"].get(name) or {})
            timing = row["cost"]["timing"].get(name)
            cost["s_per_task"] = timing["wall_s"] / timing["played"] if timing else None
            table.add_row(
                name,
                row["method"],
                _cell(cost.get("llm_calls"), "{:.1f}"),
                _cell(cost.get("memory_calls"), "{:.1f}"),
                _cell(cost.get("tokens"), "{:.0f}"),
                _cell(cost.get("memory_s"), "{:.2f}"),
                _cell(cost.get("s_per_task"), "{:.2f}"),
            )
    Console().print(table)
    print(f"wrote {args.json}")


def _cell(value: float | None, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


if __name__ == "__main__":
    main()

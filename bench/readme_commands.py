"""Every command of the README, run as a user copies it (in README order, each a separate process), with the
tiny limits of ``tests/agemem/test_readme.py`` (whose slow test runs the same commands and asserts they succeed):
how long each takes on this machine, and which are not run here (GPU lines, missing extras).

The commands run in a scratch folder laid out like the repository root (links to ``configs/``, ``launch/``,
``tests/``, ``.ci/``) with an empty user cache (``XDG_CACHE_HOME``), so the first command pays for what a first run
pays (the distractor corpus encoding). Prints a table and writes ``bench/results/readme_commands.json``.

    python bench/readme_commands.py                   # about 12 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the README machinery lives with its test

from tests.agemem.test_readme import make_scratch, run_readme  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "readme_commands.json"))
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="readme_commands_"))
    os.environ["XDG_CACHE_HOME"] = str(scratch / "cache")  # an empty user cache: the first command pays for it
    work = make_scratch(scratch / "work")
    console = Console()
    rows = []
    for ran in run_readme(work):
        row = {
            "line": ran.command.line,
            "command": shlex.join(ran.command.words),
            "ran": None
            if ran.argv is None
            else shlex.join(ran.argv if ran.argv[0] == "python" else ["agemem", *ran.argv]),
            "skipped": ran.why_skipped or None,
            "seconds": None if ran.argv is None else round(ran.seconds, 1),
            "returncode": None if ran.argv is None else ran.returncode,
        }
        rows.append(row)
        shown = f"skipped: {ran.why_skipped}" if ran.argv is None else f"{ran.seconds:.0f} s, exit {ran.returncode}"
        console.print(f"README.md:{row['line']}  {row['command'][:90]}  [bold]{shown}[/bold]", soft_wrap=True)
    table = Table(title="README commands, tiny limits, one after another")
    for column in ("line", "command", "seconds", "exit"):
        table.add_column(column, justify="right" if column in ("line", "seconds", "exit") else "left")
    for row in rows:
        seconds = "–" if row["seconds"] is None else f"{row['seconds']:.0f}"
        table.add_row(
            str(row["line"]),
            row["command"][:100],
            seconds,
            str(row["returncode"] or 0) if row["ran"] else row["skipped"],
        )
    console.print(table)
    ran = [r for r in rows if r["ran"]]
    record = {
        "what": "every README command in README order with the tiny limits of tests/agemem/test_readme.py, each a "
        "separate process, empty user cache at the start; seconds are wall-clock",
        "machine": f"{os.cpu_count()} CPU cores, {platform.system()}",
        "total_s": round(sum(r["seconds"] for r in ran), 1),
        "failed": [r["command"] for r in ran if r["returncode"] != 0],
        "commands": rows,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    console.print(f"total {record['total_s']:.0f} s; {len(record['failed'])} failed; {args.out}")
    return 1 if record["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

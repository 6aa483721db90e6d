"""What the stream's agent loop costs per reply, beside the one prompt rendering any chat loop pays.

A stream's task is an episode on the environment's turn loop (docs/streaming.md, "One agent loop"): per reply the
episode renders the prompt with the chat template (its ids go to the engine as they are), the env parses the reply,
runs the tools on the bank and measures the context once more. The loop the streams had before rendered each prompt
once (inside the chat model) and kept no measure. This script plays the generated episodes of
``tests/eval/stream/transcripts.py`` (QA and a scripted game; no tools, the policy addition, ReMem; replies of
every kind) with a scripted model, so no engine time hides the loop's own, and reports per reply:

* ``loop_ms``: the whole episode's wall time per reply (rendering, parsing, tools, the env's bookkeeping);
* ``render_ms``: one ``encode_chat`` of the same request (the floor: what the engine model renders per reply);
* ``ratio``: loop / render, measured side by side in one process.

The loop is timed over all episodes together (``all``); each group's row gives its mean rendering time, which grows
with its prompts (a game's context grows by a step's observation per command).

    OMP_NUM_THREADS=1 python bench/stream_loop.py            # ~20 s on 2 cores
    python bench/stream_loop.py --repeats 1 --out /tmp/loop.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the generated episodes live in the test tree

from agemem.core.chat import encode_chat, load_tokenizer  # noqa: E402
from tests.eval.stream.transcripts import cases  # noqa: E402


def measure(repeats: int) -> list[dict]:
    tokenizer = load_tokenizer()
    cases(old_api=False)  # warm: imports, the tokenizer, the templates
    loop: dict[str, list[float]] = {}
    replies: dict[str, int] = {}
    played = []
    for _ in range(repeats):
        started = time.perf_counter()
        played = cases(old_api=False)
        total = time.perf_counter() - started
        per_group: dict[str, int] = {}
        for case in played:
            group = case["case"].rsplit("/", 1)[0]
            per_group[group] = per_group.get(group, 0) + len(case["seen"])
        all_replies = sum(per_group.values())
        loop.setdefault("all", []).append(total / all_replies)
        replies = {**per_group, "all": all_replies}
    render: dict[str, list[float]] = {}
    for case in played:
        group = case["case"].rsplit("/", 1)[0]
        for request in case["seen"]:
            started = time.perf_counter()
            encode_chat(tokenizer, request["messages"], None)
            spent = time.perf_counter() - started
            render.setdefault(group, []).append(spent)
            render.setdefault("all", []).append(spent)
    rows = [
        {
            "episodes": group,
            "replies": replies[group],
            "loop_ms": statistics.median(loop["all"]) * 1000 if group == "all" else None,
            "render_ms": statistics.mean(render[group]) * 1000,
        }
        for group in ["all", *sorted(g for g in render if g != "all")]
    ]
    for row in rows:
        row["ratio"] = row["loop_ms"] / row["render_ms"] if row["loop_ms"] else None
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of all episodes (the median is reported)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "stream_loop_cpu.json"))
    args = parser.parse_args()
    rows = measure(args.repeats)
    print(f"{'episodes':<16}{'replies':>8}{'loop ms':>10}{'render ms':>11}{'ratio':>7}")
    for row in rows:
        loop = f"{row['loop_ms']:.2f}" if row["loop_ms"] else "-"
        ratio = f"{row['ratio']:.1f}" if row["ratio"] else "-"
        print(f"{row['episodes']:<16}{row['replies']:>8}{loop:>10}{row['render_ms']:>11.2f}{ratio:>7}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    data = {
        "what": "the stream agent loop's wall time per reply beside one chat-template rendering of the same request",
        "command": "python bench/stream_loop.py",
        "machine": f"{platform.machine()}, 2 CPU cores (shared)",
        "commit": commit.stdout.strip(),
        "repeats": args.repeats,
        "rows": rows,
        "before": {
            "loop_ms": 0.07,
            "render_ms_in_the_model": "one rendering per reply (render_ms above)",
            "note": "the dialogue loop before this layout (commit 0e46255), timed on the same 589 replies in a "
            "worktree on this machine: 0.04 s for all; it rendered each prompt once, inside EngineChat",
        },
    }
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

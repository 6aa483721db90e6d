"""What `agemem eval locomo` costs to ingest one whole LoCoMo conversation on CPU, per variant, and whether a killed
ingestion resumes without redoing a finished session.

**Scale.** One conversation (``--conversation``, default conv-26: 19 sessions, 419 turns) is ingested by each
variant (default: agemem and rag, the agent answering each session as a Stage-1 turn; mem0, mem0g, amem and langmem,
the memory system taking each session with its own LLM calls, served by the harness over the model under test),
then ``--limit`` questions are asked. Each variant is one ``python -m agemem eval locomo`` subprocess on a fresh
output folder. From its ``results.json``: ``ingest`` (sessions, agent steps, ingestion wall seconds, agent and
memory-system calls and tokens, memory entries left, messages the context budget dropped, how sessions ended) and
the mean cost of answering one question (``answer_cost``); around it, the subprocess's own wall time (model load,
questions and all). Seconds per session and per turn are ingestion seconds over the conversation's sessions and
turns counted from the data file. With the default tiny random model the answers mean nothing: the calls, tokens
and seconds are what the harness (and each memory system's library) spend.

**Kill and resume.** The agemem variant again, on another folder: ``ingest/state.json`` is polled until
``--kill-after`` sessions are committed, then the process group is SIGKILLed mid-ingestion and the same command run
again. Checked from the final state: one record per session of the conversation, no (conversation, session) pair
twice, records in play order, the records committed before the kill unchanged, and the resumed run's first session
the one after the kill. Also recorded: the resumed process's ingestion seconds (the state's ``wall_s`` is summed over
processes: final minus at the kill) beside the uninterrupted run's, and whether each session's transcript matches
the uninterrupted run's (sampling seeds derive from the round, so a faithful resume replays the same tokens).

    python bench/locomo_scale.py --data /path/to/locomo10.json            # ~15-30 min on 2 cores
    python bench/locomo_scale.py --data D --variants agemem mem0 --skip-resume
    python bench/locomo_scale.py --data D --model openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 \
        --json /tmp/locomo_scale_7b.json engine.openai.api=chat

The data file is LoCoMo's ``data/locomo10.json`` (CC BY-NC 4.0: never copied into the repository). Results:
bench/results/locomo_scale.json (and .png, ingestion seconds per variant).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

VARIANTS = ("agemem", "rag", "mem0", "mem0g", "amem", "langmem")
DEFAULTS = (
    "sampling.max_tokens=64",
    "eval.memory_system.max_tokens=64",
    "env.summarizer.backend=extractive",
    "logging.progress=false",
    "eval.plot=false",
)
"""short replies (the agent's and the memory systems') keep one conversation within minutes on CPU."""
STATE_FILE = "ingest/state.json"
POLL_S = 0.2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("LOCOMO_DATA", "/work/shared/data/locomo/locomo10.json"))
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--model", default="tiny-random-qwen2")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--limit", type=int, default=2, help="questions asked after ingestion")
    parser.add_argument("--kill-after", type=int, default=5, help="sessions committed before the SIGKILL")
    parser.add_argument("--skip-resume", action="store_true", help="only the per-variant runs")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one subprocess may take")
    parser.add_argument("--out", default="runs/bench/locomo_scale", help="run folders (wiped per run)")
    parser.add_argument("--json", default="bench/results/locomo_scale.json")
    parser.add_argument("--png", default="bench/results/locomo_scale.png", help="empty: no plot")
    parser.add_argument("--note", default="", help="recorded as is (e.g. what else ran on the machine)")
    parser.add_argument("overrides", nargs="*", help="more dotted config overrides")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sessions, turns = count_conversation(Path(args.data), args.conversation)

    def command(variant: str, folder: Path) -> list[str]:
        return [
            sys.executable,
            *("-m", "agemem", "eval", "locomo", "--data", args.data, "--conversations", args.conversation),
            *("--limit", str(args.limit), "--out", str(folder), "--model", args.model, "--variant", variant),
            *DEFAULTS,
            *args.overrides,
        ]

    runs: dict[str, dict[str, Any]] = {}
    for variant in args.variants:
        folder = out / variant
        fresh(folder)
        print(f"[{variant}] {shlex.join(command(variant, folder))}", flush=True)
        runs[variant] = run_variant(command(variant, folder), folder, sessions, turns, args.timeout)
        print(f"[{variant}] rc={runs[variant]['rc']} total {runs[variant]['total_s']:.1f}s", flush=True)

    resume = None
    if not args.skip_resume:
        folder = out / "agemem_resume"
        fresh(folder)
        reference = out / "agemem" / STATE_FILE if "agemem" in runs else None
        resume = kill_and_resume(command("agemem", folder), folder, sessions, args.kill_after, args.timeout, reference)
        if "agemem" in runs and runs["agemem"].get("ingest"):
            resume["uninterrupted_ingest_wall_s"] = runs["agemem"]["ingest"]["wall_s"]

    import torch

    report = {
        "what": "one whole LoCoMo conversation ingested per variant on this machine, and a killed ingestion resumed",
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_at_end": os.getloadavg(),
        },
        "note": args.note,
        "model": args.model,
        "conversation": {"id": args.conversation, "sessions": sessions, "turns": turns},
        "questions": args.limit,
        "commands": {variant: run["command"] for variant, run in runs.items()},
        "runs": runs,
        "kill_resume": resume,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    print_table(args, runs, resume, sessions, turns)
    if args.png and any(run.get("ingest") for run in runs.values()):
        plot(runs, resume, Path(args.png), f"{args.conversation} ({sessions} sessions, {turns} turns), {args.model}")
        print(f"wrote {args.png}")
    print(f"wrote {args.json}")


def count_conversation(path: Path, sample_id: str) -> tuple[int, int]:
    """The conversation's sessions and turns, read from the data file itself."""
    for sample in json.loads(path.read_text(encoding="utf-8")):
        if sample["sample_id"] == sample_id:
            conversation = sample["conversation"]
            keys = [k for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list)]
            return len(keys), sum(len(conversation[k]) for k in keys)
    raise SystemExit(f"{sample_id} is not in {path}")


def fresh(folder: Path) -> None:
    """A run folder of this bench's own, emptied: a left-over one would resume and measure nothing."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)


def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    try:  # its own process group: a kill reaches the memory systems' local LLM server too
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        handle.close()


def finish(process: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return -signal.SIGKILL


def run_variant(command: list[str], folder: Path, sessions: int, turns: int, timeout: float) -> dict[str, Any]:
    log = folder.with_name(folder.name + ".log")
    load = os.getloadavg()
    started = time.perf_counter()
    rc = finish(start(command, log), timeout)
    total = time.perf_counter() - started
    run: dict[str, Any] = {"command": shlex.join(command), "rc": rc, "total_s": round(total, 2), "log": str(log)}
    run["load_average_before"] = [round(x, 2) for x in load]
    results_path = folder / "results.json"
    if rc != 0 or not results_path.is_file():
        run["error_tail"] = log.read_text(errors="replace")[-3000:]
        return run
    results = json.loads(results_path.read_text())
    ingest = results.get("ingest")
    run.update(
        ingest=ingest,
        questions=results["questions"],
        answer_cost_per_question=results["answer_cost"],
        questions_ended_by=results["ended_by"],
        eval_wall_s=results["wall_s"],
    )
    system = results.get("memory_system")
    if system:  # replies the library could not use, and library calls that raised
        keep = ("library", "llm", "llm_failures", "failed_calls", "last_failure")
        run["memory_system"] = {k: system[k] for k in keep if k in system}
    if ingest:
        cost = ingest["cost"]
        run["per_session_s"] = round(ingest["wall_s"] / sessions, 3)
        run["per_turn_s"] = round(ingest["wall_s"] / turns, 4)
        run["ingest_tokens"] = sum(
            cost[k]
            for k in (
                "agent_prompt_tokens",
                "agent_completion_tokens",
                "memory_prompt_tokens",
                "memory_completion_tokens",
            )
        )
        run["complete"] = ingest["sessions"] == sessions
        run["questions_s"] = round(results["wall_s"] - ingest["wall_s"], 2)  # the run's wall time less ingestion
    return run


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def pairs(state: dict[str, Any]) -> list[tuple[str, int]]:
    return [(s["conversation"], s["session"]) for s in state["sessions"]]


def kill_and_resume(
    command: list[str], folder: Path, sessions: int, kill_after: int, timeout: float, reference: Path | None
) -> dict[str, Any]:
    """Start, SIGKILL the process group once ``kill_after`` sessions are committed, run again, check the state."""
    state_path = folder / STATE_FILE
    print(f"[resume] {shlex.join(command)}; SIGKILL after {kill_after} sessions", flush=True)
    load = {"killed_run": [round(x, 2) for x in os.getloadavg()]}
    started = time.perf_counter()
    process = start(command, folder.with_name(folder.name + "_killed.log"))
    seen = 0
    while process.poll() is None and time.perf_counter() - started < timeout:
        state = read_state(state_path)
        seen = len(state["sessions"]) if state else 0
        if seen >= kill_after:
            break
        time.sleep(POLL_S)
    if process.poll() is not None:
        return {"error": f"the run ended (rc={process.returncode}) before {kill_after} sessions were committed"}
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    killed_after_s = time.perf_counter() - started
    at_kill = read_state(state_path)
    if at_kill is None:
        return {"error": "no ingest/state.json at the kill"}
    memory_files = sorted(p.name for p in (folder / "ingest").glob("memory_round_*.npz"))
    done_at_kill = len(at_kill["sessions"])
    print(f"[resume] killed after {killed_after_s:.1f}s with {done_at_kill} sessions committed; rerunning", flush=True)

    load["resumed_run"] = [round(x, 2) for x in os.getloadavg()]
    started = time.perf_counter()
    rc = finish(start(command, folder.with_name(folder.name + "_resumed.log")), timeout)
    resumed_total = time.perf_counter() - started
    final = read_state(state_path)
    result: dict[str, Any] = {
        "command": shlex.join(command),
        "kill_after": kill_after,
        "poll_s": POLL_S,
        "killed_after_s": round(killed_after_s, 2),
        "sessions_seen_before_kill": seen,
        "sessions_done_at_kill": done_at_kill,
        "rounds_at_kill": at_kill["rounds"],
        "snapshot_at_kill": at_kill["snapshot"],
        "memory_files_at_kill": memory_files,
        "ingest_wall_s_at_kill": round(at_kill["wall_s"], 3),
        "resumed_rc": rc,
        "resumed_total_s": round(resumed_total, 2),
        "load_average_before": load,
    }
    if final is None:
        return {**result, "error": "no ingest/state.json after the resumed run"}
    order = pairs(final)
    resumed_records = final["sessions"][done_at_kill:]
    result.update(
        records=len(order),
        sessions_expected=sessions,
        rounds_final=final["rounds"],
        unique_pairs=len(set(order)),
        in_play_order=[s for _, s in order] == list(range(1, len(order) + 1)),
        records_before_kill_unchanged=final["sessions"][:done_at_kill] == at_kill["sessions"],
        first_resumed_session=resumed_records[0]["session"] if resumed_records else None,
        resumed_ingest_wall_s=round(final["wall_s"] - at_kill["wall_s"], 3),
        total_ingest_wall_s=round(final["wall_s"], 3),
        resumed_sessions=len(resumed_records),
    )
    result["ok"] = (
        rc == 0
        and result["records"] == sessions
        and result["unique_pairs"] == sessions
        and result["in_play_order"]
        and result["records_before_kill_unchanged"]
        and result["first_resumed_session"] == done_at_kill + 1
    )
    results_path = folder / "results.json"
    if results_path.is_file():
        result["resumed_results_ingest"] = json.loads(results_path.read_text()).get("ingest")
    uninterrupted = read_state(reference) if reference else None
    if uninterrupted:
        theirs = {(s["conversation"], s["session"]): s for s in uninterrupted["sessions"]}
        same = [
            s["transcript"] == theirs.get((s["conversation"], s["session"]), {}).get("transcript")
            for s in final["sessions"]
        ]
        result["transcripts_matching_uninterrupted"] = sum(same)
        result["transcripts_differing_sessions"] = [s["session"] for s, ok in zip(final["sessions"], same) if not ok]
    print(f"[resume] rc={rc}, {result['records']} records, ok={result['ok']}", flush=True)
    return result


def _cell(value: float | None, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


def print_table(
    args: argparse.Namespace, runs: dict[str, dict[str, Any]], resume: dict[str, Any] | None, sessions: int, turns: int
) -> None:
    table = Table(title=f"{args.conversation} ingested whole ({sessions} sessions, {turns} turns), {args.model}")
    headers = ("variant", "sessions", "turns", "ingest s", "s/session", "s/turn", "agent calls", "mem calls")
    headers += ("tokens", "memory entries", "ans tok/q", "total s")
    for header in headers:
        table.add_column(header, justify="left" if header == "variant" else "right")
    for variant, run in runs.items():
        ingest = run.get("ingest")
        if not ingest:
            table.add_row(variant, *(["–"] * (len(headers) - 2)), f"rc={run['rc']} {run['total_s']:.0f}")
            continue
        cost = ingest["cost"]
        table.add_row(
            variant,
            str(ingest["sessions"]),
            str(turns),
            f"{ingest['wall_s']:.1f}",
            f"{run['per_session_s']:.2f}",
            f"{run['per_turn_s']:.3f}",
            f"{cost['agent_calls']:.0f}",
            f"{cost['memory_calls']:.0f}",
            f"{run['ingest_tokens']:.0f}",
            str(sum(ingest["memory_entries"].values())),
            _cell(run["answer_cost_per_question"].get("tokens"), "{:.0f}"),
            f"{run['total_s']:.1f}",
        )
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    if resume:
        if "error" in resume and "records" not in resume:
            print(f"kill/resume: {resume['error']}")
            return
        print(
            f"kill/resume (agemem): SIGKILL at {resume['killed_after_s']:.1f}s with {resume['sessions_done_at_kill']} "
            f"sessions committed; resumed run rc={resume['resumed_rc']}: {resume['records']}/{sessions} records, "
            f"{resume['unique_pairs']} unique, first resumed session {resume['first_resumed_session']}, "
            f"records before the kill unchanged: {resume['records_before_kill_unchanged']}; resumed ingest "
            f"{resume['resumed_ingest_wall_s']:.1f}s for {resume['resumed_sessions']} sessions (uninterrupted: "
            f"{_cell(resume.get('uninterrupted_ingest_wall_s'), '{:.1f}')}s for {sessions}); "
            f"transcripts matching the uninterrupted run: {resume.get('transcripts_matching_uninterrupted', '–')}; "
            f"ok={resume['ok']}"
        )


def plot(runs: dict[str, dict[str, Any]], resume: dict[str, Any] | None, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    labels = [v for v, run in runs.items() if run.get("ingest")]
    values = [runs[v]["ingest"]["wall_s"] for v in labels]
    colours = ["tab:blue"] * len(labels)
    if resume and "resumed_ingest_wall_s" in resume:
        labels += ["agemem killed", "agemem resumed"]
        values += [resume["ingest_wall_s_at_kill"], resume["resumed_ingest_wall_s"]]
        colours += ["tab:gray", "tab:orange"]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1.2))
    ax.barh(labels[::-1], values[::-1], color=colours[::-1])
    for y, value in enumerate(values[::-1]):
        ax.text(value, y, f" {value:.0f}s", va="center", fontsize=8)
    ax.set_xlabel("ingestion wall seconds")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()

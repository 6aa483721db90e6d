"""SIGKILL at random points of ``agemem eval hotpotqa``, ``agemem eval stream`` and ``agemem export`` (the
``faults`` tier). Evaluations are re-run after each kill (re-running resumes) and must end with the
uninterrupted run's records and metrics; an export killed anywhere leaves either no directory at ``--out`` or
a complete export, never a partial one, and the export finished afterwards equals the uninterrupted one."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.train.launching import REPO, child_env, finish, kill_repeatedly

pytestmark = pytest.mark.faults
KILLS = 5
VOLATILE = ("seconds", "time", "played", "resumed", "started", "finished", "wall", "_s")
"""result keys that differ between an interrupted and an uninterrupted run by design (timings, resume counts)."""


def agemem(*args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "agemem", *args]
    return subprocess.Popen(command, cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return 0


def steps(path: Path) -> int:
    """Stream steps logged: the lines of ``steps.jsonl`` but its first, the initial bank (step -1)."""
    return max(0, lines(path) - 1)


def kill_and_resume(
    start: Callable[[], subprocess.Popen],
    progress: Callable[[], int],
    total: int,
    item_s: float,
    seed: int,
    results: Path,
    plan: Callable[[random.Random], tuple[int, float]] | None = None,
) -> list[dict]:
    """SIGKILL once 0 to half the remaining items are done (0: in start-up), plus a random part of an item (or as
    ``plan`` says); start again (it resumes); KILLS times or until done, then run to the end. Done is ``results``
    written, not ``total`` items logged: a run killed after its last item but before its results must run
    again. Returns the kill points."""

    def random_plan(rng: random.Random) -> tuple[int, float]:
        done = progress()
        return done + rng.randint(0, max(1, (total - done) // 2)), rng.uniform(0.0, 1.5 * item_s)

    return kill_repeatedly(
        start,
        progress=progress,
        finished=results.exists,  # written atomically, and only once every item is
        plan=plan or random_plan,
        kills=KILLS,
        seed=seed,
        label="after_item",
        after_kill=lambda: {"items_kept": progress()},
    )


def stable(record: dict) -> dict:
    return {k: stable(v) if isinstance(v, dict) else v for k, v in record.items() if not any(w in k for w in VOLATILE)}


def records(path: Path) -> list[dict]:
    return [stable(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def assert_same_records(path: Path, reference: Path) -> None:
    """``records(path) == records(reference)``, failing with the records missing or extra and, per record that
    differs, the fields that do (a bare list comparison shows a truncated diff of whole records)."""
    got, want = records(path), records(reference)
    problems = []
    for i in range(max(len(got), len(want))):
        if i >= len(got) or i >= len(want):
            side, record = ("uninterrupted", want[i]) if i >= len(got) else ("resumed", got[i])
            problems.append(f"record {i} (step {record.get('step')}) is only in the {side} run")
            continue
        for key in sorted(got[i].keys() | want[i].keys()):
            if got[i].get(key) != want[i].get(key):
                change = f"{got[i].get(key)!r:.200} != {want[i].get(key)!r:.200}"
                problems.append(f"record {i} (step {want[i].get('step')}) {key}: {change}")
    assert not problems, f"{path} (resumed) differs from {reference} (uninterrupted):\n" + "\n".join(problems[:40])


def item_seconds(start: Callable[[], subprocess.Popen], progress: Callable[[], int], total: int) -> float:
    """Run to the end, uninterrupted; the seconds an item takes once start-up is over."""
    process = start()
    first = last = None
    while process.poll() is None:
        count = progress()
        if count >= 1 and first is None:
            first = time.monotonic()
        if count >= total:
            last = time.monotonic()
        time.sleep(0.01)
    finish(process)
    last = last or time.monotonic()
    return max(0.05, (last - (first or last)) / max(1, total - 1))


EVAL = ["sampling.max_tokens=4", "rollout.stage1_mode=single", "rollout.stage1_max_steps=1",
        "rollout.stage3_max_steps=1", "env.summarizer.backend=extractive", "logging.progress=false",
        "eval.chunk_size=1", "eval.plot=false"]  # fmt: skip
QUESTIONS = 24


def test_eval_hotpotqa_killed_anywhere_ends_with_the_uninterrupted_results(tmp_path):
    def start(out: Path) -> Callable[[], subprocess.Popen]:
        args = ["eval", "hotpotqa", "--model", "tiny-random-qwen2", "--limit", str(QUESTIONS), "--out", str(out)]
        return lambda: agemem(*args, *EVAL)

    reference = tmp_path / "reference"
    item_s = item_seconds(start(reference), lambda: lines(reference / "examples.jsonl"), QUESTIONS)
    out = tmp_path / "run"
    examples = out / "examples.jsonl"  # one model and one variant write straight into --out
    kills = kill_and_resume(
        start(out), lambda: lines(examples), QUESTIONS, item_s, seed=1, results=out / "results.json"
    )
    print(f"\neval hotpotqa: {len(kills)} kill points: {kills}")
    assert len(kills) >= 3, kills
    assert_same_records(examples, reference / "examples.jsonl")
    assert stable(json.loads((out / "results.json").read_text())) == stable(
        json.loads((reference / "results.json").read_text())
    )


STREAM = ["sampling.max_tokens=4", "stream.max_steps=1", "logging.progress=false"]
STREAM_TASKS = 16


def stream(out: Path) -> Callable[[], subprocess.Popen]:
    args = ["eval", "stream", "--task", "hotpotqa", "--model", "tiny-random-qwen2", "--limit", str(STREAM_TASKS)]
    return lambda: agemem(*args, "--addition", "policy", "--out", str(out), *STREAM)


def assert_same_stream_run(out: Path, reference: Path) -> None:
    assert_same_records(out / "steps.jsonl", reference / "steps.jsonl")
    assert stable(json.loads((out / "results.json").read_text())) == stable(
        json.loads((reference / "results.json").read_text())
    )


def test_eval_stream_killed_anywhere_ends_with_the_uninterrupted_results(tmp_path):
    reference = tmp_path / "reference"
    item_s = item_seconds(stream(reference), lambda: steps(reference / "steps.jsonl"), STREAM_TASKS)
    out = tmp_path / "run"
    kills = kill_and_resume(
        stream(out), lambda: steps(out / "steps.jsonl"), STREAM_TASKS, item_s, seed=2, results=out / "results.json"
    )
    print(f"\neval stream: {len(kills)} kill points: {kills}")
    assert len(kills) >= 3, kills
    assert_same_stream_run(out, reference)


def test_eval_stream_killed_at_fixed_points_ends_with_the_uninterrupted_results(tmp_path):
    """Kill points random timing seldom hits: in start-up, after the first step, during the last step (all but one
    step logged: the run that killed there used to count as finished) and after the last step's line, where its
    results may not be written yet."""
    reference = tmp_path / "reference"
    finish(stream(reference)())
    out = tmp_path / "run"
    targets = iter([0, 1, STREAM_TASKS - 1, STREAM_TASKS])
    kills = kill_and_resume(
        stream(out),
        lambda: steps(out / "steps.jsonl"),
        STREAM_TASKS,
        0.0,
        seed=0,
        results=out / "results.json",
        plan=lambda rng: (next(targets, STREAM_TASKS), 0.0),
    )
    print(f"\neval stream: {len(kills)} kill points: {kills}")
    assert [k["after_item"] for k in kills][:3] == [0, 1, STREAM_TASKS - 1], kills
    assert_same_stream_run(out, reference)


def test_export_killed_anywhere_never_leaves_a_partial_export(uninterrupted, tmp_path):
    """``uninterrupted``: the tiny 3-step training run (tests/train/conftest.py)."""

    def start(out: Path, *extra: str) -> Callable[[], subprocess.Popen]:
        return lambda: agemem("export", "--checkpoint", str(uninterrupted), "--out", str(out), *extra)

    reference = tmp_path / "reference"
    began = time.monotonic()
    finish(start(reference)())
    full_s = time.monotonic() - began
    expected = sorted(str(p.relative_to(reference)) for p in reference.rglob("*") if p.is_file())
    out, rng, kills = tmp_path / "export", random.Random(3), []
    for attempt in range(2 * KILLS):  # from nothing, then over a finished export with --force
        process = start(out, "--force")()
        delay = rng.uniform(0.2, full_s)
        try:
            process.wait(timeout=delay)
            killed = False
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            killed = True
        present = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else None
        state = "complete" if present == expected else present
        kills.append({"after_s": round(delay, 2), "killed": killed, "out": state})
        assert present in (None, expected), f"attempt {attempt}: a partial export at --out: {present}"
    finish(start(out, "--force")())
    print(f"\nexport: {len(kills)} attempts: {kills}")
    assert sum(k["killed"] for k in kills) >= 3, kills
    for name in expected:
        if name.endswith(".safetensors"):
            again, first = load_file(out / name), load_file(reference / name)
            assert again.keys() == first.keys() and all((again[k] == first[k]).all() for k in first)

"""Seeds of `agemem learn` run one at a time, kept as small committed JSON files, compiled into one report.

A seed of ``configs/learn_cpu.yaml`` takes half an hour alone on 2 cores, so the five seeds of a report are run
one per sitting, and their run directories (hundreds of MB of demonstrations and weights) are not kept. ``pack``
turns a finished seed's directory into one small JSON file; ``compile`` reads such files back and writes the
cross-seed report that ``agemem learn learn.seeds=[0,1,2,3,4]`` would have written, with its plot:

    python bench/learning_seeds.py pack --run runs/learn/seed_2 --out bench/results/learning_fast_sft_seed2.json
    python bench/learning_seeds.py compile bench/results/learning_fast_sft_seed{0,1,2,3,4}.json \\
        --out bench/results/learning_fast_sft.json --plot docs/img/learning_fast_sft.png

``pack`` also reads the GRPO stage's logged trajectory samples for what the policy stored and updated in Stage 1,
message by message (``stage1_stores``): a policy that stores only the last Stage-1 message (the change the question
asks) avoids a stale entry without Update, and this is where that shows, as does an update in reply to the change;
and whose entry each update overwrote (``update_targets``): the changed person's stale entry, or another's.

Files packed before ``em_differences`` was recorded hold each seed's paired EM interval only; EM differences are
-1, 0 or +1 an episode, so the mean and the Student-t interval over n episodes fix how many of each there were,
and ``compile`` rebuilds them exactly (:func:`differences_from_interval`, which refuses when they do not).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig

GRPO_STEP_KEYS = (
    "reward/total",
    "episode/exact_match",
    "episode/retrievals",
    "episode/memory_updates",
    "episode/memory_deletes",
    "episode/memory_adds",
    "episode/summaries",
    "episode/filters",
    "reward/memory/maintained",
    "reward/memory/maintenance",
    "time/rollout_s",
    "time/update_s",
    "time/step_s",
)
"""the training metrics a packed seed keeps per GRPO step."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pack = commands.add_parser("pack", help="one finished seed directory -> one small JSON file")
    pack.add_argument("--run", required=True, help="the seed's directory, e.g. runs/learn/seed_2")
    pack.add_argument("--out", required=True)
    pack.add_argument("--what", default="", help="one line: which recipe, what ran beside it")
    pack.add_argument("--machine", default="2 CPU cores")
    pack.add_argument("--config", default="configs/learn_cpu.yaml", help="the config the seed ran")
    pack.add_argument("overrides", nargs="*", help="the overrides it ran with (key=value)")
    compile_ = commands.add_parser("compile", help="packed seeds -> the cross-seed report and its plot")
    compile_.add_argument("files", nargs="+")
    compile_.add_argument("--out", required=True)
    compile_.add_argument("--plot", help="a PNG: training reward per step and held-out EM per seed")
    compile_.add_argument("--config", default="configs/learn_cpu.yaml")
    compile_.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    config = load_config(AgeMemConfig, args.config, args.overrides)
    if args.command == "pack":
        packed = pack_seed(config, Path(args.run), what=args.what, machine=args.machine)
        packed["command"] = " ".join(["agemem learn --config", args.config, *args.overrides])
        Path(args.out).write_text(json.dumps(packed, indent=2))
        print(f"written {args.out}: seed {packed['report']['seeds']}, EM {packed['em_difference']}")
    else:
        compile_seeds(config, [Path(f) for f in args.files], Path(args.out), Path(args.plot) if args.plot else None)


def pack_seed(config, run: Path, *, what: str, machine: str) -> dict[str, Any]:
    """A finished seed directory (``result.json``, ``grpo/metrics.jsonl``, ``grpo/trajectories.jsonl``) as one
    JSON-able dict: its one-seed report, timings, peaks, per-episode EM differences, per-step training metrics
    and what its logged trajectories stored in Stage 1."""
    from agemem.recipes.learn.recipe import compare_seeds

    result_path = run / "result.json"
    if not result_path.exists():
        raise SystemExit(f"{result_path} is missing: the seed has not finished (run agemem learn on it first)")
    result = json.loads(result_path.read_text())
    steps = [json.loads(line) for line in (run / "grpo" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    report = compare_seeds(config, [result])
    report.pop("config")
    samples = run / "grpo" / "trajectories.jsonl"
    return {
        "what": what,
        "machine": machine,
        "report": report,
        "timings": result["timings"],
        "peak_resident_gib": result["peak_resident_gib"],
        "em_difference": result["em_difference"],
        "em_differences": result["em_differences"],
        "grpo_steps": [{"step": s["step"], **{k: s[k] for k in GRPO_STEP_KEYS if k in s}} for s in steps],
        "stage1_stores": stage1_stores(samples) if samples.exists() else None,
        "update_targets": update_targets(samples) if samples.exists() else None,
        "em_by_question_kind": em_by_question_kind(config, run),
    }


def em_by_question_kind(config, run: Path) -> dict[str, dict[str, float]] | None:
    """Held-out EM of the warm start (``before``) and the GRPO policy (``after``) per question kind (a task's
    ``metadata["type"]``: ``revised-fact``, ``unchanged-fact``), from the run's per-episode evaluation files;
    None when the held-out set asks one kind only or the files are not there. ``config`` must be the run's: its
    ``data.synthetic`` and ``learn.eval_*`` rebuild the held-out tasks."""
    from agemem.recipes.learn.recipe import synthetic_tasks

    files = {"before": run / "eval_warm_start.jsonl", "after": run / "eval_grpo.jsonl"}
    if not all(path.exists() for path in files.values()):
        return None
    kinds = {t.id: t.metadata["type"] for t in synthetic_tasks(config, config.learn.eval_tasks, config.learn.eval_seed)}
    if len(set(kinds.values())) < 2:
        return None
    out: dict[str, dict[str, float]] = {}
    for stage, path in files.items():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        unknown = sorted({row["task_id"] for row in rows} - set(kinds))
        if unknown:
            raise SystemExit(
                f"{path} scores tasks the config's held-out set does not hold ({unknown[0]}, ...): pack with the "
                "run's own --config and overrides"
            )
        for kind in sorted(set(kinds.values())):
            ems = [row["em"] for row in rows if kinds[row["task_id"]] == kind]
            out.setdefault(kind, {"tasks": len(ems)})[stage] = sum(ems) / len(ems)
    return out


def stage1_stores(samples: Path, *, window: int = 5) -> dict[str, Any]:
    """Share of the logged training trajectories that stored each Stage-1 message (a successful
    ``Add_memory`` in the reply to it) and that changed an entry in reply to it (an ``Update_memory`` or
    ``Delete_memory`` the store carried out), over the first and the last ``window`` GRPO steps."""
    out: dict[str, Any] = {}
    for name, (chosen, picked) in _step_windows(samples, window).items():
        messages = max((_stage1_messages(t) for t in picked), default=0)
        stored = [sum(_stored_turn(t, turn) for t in picked) / len(picked) for turn in range(messages)]
        updated = [sum(_changed_turn(t, turn) for t in picked) / len(picked) for turn in range(messages)]
        out[name] = {
            "steps": chosen,
            "trajectories": len(picked),
            "stored_by_message": stored,
            "updated_by_message": updated,
        }
    return out


def _step_windows(samples: Path, window: int) -> dict[str, tuple[list[int], list[dict[str, Any]]]]:
    """The logged trajectories of the first and the last ``window`` GRPO steps: ``{"first_steps": (steps, rows),
    "last_steps": (steps, rows)}``."""
    from agemem.train.metrics import trajectory_step

    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    by_step = [(trajectory_step(row), row) for row in rows]
    steps = sorted({step for step, _ in by_step})
    spans = {"first_steps": steps[:window], "last_steps": steps[-window:]}
    return {name: (chosen, [row for step, row in by_step if step in chosen]) for name, chosen in spans.items()}


PERSON = re.compile(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b")
"""a person of the synthetic tasks: two capitalised words ("Budara Sype"); no value, city or message frame is."""


def update_targets(samples: Path, *, window: int = 10) -> dict[str, Any]:
    """Whose entry each successful ``Update_memory`` of the logged training trajectories overwrote, over the first
    and the last ``window`` GRPO steps: ``same_person`` when the entry (as this episode's earlier Add or Update
    wrote it) names a person the new content names (the stale entry brought up to date), ``other_person`` when it
    names only others (a fact lost), ``unseen_entry`` when no logged result of the episode wrote that id."""
    out: dict[str, Any] = {}
    for name, (chosen, picked) in _step_windows(samples, window).items():
        kinds = [kind for trajectory in picked for kind in _update_kinds(trajectory)]
        out[name] = {
            "steps": chosen,
            "trajectories": len(picked),
            "updates": len(kinds),
            **{kind: kinds.count(kind) for kind in ("same_person", "other_person", "unseen_entry")},
        }
    return out


def _update_kinds(trajectory: dict[str, Any]) -> list[str]:
    """One kind per successful Update_memory of the episode, in order (see :func:`update_targets`)."""
    entries: dict[str, str] = {}
    kinds = []
    for step in trajectory["steps"]:
        for call, result in zip(step["tool_calls"], step.get("tool_results", [])):
            if not result.get("ok"):
                continue
            if call.get("name") == "Update_memory":
                entry_id, content = call["arguments"]["memory_id"], call["arguments"]["content"]
                if entry_id not in entries:
                    kinds.append("unseen_entry")
                else:
                    shared = set(PERSON.findall(entries[entry_id])) & set(PERSON.findall(content))
                    kinds.append("same_person" if shared else "other_person")
            for entry in result.get("memories", []) if call.get("name") in ("Add_memory", "Update_memory") else []:
                entries[entry["memory_id"]] = entry["content"]
    return kinds


def _stage1_messages(trajectory: dict[str, Any]) -> int:
    return 1 + max((s["turn"] for s in trajectory["steps"] if s["stage"] == 1), default=-1)


def _stored_turn(trajectory: dict[str, Any], turn: int) -> bool:
    return any(
        call.get("name") == "Add_memory" and not call.get("error")
        for step in trajectory["steps"]
        if step["stage"] == 1 and step["turn"] == turn
        for call in step["tool_calls"]
    )


def _changed_turn(trajectory: dict[str, Any], turn: int) -> bool:
    # a parsed call can still fail (an id that names no entry): its result says whether it changed anything
    return any(
        call.get("name") in ("Update_memory", "Delete_memory") and bool(result.get("ok"))
        for step in trajectory["steps"]
        if step["stage"] == 1 and step["turn"] == turn
        for call, result in zip(step["tool_calls"], step.get("tool_results", []))
    )


def differences_from_interval(em_difference: dict[str, float], n: int) -> list[float]:
    """The n per-episode EM differences (each -1, 0 or +1) that have this mean and Student-t 95% interval.

    With a up, b down: a - b = n·mean and a + b = Σd² = (n-1)·s² + n·mean², s = half-width·√n / t_{0.975,n-1}.
    Raises when the interval does not come from such differences (the counts are not whole).
    """
    from scipy.stats import t as student_t

    mean, high = em_difference["mean"], em_difference["high"]
    std = (high - mean) * math.sqrt(n) / student_t.ppf(0.975, n - 1)
    net, moved = n * mean, (n - 1) * std**2 + n * mean**2
    if abs(net - round(net)) > 1e-6 or abs(moved - round(moved)) > 1e-6 or (round(net) + round(moved)) % 2:
        raise ValueError(f"{em_difference} over {n} episodes is not an interval of -1/0/+1 differences")
    up, down = (round(moved) + round(net)) // 2, (round(moved) - round(net)) // 2
    return [1.0] * up + [-1.0] * down + [0.0] * (n - up - down)


def seed_result(packed: dict[str, Any], eval_tasks: int) -> dict[str, Any]:
    """A packed seed back in the shape of its ``result.json`` (what compare_seeds and plot_learning read)."""
    (seed,) = packed["report"]["per_seed"]
    differences = packed.get("em_differences") or differences_from_interval(packed["em_difference"], eval_tasks)
    return {
        **seed,
        "em_differences": differences,
        "reward_curve": [{"step": s["step"], "reward/total": s["reward/total"]} for s in packed["grpo_steps"]],
    }


def compile_seeds(config, files: list[Path], out: Path, plot: Path | None) -> dict[str, Any]:
    from agemem.recipes.learn.evaluate import ci_dict
    from agemem.recipes.learn.recipe import compare_seeds, plot_learning, report_table

    packed = [json.loads(f.read_text()) for f in files]
    results = [seed_result(p, config.learn.eval_tasks) for p in packed]
    for result, p in zip(results, packed, strict=True):  # a rebuilt seed must give back its own interval
        again = ci_dict(result["em_differences"])
        if any(abs(again[k] - p["em_difference"][k]) > 1e-9 for k in ("mean", "low", "high")):
            raise ValueError(f"seed {result['seed']}: rebuilt differences give {again}, not {p['em_difference']}")
    report = compare_seeds(config, results)
    report.pop("config")
    report["files"] = [str(f) for f in files]
    report["minutes"] = {str(r["seed"]): r["timings"]["total_s"] / 60 for r in results}
    report["peak_resident_gib"] = {str(r["seed"]): max(r["peak_resident_gib"].values()) for r in results}
    report["stage1_stores"] = {str(r["seed"]): p.get("stage1_stores") for r, p in zip(results, packed, strict=True)}
    out.write_text(json.dumps(report, indent=2))
    Console().print(report_table(report))
    if plot is not None:
        plot_learning(results, plot)
    print(f"written {out}" + (f" and {plot}" if plot else ""))
    return report


if __name__ == "__main__":
    main()

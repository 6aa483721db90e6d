"""Where a seed of `agemem learn` spends its time: the stage table of a finished seed, and a profile inside each stage.

Two parts, one JSON (``bench/results/learn_profile.json``):

* **stages**: a finished seed's own record (``--run``: ``result.json``'s seconds and peak resident GiB per stage,
  ``warm_start/sft_metrics.json``'s SFT seconds, ``grpo/metrics.jsonl``'s median rollout and update seconds a step).
  Run the seed alone on the machine for these to mean anything: two jobs on 2 cores slow each other far more than 2x.
* **writing**: the recipe's demonstrations serialised the way they are now and the way they were (a deep copy by
  ``dataclasses.asdict``), side by side: the same bytes, and the seconds each takes.
* **inside each stage**: short runs of each stage's own code under ``cProfile``, in this process, on the run's
  tokenizer and settings:
  * demonstrations: the scripted expert plays ``--tasks`` fresh tasks through the real driver and env and its
    trajectories are written as the recipe writes them; time in the sentence encoder (MiniLM, embedding what the
    episodes store and ask), in writing, and in the episodes and the env;
  * SFT: ``--sft-steps`` optimizer steps of the warm start's trainer on the run's own demonstrations and drills; time
    in the backward pass, the attention kernel and the linear layers;
  * GRPO: ``--grpo-steps`` steps of `agemem train` from the run's warm start on its task pool; time generating
    (of which the top-p truncation), in the rest of the rollout (episodes, env, encoder), and in the update (of
    which the no-grad reference pass).

Shares are of each profiled run's wall time (cProfile's own overhead included: read them as proportions).

    python bench/learn_profile.py --run runs/learn/seed_0
    python bench/learn_profile.py --run runs/learn/seed_0 --tasks 100 --sft-steps 10 --grpo-steps 2   # ~4 min
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agemem.core.configlib import ConfigError
from agemem.entrypoints.roots import config_from_tree

ROOT = Path(__file__).resolve().parents[1]

STAGES = (
    ("tokenizer_s", "tokenizer"),
    ("demonstrate_s", "demonstrations and drills"),
    ("warm_start_s", "warm start (copy warm-up + SFT)"),
    ("eval_warm_start_s", "held-out evaluation, warm start"),
    ("grpo_s", "GRPO"),
    ("eval_grpo_s", "held-out evaluation, GRPO policy"),
)


def cumulative(stats: pstats.Stats, *suffixes: str) -> float:
    """Seconds spent inside the functions named ``file:function`` by any of ``suffixes`` (outermost calls only:
    cProfile's cumulative time of a function counts its recursive calls once)."""
    total = 0.0
    for (filename, _, name), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if any(f"{filename}:{name}".endswith(suffix) for suffix in suffixes):
            total += cum
    return total


def own(stats: pstats.Stats, *names: str) -> float:
    """Seconds spent in the bodies of the functions (built-ins included) whose name contains any of ``names``."""
    total = 0.0
    for (_, _, name), (_, _, own_s, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if any(part in name for part in names):
            total += own_s
    return total


def profiled(work) -> tuple[float, pstats.Stats]:
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    try:
        work()
    finally:
        profile.disable()
    return time.perf_counter() - start, pstats.Stats(profile)


def stage_table(run: Path) -> dict[str, Any]:
    result = json.loads((run / "result.json").read_text())
    timings, peaks = result["timings"], result.get("peak_resident_gib", {})
    stages = {
        key[:-2]: {"what": what, "minutes": timings[key] / 60, "peak_gib": peaks.get(key[:-2])}
        for key, what in STAGES
        if key in timings
    }
    sft_metrics = run / "warm_start" / "sft_metrics.json"
    if sft_metrics.exists():
        stages["warm_start"]["sft_minutes"] = json.loads(sft_metrics.read_text())["train_runtime"] / 60
    rows = [json.loads(line) for line in (run / "grpo" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [row for row in rows if "time/step_s" in row]
    if steps:
        stages["grpo"].update(
            steps=len(steps),
            median_step_s=statistics.median(r["time/step_s"] for r in steps),
            median_rollout_s=statistics.median(r["time/rollout_s"] for r in steps),
            median_update_s=statistics.median(r["time/update_s"] for r in steps),
        )
    return {"stages": stages, "total_minutes": timings["total_s"] / 60, "peak_gib": max(peaks.values(), default=None)}


def profile_demonstrations(config, run: Path, tasks: int, encoder) -> dict[str, Any]:
    from agemem.core.chat import load_tokenizer
    from agemem.recipes.learn import recipe

    tokenizer = load_tokenizer(str(run / "tokenizer"))
    # tasks of a generator seed no stage uses, so the encoder's cache starts as cold as the recipe's does
    played = recipe.synthetic_tasks(config, tasks, 999_999)
    with tempfile.TemporaryDirectory() as scratch:
        wall, stats = profiled(
            lambda: recipe._stage_demonstrations(config, 0, played, tokenizer, Path(scratch) / "d.jsonl", encoder)
        )
    encoding = cumulative(stats, "encoders.py:encode")
    writing = cumulative(stats, "records.py:write")
    return {
        "tasks": tasks,
        "wall_s": wall,
        "shares": {
            "sentence encoder": encoding / wall,
            "writing trajectories": writing / wall,
            "episodes, env, driver": (wall - encoding - writing) / wall,
        },
    }


def writing_side_by_side(run: Path, count: int = 300, repeats: int = 3) -> dict[str, Any]:
    """Seconds to serialise ``count`` of the run's demonstrations as JSON lines: ``Trajectory.to_json`` against the
    deep copy ``dataclasses.asdict`` made before (the same bytes), alternating, best of ``repeats``."""
    from dataclasses import asdict, fields

    from agemem.rollouts.records import read_trajectories

    trajectories = []
    for trajectory in read_trajectories(run / "demonstrations.jsonl"):
        trajectories.append(trajectory)
        if len(trajectories) == count:
            break

    def deep_copy(trajectory) -> dict[str, Any]:
        data = {f.name: getattr(trajectory, f.name) for f in fields(trajectory)}
        return {**data, "steps": [asdict(s) for s in trajectory.steps], "stats": trajectory.stats.to_json()}

    ways = {"dataclasses.asdict": deep_copy, "Trajectory.to_json": lambda t: t.to_json()}
    lines = {name: [json.dumps(way(t), ensure_ascii=False) for t in trajectories] for name, way in ways.items()}
    if lines["dataclasses.asdict"] != lines["Trajectory.to_json"]:
        raise SystemExit("the two serialisations differ: Trajectory.to_json must write what asdict wrote")
    best = {name: float("inf") for name in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            start = time.perf_counter()
            for trajectory in trajectories:
                json.dumps(way(trajectory), ensure_ascii=False)
            best[name] = min(best[name], time.perf_counter() - start)
    return {
        "trajectories": len(trajectories),
        "seconds_per_1000": {name: seconds / len(trajectories) * 1000 for name, seconds in best.items()},
        "speedup": best["dataclasses.asdict"] / best["Trajectory.to_json"],
    }


def profile_sft(config, run: Path, steps: int) -> dict[str, Any]:
    import torch
    from transformers import Qwen2ForCausalLM

    from agemem.core.chat import load_tokenizer
    from agemem.recipes.learn import recipe
    from agemem.recipes.learn.sft import supervised_warm_start
    from agemem.rollouts.policy import tiny_qwen2_config
    from agemem.rollouts.records import read_trajectories

    tokenizer = load_tokenizer(str(run / "tokenizer"))
    demos = list(read_trajectories(run / "demonstrations.jsonl"))
    drills = list(read_trajectories(run / "drills.jsonl")) if (run / "drills.jsonl").exists() else []
    learn = config.learn
    settings = replace(recipe.sft_settings(learn, 0, progress=False), max_steps=steps)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(tiny_qwen2_config(config.policy, len(tokenizer)))
    model.set_attn_implementation(learn.warm_start_attention)
    statements = recipe.answer_statements(learn, 0)
    metrics: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:

        def train() -> None:
            metrics.update(
                supervised_warm_start(model, tokenizer, demos, settings, scratch, drills=drills,
                                      answer_statements=statements)
            )  # fmt: skip

        wall, stats = profiled(train)
    step_s = metrics["train_runtime"] / steps
    parts = {
        "backward": own(stats, "run_backward"),
        "attention (forward)": own(stats, "scaled_dot_product_attention"),
        "linear layers (forward)": own(stats, "_nn.linear", "<built-in method linear>"),
    }
    return {
        "steps": steps,
        "micro_batches": learn.sft_micro_batches,
        "step_s": step_s,
        "wall_s": wall,
        "shares": {name: seconds / metrics["train_runtime"] for name, seconds in parts.items()},
    }


def profile_grpo(config, run: Path, steps: int) -> dict[str, Any]:
    from agemem.recipes.learn import recipe

    seeds = recipe.TaskSeeds.derive(config, 0)
    with tempfile.TemporaryDirectory() as scratch:
        grpo = recipe._grpo_config(
            replace(config, max_steps=steps), 0, seeds, run / "warm_start", Path(scratch) / "grpo"
        )
        grpo = replace(grpo, logging=replace(grpo.logging, progress=False))
        wall, stats = profiled(lambda: recipe._stage_grpo(grpo))
        rows = [json.loads(line) for line in (Path(scratch) / "grpo" / "metrics.jsonl").read_text().splitlines()]
    rollout = sum(r["time/rollout_s"] for r in rows if "time/rollout_s" in r)
    update = sum(r["time/update_s"] for r in rows if "time/update_s" in r)
    generating = cumulative(stats, "transformers_engine.py:_generate_batch")
    truncating = cumulative(stats, "transformers_engine.py:truncate_logits")
    reference = cumulative(stats, "update.py:per_sample_logprobs")
    stepped = rollout + update
    return {
        "steps": steps,
        "wall_s": wall,
        "step_s": stepped / steps,
        "shares": {
            "generating (engine)": generating / stepped,
            "  of which top-p truncation": truncating / stepped,
            "rollout outside the engine (episodes, env, encoder)": (rollout - generating) / stepped,
            "update": update / stepped,
            "  of which the reference pass": reference / stepped,
        },
        "model_forwards_per_step": fewest_calls(stats, "modeling_qwen2.py:forward") / steps,
    }


def fewest_calls(stats: pstats.Stats, suffix: str) -> float:
    """Calls of the least-called function named ``file:function`` by ``suffix``: of a model file's ``forward``s,
    the whole model's (one a decoded token, plus the update's few), not a layer's."""
    calls = [
        total_calls
        for (filename, _, name), (_, total_calls, _, _, _) in stats.stats.items()  # type: ignore[attr-defined]
        if f"{filename}:{name}".endswith(suffix)
    ]
    return float(min(calls)) if calls else 0.0


def main() -> None:
    import torch

    from agemem.core.encoders import build_encoder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a finished seed directory of `agemem learn` (runs/learn/seed_0)")
    parser.add_argument("--tasks", type=int, default=200, help="tasks the expert plays under the profiler")
    parser.add_argument("--sft-steps", type=int, default=20, help="SFT optimizer steps under the profiler")
    parser.add_argument("--grpo-steps", type=int, default=3, help="GRPO steps under the profiler")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "learn_profile.json"))
    args = parser.parse_args()
    run = Path(args.run)
    needed = [run / "result.json", run / "tokenizer", run / "demonstrations.jsonl", run / "warm_start", run / "grpo"]
    if missing := [str(p) for p in needed if not p.exists()]:
        raise SystemExit(f"--run {run}: missing {', '.join(missing)}; give a seed directory `agemem learn` finished")
    try:  # the settings the run was made with: the GRPO stage saved its whole config
        tree = json.loads((run / "grpo" / "config.json").read_text())
        config = config_from_tree(tree, "learn")
    except (OSError, ValueError, ConfigError) as err:
        raise SystemExit(f"--run {run}: cannot read the run's settings from grpo/config.json ({err})") from err
    console = Console(width=140)

    report: dict[str, Any] = {"run": str(run), "torch_threads": torch.get_num_threads(), **stage_table(run)}
    table = Table(title=f"{run}: stages (its own record)")
    for column in ("stage", "minutes", "peak GiB", "notes"):
        table.add_column(column, justify="right" if column != "stage" else "left")
    for stage in report["stages"].values():
        notes = ""
        if "sft_minutes" in stage:
            notes = f"SFT {stage['sft_minutes']:.1f} min"
        if "median_step_s" in stage:
            notes = (
                f"{stage['steps']} steps, median {stage['median_step_s']:.1f} s "
                f"(rollout {stage['median_rollout_s']:.1f}, update {stage['median_update_s']:.1f})"
            )
        peak = f"{stage['peak_gib']:.2f}" if stage["peak_gib"] is not None else ""
        table.add_row(stage["what"], f"{stage['minutes']:.1f}", peak, notes)
    table.add_row("all", f"{report['total_minutes']:.1f}", f"{report['peak_gib'] or 0:.2f}", "")
    console.print(table)

    encoder = build_encoder(config.env.encoder)
    console.print(f"profiling the demonstrations ({args.tasks} tasks) ...")
    report["demonstrations"] = profile_demonstrations(config, run, args.tasks, encoder)
    report["writing"] = writing_side_by_side(run)
    console.print(f"profiling the SFT ({args.sft_steps} steps) ...")
    report["sft"] = profile_sft(config, run, args.sft_steps)
    console.print(f"profiling GRPO ({args.grpo_steps} steps) ...")
    report["grpo"] = profile_grpo(config, run, args.grpo_steps)

    inside = Table(title="inside each stage (cProfile, share of the profiled run's time)")
    for column in ("stage", "profiled", "where the time goes", "share"):
        inside.add_column(column, justify="right" if column == "share" else "left")
    described = {
        "demonstrations": f"{args.tasks} tasks, {report['demonstrations']['wall_s']:.0f} s",
        "sft": f"{args.sft_steps} steps, {report['sft']['step_s']:.2f} s a step",
        "grpo": f"{args.grpo_steps} steps, {report['grpo']['step_s']:.1f} s a step",
    }
    for name, what in described.items():
        for index, (part, share) in enumerate(report[name]["shares"].items()):
            inside.add_row(name if index == 0 else "", what if index == 0 else "", part, f"{share:.0%}")
    console.print(inside)
    console.print(f"GRPO: {report['grpo']['model_forwards_per_step']:.0f} model forwards a step (one a decoded token)")
    writing = report["writing"]
    per_1000 = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in writing["seconds_per_1000"].items())
    console.print(f"writing 1,000 trajectories: {per_1000} ({writing['speedup']:.1f}x, the same bytes)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

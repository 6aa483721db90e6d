"""Does GRPO improve memory use, and does the composite reward beat answer-only? The `agemem learn` recipe.

Runs tokenizer -> SFT warm start on the imperfect expert -> held-out eval -> step-wise GRPO ->
held-out eval for each seed (composite reward). With ``--ablation`` each seed also trains the other
reward arms from **the same warm start** (its tokenizer, demonstrations, warm-start weights and
warm-start evaluation are linked from the first arm's seed directory, not retrained), and every arm's
GRPO policy plays the same held-out tasks with the same sampling seeds, so arms are compared per task:

* ``composite``    — the shipped reward (``reward.mode=composite``, terms read by their effects);
* ``answer_only``  — R = R_task + penalties (``reward.mode=answer_only``);
* ``paper``        — the composite with the paper's literal terms (``reward.terms=paper``);
* ``current``      — the composite with storage judged against every fact the task holds true and maintenance
  paid for stale facts brought up to date (``reward.terms=current``; synthetic tasks);
* ``penalty_stage3``, ``std_floor_0.05``, ``std_floor_0.1`` — the composite with the round-limit penalty on
  Stage-3 rounds only, or an advantage std floor: the settings whose defaults this comparison chose;
* ``stage_tools_paper`` — the composite with each stage offering only the paper's tools
  (``rollout.stage_tools=paper``) instead of all six everywhere.

Prints each arm's before/after table and the arms' comparison (EM difference to ``composite`` with a
95% Student-t interval across seeds and pooled over all paired episodes, plus what each arm learned),
and writes ``learning*.json`` / ``.png`` and ``<--name>.{json,png}`` to ``--results``.
Opt-in: one seed takes about half an hour on a 2-core CPU, each extra arm another quarter hour.

    python bench/learning.py                                    # seeds 0-4, configs/learn_cpu.yaml
    python bench/learning.py --ablation                         # composite vs answer_only, seeds 0-4
    python bench/learning.py --ablation --arms composite answer_only paper --seeds 0 1
    python bench/learning.py --ablation --report                # only compile what finished runs wrote
    python bench/learning.py --ablation --arms composite paper --seeds 0 --reuse composite=runs/learn
                                                                # an arm's finished seeds from another run
    python bench/learning.py --seeds 0 max_steps=60             # any config override (key=value), anywhere

Seeds are independent: two processes may run different ``--seeds`` into the same ``--runs`` (give each
``OMP_NUM_THREADS=1`` on a 2-core machine: two 2-thread torch processes spin against each other), then
``--report`` compiles all of them.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig

ARMS: dict[str, list[str]] = {
    "composite": ["reward.mode=composite", "reward.terms=effects"],
    "answer_only": ["reward.mode=answer_only"],
    "paper": ["reward.mode=composite", "reward.terms=paper"],
    "current": ["reward.mode=composite", "reward.terms=current"],
    "penalty_stage3": ["reward.mode=composite", "reward.round_limit_scope=stage3"],
    "std_floor_0.05": ["reward.mode=composite", "grpo.advantage_std_floor=0.05"],
    "std_floor_0.1": ["reward.mode=composite", "grpo.advantage_std_floor=0.1"],
    "stage_tools_paper": ["reward.mode=composite", "rollout.stage_tools=paper"],
}
"""arm -> its config overrides (the shipped defaults elsewhere): reward arms, and the settings whose defaults were
chosen by this comparison (the round-limit penalty's scope, the advantage's std floor)."""
SHARED_STAGES = ("tokenizer", "demonstrations.jsonl", "drills.jsonl", "warm_start", "eval_warm_start.jsonl")
"""a seed's outputs before GRPO: trained once by the first arm, linked into the others."""
LEARNED = (
    "em",
    "stored_fact",
    "stored_distractor",
    "retrieved",
    "violations",
    "context_tokens",
    "retrieved_before_answer",
    "updated_stale",
    "stale_kept",
    "managed_context",
)
"""what each arm's GRPO policy does on the held-out tasks (means of recipes.learn.evaluate's episode scores),
the useful use of each tool included (nan where an evaluation predates its metric)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/learn_cpu.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--ablation", action="store_true", help="also train the other reward arms (--arms)")
    parser.add_argument("--arms", nargs="+", default=["composite", "answer_only"], choices=sorted(ARMS))
    parser.add_argument("--report", action="store_true", help="run nothing; compile the finished seeds' reports")
    parser.add_argument("--runs", default="runs/bench_learning", help="run directories (resumable)")
    parser.add_argument("--results", default="bench/results", help="where the reports and plots are copied")
    parser.add_argument("--name", default="reward_ablation", help="file name of the arms' comparison (.json, .png)")
    parser.add_argument(
        "--reuse",
        action="append",
        default=[],
        metavar="ARM=DIR",
        help="link ARM's seed_N directories found under DIR (an earlier run's output_dir) into --runs instead of "
        "training them; repeatable",
    )
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value, anywhere on the line")
    return parser


def main() -> None:
    parser = build_parser()
    options, overrides = split_overrides(sys.argv[1:], parser)
    args = parser.parse_args(options)
    args.overrides = overrides
    arms = args.arms if args.ablation else ["composite"]
    if arms[0] != "composite":
        parser.error("the first arm must be composite: the others are compared with it")

    from agemem.recipes.learn import learn, report_table

    console = Console()
    runs, results = Path(args.runs), Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    configs = {arm: arm_config(args.config, args.overrides, arm, runs / arm) for arm in arms}
    seeds = args.seeds
    for spec in args.reuse:
        arm, _, source = spec.partition("=")
        if arm not in arms or not source:
            parser.error(f"--reuse {spec}: expected ARM=DIR with ARM one of {arms}")
        link_finished_seeds(Path(source), runs / arm, seeds)
    if args.report:
        seeds = [s for s in seeds if all((runs / arm / f"seed_{s}" / "result.json").exists() for arm in arms)]
        if not seeds:
            parser.error(f"no seed of {args.seeds} has finished every arm of {arms} under {runs}")
    else:
        for seed in seeds:  # seed-major: the first arm's warm start exists before the others link it
            for arm in arms:
                if arm != arms[0]:
                    link_shared_stages(runs / arms[0] / f"seed_{seed}", runs / arm / f"seed_{seed}")
                learn(_with_seeds(configs[arm], [seed]))
    for arm in arms:
        report = learn(_with_seeds(configs[arm], seeds))  # every seed finished: this only reads and compares
        console.print(report_table(report))
        name = "learning" if arm == "composite" else f"learning_{arm}"
        (results / f"{name}.json").write_text(json.dumps({k: v for k, v in report.items() if k != "config"}, indent=2))
        shutil.copyfile(runs / arm / "learning.png", results / f"{name}.png")
    if len(arms) > 1:
        comparison = compare_arms(runs, arms, seeds)
        console.print(arms_table(comparison))
        (results / f"{args.name}.json").write_text(json.dumps(comparison, indent=2))
        plot_arms(comparison, results / f"{args.name}.png")
    console.print(f"written to {results}/")


def split_overrides(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """(options, config overrides): overrides are taken out first, since after ``--seeds 0`` argparse would read
    ``train.learning_rate=1e-4`` as a seed. A ``key=value`` is an override unless it is the value of an option that
    takes exactly one (``--reuse composite=DIR``, ``--runs a=b``)."""
    one_value = {name for action in parser._actions if action.nargs is None for name in action.option_strings}
    options, overrides = [], []
    for i, arg in enumerate(argv):
        is_option_value = i > 0 and argv[i - 1] in one_value
        (overrides if "=" in arg and not arg.startswith("-") and not is_option_value else options).append(arg)
    return options, overrides


def arm_config(path: str, overrides: list[str], arm: str, run_dir: Path):
    return load_config(AgeMemConfig, path, [*overrides, *ARMS[arm], f"output_dir={run_dir}"])


def _with_seeds(config, seeds: list[int]):
    from dataclasses import replace

    return replace(config, learn=replace(config.learn, seeds=list(seeds)))


def link_shared_stages(source: Path, target: Path) -> None:
    """Link a seed's pre-GRPO outputs from the first arm's directory into another arm's (idempotent)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in SHARED_STAGES:
        if not (source / name).exists():
            raise FileNotFoundError(f"{source / name} is missing: run the first arm of this seed first")
        _link(source / name, target / name)


def link_finished_seeds(source: Path, target: Path, seeds: list[int]) -> list[int]:
    """Link each ``source/seed_N`` of ``seeds`` that exists as ``target/seed_N`` (an arm's finished seeds from another
    run, read back instead of retrained); returns the seeds linked. Idempotent; a seed that ``target`` already holds
    as something else is an error, as is a ``source`` with none of the seeds."""
    found = [s for s in seeds if (source / f"seed_{s}").is_dir()]
    if not found:
        raise FileNotFoundError(f"--reuse: no seed_N directory of seeds {seeds} under {source}")
    target.mkdir(parents=True, exist_ok=True)
    for seed in found:
        _link(source / f"seed_{seed}", target / f"seed_{seed}")
    return found


def _link(origin: Path, link: Path) -> None:
    """``link`` -> ``origin`` (resolved); nothing when it already points there, an error when ``link`` is anything
    else, so a resumed ablation links nothing twice and never silently swaps an arm's own output for another's."""
    origin = origin.resolve()
    if link.is_symlink() and link.resolve() == origin:
        return
    if link.exists() or link.is_symlink():
        raise FileExistsError(f"{link} exists and is not a link to {origin}: remove it, or drop the --reuse")
    link.symlink_to(origin, target_is_directory=origin.is_dir())


def compare_arms(runs: Path, arms: list[str], seeds: list[int]) -> dict[str, Any]:
    """Each arm's held-out EM against the first arm's, paired by task (same tasks, same sampling seeds,
    same warm start), per seed, across seeds (t over per-seed means) and pooled (t over all pairs)."""
    from agemem.recipes.learn.evaluate import USEFUL_USE, ci_dict, mean_scores, paired_differences, read_scores

    base_arm = arms[0]
    scores = {arm: {s: read_scores(runs / arm / f"seed_{s}" / "eval_grpo.jsonl") for s in seeds} for arm in arms}
    warm = {s: mean_scores(read_scores(runs / base_arm / f"seed_{s}" / "eval_warm_start.jsonl")) for s in seeds}
    learned = {arm: {s: mean_scores(scores[arm][s]) for s in seeds} for arm in arms}
    differences: dict[str, Any] = {}
    for arm in arms[1:]:
        per_seed, pooled = {}, []
        for seed in seeds:
            try:
                diffs = paired_differences(scores[base_arm][seed], scores[arm][seed], "em")
            except ValueError as error:
                raise ValueError(f"seed {seed}: arms {base_arm} and {arm} scored different held-out tasks") from error
            per_seed[str(seed)] = ci_dict(diffs)
            pooled += diffs
        differences[f"{arm} - {base_arm}"] = {
            "per_seed": per_seed,
            "across_seeds": ci_dict([per_seed[str(s)]["mean"] for s in seeds]) if len(seeds) > 1 else None,
            "pooled": ci_dict(pooled),
            "pairs": len(pooled),
        }
    # each tool's useful use, paired the same way and pooled over the seeds' tasks: None where a file lacks it
    useful_use = {}
    for arm in arms[1:]:
        useful_use[f"{arm} - {base_arm}"] = {}
        for tool, metric in USEFUL_USE.items():
            pairs = [d for s in seeds for d in paired_differences(scores[base_arm][s], scores[arm][s], metric)]
            useful_use[f"{arm} - {base_arm}"][tool] = None if any(math.isnan(d) for d in pairs) else ci_dict(pairs)
    return {
        "what": "held-out EM of GRPO policies trained from the same warm start with different rewards, "
        "paired by task and sampling seed (bench/learning.py --ablation)",
        "arms": {arm: ARMS[arm] for arm in arms},
        "seeds": seeds,
        "warm_start": {str(s): {m: warm[s][m] for m in LEARNED} for s in seeds},
        "learned": {arm: {str(s): {m: v[m] for m in LEARNED} for s, v in per.items()} for arm, per in learned.items()},
        "learned_mean": {
            arm: {m: sum(v[m] for v in per.values()) / len(per) for m in LEARNED} for arm, per in learned.items()
        },
        "em_difference": differences,
        "useful_use_difference_pooled": useful_use,
        "training_em": {arm: {str(s): training_em(runs / arm / f"seed_{s}") for s in seeds} for arm in arms},
    }


def training_em(seed_dir: Path, *, window: int = 10) -> dict[str, float] | None:
    """Mean training EM (``episode/exact_match``) of the first and the last ``window`` GRPO steps: how fast the arm's
    answers rose in training; None without the GRPO stage's metrics."""
    path = seed_dir / "grpo" / "metrics.jsonl"
    if not path.exists():
        return None
    steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ems = [s["episode/exact_match"] for s in steps if "episode/exact_match" in s]
    if not ems:
        return None
    return {"first": sum(ems[:window]) / len(ems[:window]), "last": sum(ems[-window:]) / len(ems[-window:])}


def arms_table(comparison: dict[str, Any]) -> Table:
    arms, seeds = list(comparison["arms"]), comparison["seeds"]
    table = Table(title=f"reward arms from the same warm starts, held-out tasks, seeds {seeds}")
    table.add_column("metric (mean over seeds)")
    table.add_column("warm start", justify="right")
    for arm in arms:
        table.add_column(arm, justify="right")
    for metric in LEARNED:
        warm = sum(comparison["warm_start"][str(s)][metric] for s in seeds) / len(seeds)
        table.add_row(metric, f"{warm:.3f}", *(f"{comparison['learned_mean'][a][metric]:.3f}" for a in arms))
    for name, diff in comparison["em_difference"].items():
        arm = name.split(" - ")[0]
        rows = [(f"seed {seed}", diff["per_seed"][str(seed)]) for seed in seeds]
        rows += [(key, diff[key]) for key in ("across_seeds", "pooled") if diff[key] is not None]
        for label, d in rows:  # the difference sits in its arm's column
            interval = f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
            table.add_row(f"EM {name}, {label}", "", *(interval if a == arm else "" for a in arms))
    return table


def plot_arms(comparison: dict[str, Any], path: Path) -> None:
    """Left: held-out EM per seed, the warm start and each arm's GRPO policy. Right: each tool's useful use (the
    mean over seeds), the same bars."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    from agemem.recipes.learn.evaluate import USEFUL_USE

    arms, seeds = list(comparison["arms"]), comparison["seeds"]
    bars = ["warm start", *arms]
    width = 0.8 / len(bars)
    fig, (ax, tools) = plt.subplots(
        1, 2, figsize=(6 + 1.4 * len(seeds), 3.8), gridspec_kw={"width_ratios": [1 + 0.7 * len(seeds), 2.2]}
    )
    for i, name in enumerate(bars):
        per_seed = comparison["warm_start"] if name == "warm start" else comparison["learned"][name]
        values = [sum(per_seed[str(s)][metric] for s in seeds) / len(seeds) for metric in USEFUL_USE.values()]
        tools.bar([x + (i - (len(bars) - 1) / 2) * width for x in range(len(USEFUL_USE))], values, width, label=name)
    tools.set_xticks(range(len(USEFUL_USE)), list(USEFUL_USE), fontsize=8)
    tools.set(ylabel="useful use, mean over seeds", ylim=(0, 1), title="each tool where it helps")
    for i, name in enumerate(bars):
        values = [
            comparison["warm_start"][str(s)]["em"]
            if name == "warm start"
            else comparison["learned"][name][str(s)]["em"]
            for s in seeds
        ]
        ax.bar([x + (i - (len(bars) - 1) / 2) * width for x in range(len(seeds))], values, width, label=name)
    ax.set_xticks(range(len(seeds)), [f"seed {s}" for s in seeds])
    ax.set(ylabel="held-out exact match", ylim=(0, 1), title="arms from one warm start")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()

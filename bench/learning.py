"""Does GRPO improve memory use? The `agemem learn` pipeline over several seeds, plus the ablation.

Runs tokenizer -> SFT warm start on the imperfect expert -> held-out eval -> step-wise GRPO ->
held-out eval for each seed (composite reward), and with ``--ablation`` the same seeds again with
``reward.mode=answer_only``. Prints the before/after table of each and writes the reports (JSON)
and plots (PNG) to ``bench/results/``. Opt-in: one seed takes minutes on a laptop CPU.

    python bench/learning.py                         # seeds 0-4, configs/learn_cpu.yaml
    python bench/learning.py --seeds 0 --ablation    # one seed, both reward modes
    python bench/learning.py --seeds 0 max_steps=60  # any config override (key=value), anywhere
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from rich.console import Console

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/learn_cpu.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--ablation", action="store_true", help="also run the seeds with answer_only rewards")
    parser.add_argument("--runs", default="runs/bench_learning", help="run directories (resumable)")
    parser.add_argument("--results", default="bench/results", help="where the reports and plots are copied")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value, anywhere on the line")
    # overrides are taken out first: after `--seeds 0` argparse would read `train.learning_rate=1e-4` as a seed
    argv = sys.argv[1:]
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    args = parser.parse_args([a for a in argv if a not in overrides])
    args.overrides = overrides

    from agemem.recipes.learn import learn, report_table

    console = Console()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    modes = ["composite", "answer_only"] if args.ablation else ["composite"]
    for mode in modes:
        run_dir = Path(args.runs) / mode
        overrides = [*args.overrides, f"learn.seeds={args.seeds}", f"reward.mode={mode}", f"output_dir={run_dir}"]
        config = load_config(AgeMemConfig, args.config, overrides)
        report = learn(config)
        console.print(report_table(report))
        name = "learning" if mode == "composite" else f"learning_{mode}"
        (results / f"{name}.json").write_text(json.dumps({k: v for k, v in report.items() if k != "config"}, indent=2))
        shutil.copyfile(run_dir / "learning.png", results / f"{name}.png")
    console.print(f"written to {results}/")


if __name__ == "__main__":
    main()

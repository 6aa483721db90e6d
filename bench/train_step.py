"""Where a GRPO step's time goes, and what step merging saves, on the tiny CPU config.

Runs ``agemem train`` in one process on the same config and seed with ``train.merge_steps=true``
and ``false``, alternating (``--repeats`` rounds, so machine noise hits both alike; the rollouts are
identical, seeded per step), and prints per-step medians: the time split rollout / score / update /
sync, tokens forwarded in the update with and without merging, and training tokens/s. The
numbers are medians over steps 2.. (step 1 also loads the encoder and builds distractors).

    python bench/train_step.py                      # configs/tiny_cpu.yaml, 4 steps per variant
    python bench/train_step.py --steps 3 key=value  # any config override
    python bench/train_step.py --config configs/hotpotqa_qwen2.5_7b.yaml   # on a GPU node
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agemem.config import AgeMemConfig
from agemem.configlib import load_config

KEYS = [
    ("time/rollout_s", "rollout s"),
    ("time/score_s", "score s"),
    ("time/update_s", "update s"),
    ("time/sync_s", "sync s"),
    ("time/step_s", "step s"),
    ("samples/llm_steps", "LLM steps"),
    ("samples/merged_steps", "merged steps"),
    ("samples/tokens_unmerged", "tokens if unmerged"),
    ("samples/tokens_forwarded", "tokens forwarded"),
    ("samples/completion_tokens", "completion tokens"),
    ("throughput/train_tokens_per_s", "train tok/s (forwarded)"),
    ("throughput/generated_tokens_per_s", "generated tok/s"),
]


def run_variant(config_path: str, overrides: list[str], steps: int, merge: bool, out: Path) -> list[dict]:
    from train.loop import train

    config = load_config(
        AgeMemConfig,
        config_path,
        [*overrides, f"max_steps={steps}", f"output_dir={out}", f"train.merge_steps={str(merge).lower()}",
         "checkpoint.every=0", "logging.progress=false"],
    )  # fmt: skip
    return train(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/tiny_cpu.yaml")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="alternating rounds of both variants")
    parser.add_argument("--out", default="bench/results/train_step.json")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    history: dict[str, list[dict]] = {"merged": [], "unmerged": []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for merge in (True, False) if repeat % 2 == 0 else (False, True):
                name = "merged" if merge else "unmerged"
                steps = run_variant(args.config, args.overrides, args.steps, merge, Path(tmp) / f"{name}_{repeat}")
                history[name] += steps[1:] or steps  # step 1 also loads the encoder and builds distractors
    results = {
        name: {key: statistics.median(m[key] for m in runs) for key, _ in KEYS} for name, runs in history.items()
    }
    table = Table(title=f"GRPO step on {args.config} (median of steps 2..{args.steps} x {args.repeats} runs)")
    table.add_column("metric")
    for name in results:
        table.add_column(name, justify="right")
    for key, label in KEYS:
        table.add_row(label, *(f"{results[name][key]:,.2f}" for name in results))
    merged, unmerged = results["merged"], results["unmerged"]
    saved = 1 - merged["samples/tokens_forwarded"] / merged["samples/tokens_unmerged"]
    speedup = unmerged["time/update_s"] / merged["time/update_s"]
    Console().print(table)
    Console().print(f"merging forwards {saved:.1%} fewer tokens; update time unmerged / merged = {speedup:.2f}x")
    record = {"config": args.config, "overrides": args.overrides, "steps": args.steps, "repeats": args.repeats,
              "results": results,
              "tokens_saved_fraction": saved, "update_speedup": speedup}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

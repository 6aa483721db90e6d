"""Where a GRPO step's time goes, and what a setting changes, on the tiny CPU config.

Runs ``agemem train`` in one process on the same config and seed once per variant (by default
``train.merge_steps=true`` and ``false``: what step merging saves), variants rotating over
``--repeats`` rounds so machine noise hits all alike (the first step's rollouts are identical, seeded
per step), and prints per-step medians: the time split rollout / score / update / sync, tokens
forwarded in the update, the share of prompt tokens the engine served from its prefix cache, and
training tokens/s. The numbers are medians over steps 2.. (step 1 also loads the encoder and builds
distractors). Speed-ups are against the first variant.

    python bench/train_step.py                      # configs/tiny_cpu.yaml, 4 steps per variant
    python bench/train_step.py --steps 3 key=value  # any config override, for every variant
    python bench/train_step.py --config configs/learn_cpu.yaml policy.model=runs/learn/seed_0/warm_start \
        policy.tokenizer=runs/learn/seed_0/warm_start \
        --variant fp32:train.mixed_precision=no --variant bf16:train.mixed_precision=bf16
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

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig

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
    ("throughput/prefix_cache_share", "prompt tokens from prefix cache"),
    ("throughput/train_tokens_per_s", "train tok/s (forwarded)"),
    ("throughput/generated_tokens_per_s", "generated tok/s"),
]


DEFAULT_VARIANTS = ["merged:train.merge_steps=true", "unmerged:train.merge_steps=false"]


def parse_variant(spec: str) -> tuple[str, list[str]]:
    """``name:key=value[,key=value...]`` -> (name, overrides)."""
    name, sep, overrides = spec.partition(":")
    if not sep or not name or any("=" not in o for o in overrides.split(",")):
        raise SystemExit(f"--variant {spec!r}: write it as name:key=value[,key=value...]")
    return name, overrides.split(",")


def run_variant(config_path: str, overrides: list[str], steps: int, out: Path) -> list[dict]:
    from accelerate.state import AcceleratorState

    from agemem.train.loop import train

    # accelerate keeps one state per process; a variant may ask for another mixed precision
    AcceleratorState._reset_state(reset_partial_state=True)

    config = load_config(
        AgeMemConfig,
        config_path,
        [*overrides, f"max_steps={steps}", f"output_dir={out}", "checkpoint.every=0", "logging.progress=false"],
    )
    return train(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/tiny_cpu.yaml")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="alternating rounds of both variants")
    parser.add_argument("--out", default="bench/results/train_step.json")
    parser.add_argument("--variant", action="append", help="name:key=value[,...]; repeat (default: merged, unmerged)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    variants = dict(parse_variant(spec) for spec in args.variant or DEFAULT_VARIANTS)
    names = list(variants)
    history: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:
                out = Path(tmp) / f"{name}_{repeat}"
                steps = run_variant(args.config, [*args.overrides, *variants[name]], args.steps, out)
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
    reference = results[names[0]]
    speedups = {
        name: {part: reference[f"time/{part}_s"] / r[f"time/{part}_s"] for part in ("update", "rollout", "step")}
        for name, r in results.items()
    }
    table.add_row(f"update speed-up (vs {names[0]})", *(f"{speedups[n]['update']:.2f}x" for n in names))
    table.add_row(f"step speed-up (vs {names[0]})", *(f"{speedups[n]['step']:.2f}x" for n in names))
    Console().print(table)
    for name, r in results.items():
        saved = 1 - r["samples/tokens_forwarded"] / r["samples/tokens_unmerged"]
        Console().print(f"{name}: merging forwards {saved:.1%} fewer tokens than one sample per step would")
    record = {"config": args.config, "overrides": args.overrides, "variants": variants, "steps": args.steps,
              "repeats": args.repeats, "results": results, "speedups": speedups}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

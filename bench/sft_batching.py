"""Warm-start (SFT) speed: random batches padded to their longest row, against length-balanced micro-batches.

The warm start's rows range from ~200 tokens (answer-copy turns) to ~1,000 (a whole episode, a copy
sequence). A random batch of 18 pads every row to its longest: about 1.8 tokens computed per real token.
``learn.sft_micro_batches=k`` keeps the random batch of 18 but splits it, sorted by length, into k
micro-batches (transformers' ``batch_rebalance`` sampler) and accumulates: the same update (the loss is
normalised by the whole batch's completion tokens; ``tests/train/test_sft.py`` checks the weights), fewer
padded tokens and shorter attention spans.

The rows are a real warm start's: the demonstrations, reading drills and answer-copy turns that
``agemem learn`` wrote for one seed (``--run``), with the configured copy rows mixed in. Every mode trains a
fresh copy of the same random model for ``--steps`` optimizer steps, in the same process, modes rotating
each repeat; the median seconds a step over ``--repeats`` is reported, with the padded tokens a real token
costs (counted over one epoch of each mode's batches) and the last logged loss.

    python bench/sft_batching.py --run runs/learn/seed_0
    python bench/sft_batching.py --run runs/learn/seed_0 --micro 1 2 3 6 --steps 20 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rollout_driver import machine_info  # bench/ is the script's directory

from agemem.config import AgeMemConfig
from agemem.configlib import ConfigError, load_config


def padding_per_real_token(lengths: list[int], batch_size: int, micro_batches: int, seed: int) -> float:
    """Tokens computed per real token over one epoch of batches as the trainer draws them."""
    import torch
    from transformers.trainer_pt_utils import BatchRebalanceSampler

    if micro_batches == 1:
        order = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(seed)).tolist()
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    else:
        batches = list(BatchRebalanceSampler(lengths, batch_size, dp_size=1, grad_accum=micro_batches, seed=seed))
    computed = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    return computed / sum(lengths)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a seed directory `agemem learn` wrote (runs/learn/seed_0)")
    parser.add_argument("--config", default="configs/learn_cpu.yaml", help="the learn settings the run used")
    parser.add_argument("--micro", type=int, nargs="+", default=[1, 3, 6], help="micro-batches a step to compare")
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps a measurement")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (its answer-copy turns, data order)")
    parser.add_argument("--out", default="bench/results/sft_batching.json")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. learn.sft_batch_size=24")
    return parser.parse_args()


def main() -> None:
    import torch
    from transformers import Qwen2ForCausalLM

    from agemem.chat import load_tokenizer
    from recipes.learn import answer_statements, sft_settings
    from rollouts.policy import tiny_qwen2_config
    from rollouts.records import read_trajectories
    from train.sft import supervised_warm_start, warm_start_dataset

    args = parse_args()
    run = Path(args.run)
    needed = [run / "tokenizer", run / "demonstrations.jsonl"]
    if missing := [str(p) for p in needed if not p.exists()]:
        raise SystemExit(f"--run {run}: missing {', '.join(missing)}; run `agemem learn` first (it writes them)")
    try:
        config = load_config(AgeMemConfig, args.config, args.overrides)
    except ConfigError as err:
        raise SystemExit(str(err)) from err
    learn = config.learn
    for micro in args.micro:
        if micro < 1 or learn.sft_batch_size % micro:
            raise SystemExit(f"--micro {micro} must divide learn.sft_batch_size={learn.sft_batch_size}")
    tokenizer = load_tokenizer(str(run / "tokenizer"))
    demos = list(read_trajectories(run / "demonstrations.jsonl"))
    drills = list(read_trajectories(run / "drills.jsonl")) if (run / "drills.jsonl").exists() else []
    statements = answer_statements(learn, args.seed)
    base = replace(sft_settings(learn, args.seed, progress=False), max_steps=args.steps)
    dataset, counts = warm_start_dataset(tokenizer, demos, base, drills=drills, answer_statements=statements)
    lengths = [len(ids) for ids in dataset["input_ids"]]
    console = Console()
    console.print(f"{len(lengths)} rows, {sum(lengths) / len(lengths):.0f} tokens on average, longest {max(lengths)}")

    # 1. train each mode for --steps from the same random model, modes rotating each repeat
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        initial = Qwen2ForCausalLM(tiny_qwen2_config(config.policy, len(tokenizer))).state_dict()
    runs: dict[int, list[dict[str, Any]]] = {micro: [] for micro in args.micro}
    for repeat in range(args.repeats):
        shift = repeat % len(args.micro)
        for micro in args.micro[shift:] + args.micro[:shift]:
            model = Qwen2ForCausalLM(tiny_qwen2_config(config.policy, len(tokenizer)))
            model.load_state_dict(initial)
            with tempfile.TemporaryDirectory() as scratch:
                metrics = supervised_warm_start(
                    model,
                    tokenizer,
                    demos,
                    replace(base, micro_batches=micro),
                    scratch,
                    drills=drills,
                    answer_statements=statements,
                )
            runs[micro].append(metrics)
            step_s = metrics["train_runtime"] / args.steps
            console.print(f"repeat {repeat + 1}/{args.repeats}, {micro} micro-batch(es): {step_s:.2f} s a step")

    # 2. table and JSON
    rows = {}
    for micro, results in runs.items():
        rows[micro] = {
            "step_s": statistics.median(r["train_runtime"] for r in results) / args.steps,
            "padded_per_real_token": padding_per_real_token(lengths, learn.sft_batch_size, micro, args.seed),
            "final_loss": results[0]["final_loss"],
        }
    reference = rows[args.micro[0]]["step_s"]
    table = Table(title=f"SFT, {learn.sft_batch_size} rows a step, {args.steps} steps (median of {args.repeats})")
    for column in ("micro-batches", "s / step", "computed / real tokens", "loss at the end", "speed-up"):
        table.add_column(column, justify="right")
    for micro, row in rows.items():
        table.add_row(
            str(micro),
            f"{row['step_s']:.2f}",
            f"{row['padded_per_real_token']:.2f}",
            f"{row['final_loss']:.3f}",
            f"{reference / row['step_s']:.2f}x",
        )
    console.print(table)
    steps_per_seed = -(-len(lengths) // learn.sft_batch_size) * learn.sft_epochs
    minutes = (f"{micro} micro-batch(es) {row['step_s'] * steps_per_seed / 60:.1f} min" for micro, row in rows.items())
    console.print(f"a whole warm start is {steps_per_seed:.0f} steps: " + ", ".join(minutes))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "args": vars(args),
        "machine": machine_info(model, torch.get_num_threads()),
        "rows": len(lengths),
        "row_counts": counts,
        "mean_row_tokens": sum(lengths) / len(lengths),
        "warm_start_steps": steps_per_seed,
        "modes": {str(micro): row for micro, row in rows.items()},
        "speedup": {str(micro): reference / row["step_s"] for micro, row in rows.items()},
    }
    out.write_text(json.dumps(report, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

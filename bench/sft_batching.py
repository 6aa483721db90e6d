"""Warm-start speed: SFT step time by batching, attention kernel, gradient checkpointing and loss head; copy warm-up.

The warm start's rows range from ~200 tokens (answer-copy turns) to ~1,000 (a whole episode, a copy
sequence). A random batch of 18 pads every row to its longest: about 1.8 tokens computed per real token.
``learn.sft_micro_batches=k`` keeps the random batch of 18 but splits it, sorted by length, into k
micro-batches (transformers' ``batch_rebalance`` sampler) and accumulates: the same update (the loss is
normalised by the whole batch's completion tokens; ``tests/recipes/test_sft.py`` checks the weights), fewer
padded tokens and shorter attention spans; with k = 18 a row is alone and nothing is padded. TRL's
``SFTConfig`` also turns gradient checkpointing on by default (a second forward pass a step, for memory a
1.1M-parameter model does not need), and the attention kernel (``learn.warm_start_attention``) matters at
these widths. TRL's own loss scores every position with a chunked LM head and masks all but the completions;
the recipe's trainer (:func:`agemem.recipes.learn.sft.completion_loss`) runs the head on the completion
positions only, the same loss (``tests/recipes/test_sft.py``).

A mode is ``micro-batches:attention[:gc][:trl]`` (``gc``: gradient checkpointing on; ``trl``: TRL's loss). The
default modes go from TRL's defaults to the recipe's settings one change at a time. The rows are a real warm
start's: the demonstrations, reading drills and answer-copy turns that ``agemem learn`` wrote for one seed (``--run``),
with the configured copy rows mixed in. Every mode trains a fresh copy of the same random model for
``--steps`` optimizer steps, in the same process, modes rotating each repeat; the median seconds a step
over ``--repeats`` is reported, with the padded tokens a real token costs and the last logged loss. The
copy warm-up (``recipes/learn/copy_task.py``) is timed the same way for each attention kernel (``--copy-steps``).

    python bench/sft_batching.py --run runs/learn/seed_0
    python bench/sft_batching.py --run runs/learn/seed_0 --modes 3:sdpa:trl 3:sdpa 18:sdpa --steps 20 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rollout_driver import machine_info  # bench/ is the script's directory

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig

DEFAULT_MODES = ["1:sdpa:gc:trl", "3:sdpa:gc:trl", "3:sdpa:trl", "3:sdpa", "18:sdpa"]


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


def parse_mode(spec: str, batch_size: int) -> tuple[int, str, bool, bool]:
    """``k:attention[:gc][:trl]`` -> (micro-batches, attention kernel, gradient checkpointing, TRL's loss)."""
    parts = spec.split(":")
    try:
        micro, attention = int(parts[0]), parts[1]
    except (ValueError, IndexError):
        raise SystemExit(
            f"--modes {spec!r}: write a mode as micro-batches:attention[:gc][:trl], e.g. 3:eager"
        ) from None
    flags = parts[2:]
    if attention not in ("eager", "sdpa") or flags not in ([], ["gc"], ["trl"], ["gc", "trl"]):
        raise SystemExit(
            f"--modes {spec!r}: attention is eager or sdpa, then ':gc' and ':trl' may follow, in that order"
        )
    if micro < 1 or batch_size % micro:
        raise SystemExit(f"--modes {spec!r}: {micro} micro-batches must divide learn.sft_batch_size={batch_size}")
    return micro, attention, "gc" in flags, "trl" in flags


def trl_loss_trainer_class(seeded: type) -> type:
    """The recipe's trainer class ``seeded`` with TRL's own loss (every position scored, the rest masked)."""
    from trl import SFTTrainer

    class TRLLossTrainer(seeded):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return SFTTrainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)

    return TRLLossTrainer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a seed directory `agemem learn` wrote (runs/learn/seed_0)")
    parser.add_argument("--config", default="configs/learn_cpu.yaml", help="the learn settings the run used")
    parser.add_argument("--modes", nargs="+", default=DEFAULT_MODES, help="micro-batches:attention[:gc] each")
    parser.add_argument("--steps", type=int, default=30, help="SFT optimizer steps a measurement")
    parser.add_argument("--copy-steps", type=int, default=100, help="copy warm-up steps a measurement; 0: skip")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (its answer-copy turns, data order)")
    parser.add_argument("--out", default="bench/results/sft_batching.json")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. learn.sft_batch_size=24")
    return parser.parse_args()


def main() -> None:
    import torch
    from transformers import Qwen2ForCausalLM

    from agemem.core.chat import load_tokenizer
    from agemem.recipes.learn import sft
    from agemem.recipes.learn.copy_task import CopySettings, induction_warmup
    from agemem.recipes.learn.recipe import answer_statements, sft_settings
    from agemem.recipes.learn.sft import supervised_warm_start, warm_start_dataset
    from agemem.rollouts.policy import tiny_qwen2_config
    from agemem.rollouts.records import read_trajectories

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
    modes = {spec: parse_mode(spec, learn.sft_batch_size) for spec in args.modes}
    tokenizer = load_tokenizer(str(run / "tokenizer"))
    demos = list(read_trajectories(run / "demonstrations.jsonl"))
    drills = list(read_trajectories(run / "drills.jsonl")) if (run / "drills.jsonl").exists() else []
    statements = answer_statements(learn, args.seed)
    base = replace(sft_settings(learn, args.seed, progress=False), max_steps=args.steps)
    dataset, counts = warm_start_dataset(tokenizer, demos, base, drills=drills, answer_statements=statements)
    lengths = [len(ids) for ids in dataset["input_ids"]]
    console = Console(width=150)
    console.print(f"{len(lengths)} rows, {sum(lengths) / len(lengths):.0f} tokens on average, longest {max(lengths)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        initial = Qwen2ForCausalLM(tiny_qwen2_config(config.policy, len(tokenizer))).state_dict()

    def fresh_model(attention: str) -> Qwen2ForCausalLM:
        model = Qwen2ForCausalLM(tiny_qwen2_config(config.policy, len(tokenizer)))
        model.load_state_dict(initial)
        model.set_attn_implementation(attention)
        return model

    # 1. SFT: train each mode for --steps from the same random model, modes rotating each repeat
    names = list(modes)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            micro, attention, checkpointing, trl_loss = modes[name]
            settings = replace(base, micro_batches=micro, gradient_checkpointing=checkpointing)
            recipe_trainer = sft._seeded_trainer_class
            if trl_loss:  # the bench's one switch of the trainer class: the product has no TRL-loss setting
                sft._seeded_trainer_class = partial(trl_loss_trainer_class, recipe_trainer())
            try:
                with tempfile.TemporaryDirectory() as scratch:
                    metrics = supervised_warm_start(
                        fresh_model(attention), tokenizer, demos, settings, scratch, drills=drills,
                        answer_statements=statements,
                    )  # fmt: skip
            finally:
                sft._seeded_trainer_class = recipe_trainer
            runs[name].append(metrics)
            console.print(f"repeat {repeat + 1}/{args.repeats}, {name}: {metrics['train_runtime'] / args.steps:.2f} s")

    # 2. the copy warm-up, per attention kernel
    copy_ms: dict[str, list[float]] = {attention: [] for attention in dict.fromkeys(m[1] for m in modes.values())}
    for _ in range(args.repeats if args.copy_steps else 0):
        for attention in copy_ms:
            copying = CopySettings(args.copy_steps, learn.copy_learning_rate, seed=args.seed, progress=False)
            start = time.perf_counter()
            induction_warmup(fresh_model(attention), tokenizer, copying)
            copy_ms[attention].append((time.perf_counter() - start) / args.copy_steps * 1000)

    # 3. tables and JSON
    rows = {}
    for name, results in runs.items():
        micro = modes[name][0]
        rows[name] = {
            "step_s": statistics.median(r["train_runtime"] for r in results) / args.steps,
            "padded_per_real_token": padding_per_real_token(lengths, learn.sft_batch_size, micro, args.seed),
            "final_loss": results[0]["final_loss"],
        }
    reference = rows[names[0]]["step_s"]
    steps_per_seed = -(-len(lengths) // learn.sft_batch_size) * learn.sft_epochs
    table = Table(title=f"SFT, {learn.sft_batch_size} rows a step, {args.steps} steps (median of {args.repeats})")
    columns = ("mode", "micro-batches", "attention", "checkpointing", "loss head", "s / step", "computed / real tokens")
    for column in (*columns, "loss at the end", "warm start min", "speed-up"):
        table.add_column(column, justify="right")
    for name, row in rows.items():
        micro, attention, checkpointing, trl_loss = modes[name]
        table.add_row(
            name, str(micro), attention, "on" if checkpointing else "off", "TRL's" if trl_loss else "completions",
            f"{row['step_s']:.2f}",
            f"{row['padded_per_real_token']:.2f}", f"{row['final_loss']:.3f}",
            f"{row['step_s'] * steps_per_seed / 60:.1f}", f"{reference / row['step_s']:.2f}x",
        )  # fmt: skip
    console.print(table)
    console.print(f"a whole warm start is {steps_per_seed:.0f} SFT steps")
    copy_rows = {attention: statistics.median(ms) for attention, ms in copy_ms.items() if ms}
    if copy_rows:
        copy_table = Table(title=f"copy warm-up, {args.copy_steps} steps (median of {args.repeats})")
        for column in ("attention", "ms / step", f"{learn.copy_steps} steps, min"):
            copy_table.add_column(column, justify="right")
        for attention, ms in copy_rows.items():
            copy_table.add_row(attention, f"{ms:.0f}", f"{ms * learn.copy_steps / 60_000:.1f}")
        console.print(copy_table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "args": vars(args),
        "machine": machine_info(fresh_model("sdpa"), torch.get_num_threads()),
        "rows": len(lengths),
        "row_counts": counts,
        "mean_row_tokens": sum(lengths) / len(lengths),
        "warm_start_steps": steps_per_seed,
        "modes": rows,
        "speedup": {name: reference / row["step_s"] for name, row in rows.items()},
        "copy_ms_per_step": copy_rows,
    }
    out.write_text(json.dumps(report, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

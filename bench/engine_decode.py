"""Decoding speed of the transformers engine: finished rows leave the batch, against ``model.generate``.

In a memory episode most replies are short (a tool call, an answer) and a few are long (a whole
message copied into ``Add_memory``). ``model.generate`` keeps every row of a micro-batch in every
forward pass until its longest row ends, so the short rows' KV caches are read at every step of
the long row's tail. :class:`~agemem.rollouts.engines.transformers_engine.TransformersEngine` drops a row
and its cache the step it stops.

The workload is real: the synthetic memory task is played once by the policy (``--model``, e.g. the
warm start ``agemem learn`` writes), sampling as ``--config`` says, and the prompts of every driver
tick are recorded. Each tick is then decoded again, greedily, by both decoders, in the same
process, modes alternating and their order rotating each repeat; the median over ``--repeats`` is
reported. Greedy decoding makes the work identical, and the table checks it: ``same output`` is the
share of rows whose tokens agree (float noise between a padded and a compacted batch can flip a
near-tie, rarely). ``row-steps`` counts rows x forward passes: the work each decoder asked for.

    python bench/engine_decode.py --model runs/learn/seed_0/warm_start         # 8 tasks x 8 rollouts
    python bench/engine_decode.py --model runs/learn/seed_0/warm_start --tasks 4 --k 4 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rollout_driver import machine_info  # bench/ is the script's directory

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.engines.base import Completion, SamplingParams
from agemem.rollouts.engines.transformers_engine import left_pad


class RecordingEngine:
    """Passes calls through and keeps every call's prompts (one list per driver tick)."""

    def __init__(self, inner: Any):
        self.inner, self.name, self.ticks = inner, inner.name, []

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams, *, messages=None):
        self.ticks.append([list(p) for p in prompts])
        return self.inner.generate(prompts, sampling, messages=messages)


def generate_reference(model: Any, prompts: list[list[int]], sampling: SamplingParams, pad_id: int) -> list[list[int]]:
    """``model.generate`` over one left-padded micro-batch: every row runs until the longest ends."""
    import torch
    from transformers import GenerationConfig

    ids_BP, mask_BP = left_pad(prompts, pad_id)
    width = ids_BP.shape[1]
    config = GenerationConfig(
        max_new_tokens=sampling.max_tokens,
        do_sample=not sampling.greedy,
        temperature=None if sampling.greedy else sampling.temperature,
        top_p=None if sampling.greedy else sampling.top_p,
        top_k=None if sampling.greedy else sampling.top_k,
        eos_token_id=list(sampling.stop_token_ids),
        pad_token_id=pad_id,
    )
    with torch.no_grad():
        out_BT = model.generate(input_ids=ids_BP, attention_mask=mask_BP, generation_config=config)[:, width:]
    stops = set(sampling.stop_token_ids)
    rows = []
    for ids in out_BT.tolist():
        end = next((i + 1 for i, t in enumerate(ids) if t in stops), len(ids))
        rows.append(ids[:end])
    return rows


def micro_batches(prompts: list[list[int]], size: int) -> list[list[list[int]]]:
    """The engine's split: sorted by length, cut into ``size``-row micro-batches."""
    ordered = sorted(prompts, key=len)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def decode_all(mode: str, engine: Any, ticks: list[list[list[int]]], sampling: SamplingParams) -> dict[str, Any]:
    pad_id = engine.pad_token_id
    outputs: list[list[int]] = []
    row_steps = forward_passes = 0
    import torch

    torch.manual_seed(0)
    start = time.perf_counter()
    for tick in ticks:
        for batch in micro_batches(tick, engine.batch_size):
            if mode == "generate":
                rows = generate_reference(engine.model, batch, sampling, pad_id)
                longest = max(len(r) for r in rows)
                row_steps += len(rows) * longest
            else:
                completions: list[Completion] = engine._generate_batch(batch, sampling)
                rows = [c.token_ids for c in completions]
                lengths = sorted(len(r) for r in rows)
                longest = lengths[-1]
                row_steps += sum(lengths)  # a row is in the batch up to and including its last token's step
            forward_passes += longest
            outputs.extend(rows)
    return {
        "wall_s": time.perf_counter() - start,
        "outputs": outputs,
        "row_steps": row_steps,
        "forward_passes": forward_passes,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a policy directory (e.g. runs/learn/seed_0/warm_start)")
    parser.add_argument("--config", default="configs/learn_cpu.yaml", help="task, env and sampling settings")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--k", type=int, default=8, help="rollouts per task")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sampled",
        action="store_true",
        help="decode with the config's sampling instead of greedily: the long tails of real rollouts (a derailed "
        "copy runs to max_tokens) show, but the two decoders draw different tokens, so work matches on average only",
    )
    parser.add_argument("--out", default="", help="default: bench/results/engine_decode[_sampled].json")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. engine.batch_size=64")
    return parser.parse_args()


def main() -> None:
    import torch

    from agemem.core.chat import end_of_turn_ids
    from agemem.rollouts.build import build_driver, build_engine, build_resources, distractors_for
    from agemem.rollouts.policy import load_policy
    from agemem.tasks import load_tasks

    args = parse_args()
    if not Path(args.model).is_dir():
        raise SystemExit(
            f"--model {args.model}: no such directory; `agemem learn` writes one at <run>/seed_0/warm_start"
        )
    try:
        config = load_config(AgeMemConfig, args.config, args.overrides)
    except ConfigError as err:
        raise SystemExit(str(err)) from err
    config = replace(config, policy=replace(config.policy, model=args.model, tokenizer=args.model))
    synthetic = replace(config.data.synthetic, num_tasks=args.tasks, seed=args.seed + 7000)
    tasks = load_tasks(replace(config, data=replace(config.data, source="synthetic", limit=0, synthetic=synthetic)))
    console = Console()

    # 1. play the tasks once as configured (K rollouts each), recording every tick's prompts
    model, tokenizer = load_policy(config.policy)
    resources = build_resources(config.env, tokenizer)
    engine = build_engine(config.engine, model, tokenizer)
    recorder = RecordingEngine(engine)
    driver = build_driver(config.rollout, config.sampling, recorder, tokenizer, resources)
    driver.run(
        tasks, distractors_for(config.distractors, tasks, resources.encoder), rollouts_per_task=args.k, seed=args.seed
    )
    ticks = recorder.ticks
    stop_ids = tuple(end_of_turn_ids(tokenizer))
    if args.sampled:
        decoding = replace(driver.sampling, seed=None)
    else:
        decoding = SamplingParams(temperature=0.0, max_tokens=config.sampling.max_tokens, stop_token_ids=stop_ids)

    # 2. decode every tick with both decoders, alternating
    runs: dict[str, list[dict[str, Any]]] = {"generate": [], "engine": []}
    modes = list(runs)
    for repeat in range(args.repeats):
        for mode in modes[repeat % 2 :] + modes[: repeat % 2]:
            runs[mode].append(decode_all(mode, engine, ticks, decoding))
            console.print(f"repeat {repeat + 1}/{args.repeats} {mode}: {runs[mode][-1]['wall_s']:.1f} s")

    # 3. table and JSON
    reference = runs["generate"][0]["outputs"]
    rows = {}
    for mode, results in runs.items():
        outputs = results[0]["outputs"]
        rows[mode] = {
            "wall_s": statistics.median(r["wall_s"] for r in results),
            "forward_passes": results[0]["forward_passes"],
            "row_steps": results[0]["row_steps"],
            "generated_tokens": sum(len(o) for o in outputs),
            "same_output": sum(a == b for a, b in zip(outputs, reference)) / len(reference),
        }
    how = "sampled (as configured)" if args.sampled else "greedy"
    table = Table(title=f"{how} decoding of {sum(len(t) for t in ticks)} recorded prompts ({len(ticks)} ticks)")
    for column in ("decoder", "wall s", "forward passes", "row-steps", "tokens", "tok/s", "same output", "speed-up"):
        table.add_column(column, justify="right")
    base = rows["generate"]["wall_s"]
    for mode, row in rows.items():
        table.add_row(
            "model.generate" if mode == "generate" else "engine (rows leave)",
            f"{row['wall_s']:.1f}",
            str(row["forward_passes"]),
            str(row["row_steps"]),
            str(row["generated_tokens"]),
            f"{row['generated_tokens'] / row['wall_s']:.0f}",
            "n/a" if args.sampled else f"{row['same_output']:.1%}",
            f"{base / row['wall_s']:.2f}x",
        )
    console.print(table)
    out = Path(args.out or f"bench/results/engine_decode{'_sampled' if args.sampled else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "args": vars(args),
        "machine": machine_info(engine.model, torch.get_num_threads()),
        "prompts": sum(len(t) for t in ticks),
        "ticks": len(ticks),
        "batch_size": engine.batch_size,
        "rows": rows,
        "speedup": base / rows["engine"]["wall_s"],
    }
    out.write_text(json.dumps(report, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

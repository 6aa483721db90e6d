"""Optimizer-step time of DeepSpeed ZeRO-2 and ZeRO-3 against DDP: the same model, batch and update code
(``agemem.train.update.policy_update``), 2 processes, launched with the shipped ``launch/accelerate/*.yaml``.

On a GPU-less machine the launches get the CPU overrides the tests use (2 processes, no mixed
precision, gloo): those timings show that ZeRO runs and what its bookkeeping costs next to DDP on
the same transport; they say nothing about NCCL on GPUs, where ZeRO's point is memory, not speed.

    python bench/zero_step.py                          # hidden 256 x 4 layers (43M parameters), 2 x 4 timed steps
    python bench/zero_step.py --steps 10 --hidden 512 --layers 8
    python bench/zero_step.py --worker OUT.json ...    # one launch's rank (started by the above)

Each step is one GRPO mini-batch: a forward + backward per micro-batch on each rank's 4 samples and one
optimizer step (AdamW; ZeRO shards its state). The first step (allocation, ZeRO-3's parameter trace) is
not timed; the table gives the median and min of the timed steps of all rounds (rank 0's wall clock
between barriers). On a shared machine the min is the steadier number.
Results: ``bench/results/zero_step.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAUNCHES = [("DDP", "ddp.yaml"), ("ZeRO-2", "zero2.yaml"), ("ZeRO-3", "zero3.yaml")]


def _samples(count: int, length: int, seed: int = 0):
    import torch

    from agemem.train.samples import TrainSample

    generator = torch.Generator().manual_seed(seed)
    samples = []
    for index in range(count):
        n = length - 8 * (index % 4)  # uneven lengths: padding and micro-batch packing as in training
        mask = [0] * (n // 2) + [1] * (n - n // 2)
        ids = torch.randint(0, 1000, (n,), generator=generator).tolist()
        engine = [-11.9 if m else 0.0 for m in mask]
        samples.append(TrainSample(ids, mask, engine, [n - n // 2], (-1.0) ** index, index, True))
    return samples


def worker(args: argparse.Namespace) -> None:
    import torch
    from transformers import get_scheduler

    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy
    from agemem.train.config import GRPOConfig, TrainConfig
    from agemem.train.distributed import build_accelerator, configure_deepspeed, describe
    from agemem.train.policy import TokenLogprobs
    from agemem.train.update import policy_update

    accelerator = build_accelerator("no")
    train = TrainConfig(learning_rate=1e-5, micro_batch_tokens=args.micro_batch_tokens)
    configure_deepspeed(accelerator, train)
    policy_cfg = PolicyConfig(device="cpu", tiny_hidden_size=args.hidden, tiny_layers=args.layers, tiny_heads=8)
    lm, tokenizer = load_policy(policy_cfg)
    parameters = sum(p.numel() for p in lm.parameters())
    policy = TokenLogprobs(lm, chunk=256)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=train.learning_rate)
    policy, optimizer = accelerator.prepare(policy, optimizer)
    scheduler = get_scheduler("constant", optimizer)
    samples = _samples(8, args.tokens)[accelerator.process_index :: accelerator.num_processes]
    grpo = GRPOConfig(beta=0.0)
    times = []
    for step in range(args.steps + 1):
        accelerator.wait_for_everyone()
        start = time.perf_counter()
        policy_update(accelerator, policy, optimizer, scheduler, None, samples, grpo, train, tokenizer.pad_token_id)
        accelerator.wait_for_everyone()
        if step:  # step 0 warms up
            times.append(time.perf_counter() - start)
    if accelerator.is_main_process:
        record = {**describe(accelerator), "parameters": parameters, "step_s": times}
        Path(args.worker).write_text(json.dumps(record))
    accelerator.end_training()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(config_name: str, out: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    command += ["--config_file", str(REPO / "launch" / "accelerate" / config_name)]
    cuda = "CUDA_VISIBLE_DEVICES" not in os.environ and _has_cuda()
    if not cuda:  # the CPU overrides (tests/train/launching.py)
        command += ["--num_processes", "2", "--num_machines", "1", "--machine_rank", "0", "--mixed_precision", "no"]
    else:
        command += ["--num_processes", "2", "--num_machines", "1", "--machine_rank", "0"]
    command += ["--main_process_ip", "127.0.0.1", "--main_process_port", str(_free_port())]
    command += [__file__, "--worker", str(out)]
    command += ["--steps", str(args.steps), "--hidden", str(args.hidden), "--layers", str(args.layers)]
    command += ["--tokens", str(args.tokens), "--micro-batch-tokens", str(args.micro_batch_tokens)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    env.update(OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{config_name} failed:\n{result.stderr[-4000:]}")
    return json.loads(out.read_text())


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=4, help="timed optimizer steps per launch")
    parser.add_argument("--rounds", type=int, default=2, help="launches of each setup, alternating")
    parser.add_argument("--hidden", type=int, default=256, help="tiny Qwen2 hidden size")
    parser.add_argument("--layers", type=int, default=4, help="tiny Qwen2 layers")
    parser.add_argument("--tokens", type=int, default=256, help="longest sample, tokens (8 samples, 4 a rank)")
    parser.add_argument("--micro-batch-tokens", type=int, default=512, help="train.micro_batch_tokens")
    parser.add_argument("--only", nargs="+", choices=[name for name, _ in LAUNCHES], help="launches to run (all)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "zero_step.json"))
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    from rich.console import Console
    from rich.table import Table

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):  # launches alternate, so load from other jobs hits each alike
            for name, config_name in LAUNCHES:
                if args.only and name not in args.only:
                    continue
                record = launch(config_name, Path(tmp) / f"{config_name}.json", args)
                print(f"round {round_ + 1} {name}: {statistics.median(record['step_s']):.3f} s a step", file=sys.stderr)
                if name in results:
                    record["step_s"] = results[name]["step_s"] + record["step_s"]
                results[name] = record
    for record in results.values():
        record["median_step_s"] = statistics.median(record["step_s"])
        record["min_step_s"] = min(record["step_s"])
    base = next(iter(results.values()))["median_step_s"]
    first = next(iter(results))
    table = Table(title=f"optimizer step, 2 processes, {results[first]['parameters'] / 1e6:.1f}M parameters")
    for column in ("launch", "backend", "median s", "min s", f"vs {first}"):
        table.add_column(column, justify="right" if column != "launch" else "left")
    for name, record in results.items():
        backend = f"{record['distributed']} / {record['backend']} / {record['device']}"
        ratio = f"{record['median_step_s'] / base:.2f}x"
        table.add_row(name, backend, f"{record['median_step_s']:.3f}", f"{record['min_step_s']:.3f}", ratio)
    Console().print(table)
    keys = ("steps", "rounds", "hidden", "layers", "tokens", "micro_batch_tokens")
    settings = {key: getattr(args, key) for key in keys}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    note = (
        "CPU gloo timings show ZeRO working and its overhead next to DDP on the same transport; "
        "they say nothing about NCCL on GPUs"
    )
    out.write_text(json.dumps({"settings": settings, "note": note, "results": results}, indent=2) + "\n")
    print(f"results: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""How long a checkpoint takes to write and to verify, and what that means for a preemption's grace period.

Measures on this machine, side by side in one run:

1. the trainer's real ``save_checkpoint`` (accelerate state with AdamW moments, the bf16 ``policy/`` and the
   manifest) of a randomly initialised Qwen2-shaped model of ``--params-m`` million parameters, with and
   without sha256 checksums, and ``verify`` of the result with and without checksums;
2. raw sequential write throughput (with fsync) and sha256 throughput (1 and 8 threads) over ``--gib`` GiB.

Then projects the save of the paper configs (full fine-tuning under ZeRO-2 on 8 ranks) from those rates:
what rank 0 writes (its optimizer shard, the bf16 model states and the consolidated ``policy/``) and what
the manifest hashes (the whole checkpoint, on rank 0). Cluster file systems differ: the rates are inputs,
printed with the result, so the projection can be redone with a cluster's own numbers (``--write-gbs``,
``--hash-gbs``). Numbers: docs/cluster.md#how-long-a-checkpoint-takes.

    python bench/checkpoint_io.py                     # ~2 GB of checkpoint and 2 GiB of raw I/O in /tmp
    python bench/checkpoint_io.py --dir /scratch/me   # measure the file system the runs write to
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

GB = 1e9
PAPER_MODELS = {"Qwen2.5-7B-Instruct": 7.62e9, "Qwen3-4B": 4.02e9}
"""parameters of the models the paper configs train (configs/hotpotqa_*.yaml; `agemem plan` counts them)."""
RANKS = 8


def save_and_verify(root: Path, params_m: int, checksums: bool) -> dict[str, float]:
    import torch
    from accelerate import Accelerator
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agemem.core.chat import load_tokenizer
    from agemem.core.runs import TrainerState, checkpoint_problems
    from agemem.train.checkpoint import save_checkpoint

    layers = max(1, round((params_m * 1e6 - 151936 * 768) / 6.2e6))
    config = Qwen2Config(
        vocab_size=151936, hidden_size=768, intermediate_size=2048, num_hidden_layers=layers,
        num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)

    class Policy(torch.nn.Module):  # the trainer's wrapper: the language model under .lm
        def __init__(self) -> None:
            super().__init__()
            self.lm = Qwen2ForCausalLM(config)

    accelerator = Accelerator(cpu=True)
    policy = Policy()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    loss = policy.lm(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss
    loss.backward()
    optimizer.step()  # AdamW's moments exist: the accelerate state is weights + 2 moments
    policy, optimizer = accelerator.prepare(policy, optimizer)
    tokenizer = load_tokenizer()  # the bundled Qwen tokenizer, saved into policy/ as a real run does
    started = time.perf_counter()
    path = save_checkpoint(
        accelerator, root, TrainerState(1, 1, 1), policy, tokenizer, keep_last=1, dtype="bfloat16", checksums=checksums
    )
    save_s = time.perf_counter() - started
    manifest = json.loads((path / "manifest.json").read_text())
    params_m = sum(p.numel() for p in policy.parameters()) / 1e6
    result = {"params_m": params_m, "bytes": manifest["bytes"], "save_s": save_s}
    for with_sums in (False, True):
        started = time.perf_counter()
        assert checkpoint_problems(path, checksums=with_sums) == []
        result[f"verify{'_sha256' if with_sums else ''}_s"] = time.perf_counter() - started
    shutil.rmtree(root / "checkpoints")
    return result


def raw_rates(root: Path, gib: float) -> dict[str, float]:
    from agemem.core.manifest import sha256_file

    chunk = os.urandom(64 << 20)
    files = [root / f"raw_{i}.bin" for i in range(8)]
    per_file = int(gib * (1 << 30) / len(files) / len(chunk))
    started = time.perf_counter()
    for path in files:
        with path.open("wb") as handle:
            for _ in range(per_file):
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
    written = sum(p.stat().st_size for p in files)
    rates = {"write_gbs": written / GB / (time.perf_counter() - started)}
    for threads in (1, 8):
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(sha256_file, files))
        rates[f"sha256_{threads}_threads_gbs"] = written / GB / (time.perf_counter() - started)
    for path in files:
        path.unlink()
    return rates


def project(write_gbs: float, hash_gbs: float) -> list[dict[str, Any]]:
    """Rank 0's save under ZeRO-2 on 8 ranks, bf16 compute: its shard of the fp32 master weights and AdamW's
    two moments (12 bytes a parameter / 8), the bf16 model states DeepSpeed writes, the bf16 policy/."""
    rows = []
    for name, params in PAPER_MODELS.items():
        rank0 = params * 12 / RANKS + params * 2 + params * 2
        total = params * 12 + params * 2 + params * 2
        rows.append({
            "model": name,
            "checkpoint_gb": total / GB,
            "rank0_writes_gb": rank0 / GB,
            "write_s": rank0 / GB / write_gbs,
            "sha256_s": total / GB / hash_gbs,
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="file system to measure")
    parser.add_argument("--params-m", type=int, default=160, help="model size of the real save, millions")
    parser.add_argument("--gib", type=float, default=2.0, help="raw I/O volume")
    parser.add_argument("--write-gbs", type=float, help="project with this write rate (GB/s) instead")
    parser.add_argument("--hash-gbs", type=float, help="project with this sha256 rate (GB/s) instead")
    parser.add_argument("--out", default="bench/results/checkpoint_io.json")
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        with console.status("raw write and sha256 rates"):
            rates = raw_rates(root, args.gib)
        saves = {}
        for checksums in (False, True):
            with console.status(f"save_checkpoint, checksums={checksums}"):
                saves["sha256" if checksums else "sizes"] = save_and_verify(root, args.params_m, checksums)
    write_gbs = args.write_gbs or rates["write_gbs"]
    hash_gbs = args.hash_gbs or rates["sha256_8_threads_gbs"]
    projection = project(write_gbs, hash_gbs)

    table = Table(title=f"checkpoint I/O in {args.dir}")
    for column in ("what", "GB", "seconds", "GB/s"):
        table.add_column(column, justify="right" if column != "what" else "left")
    for label, save in saves.items():
        gb = save["bytes"] / GB
        table.add_row(f"save_checkpoint, manifest with {label} ({save['params_m']:.0f}M params)", f"{gb:.2f}",
                      f"{save['save_s']:.2f}", f"{gb / save['save_s']:.2f}")  # fmt: skip
    hashed = saves["sha256"]  # its manifest has checksums: verify with them reads every byte again
    for key in ("verify_s", "verify_sha256_s"):
        gb = hashed["bytes"] / GB
        label = "verify (sizes, headers)" if key == "verify_s" else "verify (sizes, headers, sha256)"
        table.add_row(label, f"{gb:.2f}", f"{hashed[key]:.2f}", f"{gb / hashed[key]:.2f}")
    for key, value in rates.items():
        name = key.removesuffix("_gbs").replace("_", " ")
        table.add_row(f"raw {name}", f"{args.gib * 1.074:.2f}", "", f"{value:.2f}")
    console.print(table)
    paper = Table(title=f"projected save of the paper configs (ZeRO-2, {RANKS} ranks; {write_gbs:.2f} GB/s write, "
                  f"{hash_gbs:.2f} GB/s sha256)")  # fmt: skip
    for column in ("model", "checkpoint GB", "rank 0 writes GB", "write s", "sha256 s"):
        paper.add_column(column, justify="right" if column != "model" else "left")
    for row in projection:
        paper.add_row(row["model"], f"{row['checkpoint_gb']:.0f}", f"{row['rank0_writes_gb']:.0f}",
                      f"{row['write_s']:.0f}", f"{row['sha256_s']:.0f}")  # fmt: skip
    console.print(paper)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "what": "checkpoint save and verify times, raw write and sha256 rates, projected paper-config saves",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "dir": args.dir},
        "saves": saves, "rates": rates, "projection_rates_gbs": {"write": write_gbs, "sha256": hash_gbs},
        "projection": projection,
    }, indent=2))  # fmt: skip
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()

"""DeepSpeed's bf16 master weights, for ``test_deepspeed.py``: run under ``accelerate launch`` with
``launch/accelerate/zero2.yaml`` and ``--mixed_precision bf16``.

    accelerate launch --config_file launch/accelerate/zero2.yaml --num_processes 1 --mixed_precision bf16 \\
        tests/train/deepspeed_precision.py OUT.json

Builds the policy as ``agemem train`` does for a ``policy.dtype=bfloat16`` full fine-tune
(``plan_precision``: loaded in bf16, DeepSpeed holds the fp32 master), takes one ``policy_update`` at
lr 1e-6 and writes the dtypes it found and the share of fp32 master coordinates that moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script, sys.path[0] is tests/train

from agemem.rollouts.config import PolicyConfig
from agemem.train.config import GRPOConfig, TrainConfig


def main(out: Path) -> None:
    from transformers import get_scheduler

    from agemem.rollouts.policy import load_policy
    from agemem.train.distributed import build_accelerator, compute_precision, configure_deepspeed, zero_stage
    from agemem.train.policy import TokenLogprobs, plan_precision
    from agemem.train.update import policy_update
    from tests.train.distributed_update import make_samples

    accelerator = build_accelerator(None)  # the launch's --mixed_precision, as `agemem train` with it unset
    train = TrainConfig(learning_rate=1e-6, micro_batch_tokens=48)
    configure_deepspeed(accelerator, train)
    precision = plan_precision("bfloat16", compute_precision(accelerator), lora=False, deepspeed=True)
    lm, tokenizer = load_policy(PolicyConfig(device="cpu", dtype=precision.load_dtype))
    policy = TokenLogprobs(lm, chunk=16)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=train.learning_rate, weight_decay=0.0)
    policy, optimizer = accelerator.prepare(policy, optimizer)
    scheduler = get_scheduler("constant", optimizer)
    engine = accelerator.deepspeed_engine_wrapped.engine
    masters = engine.optimizer.single_partition_of_fp32_groups  # ZeRO-1/2: this rank's fp32 master partitions
    before = [m.detach().clone() for m in masters]
    module_before = [p.detach().clone() for p in engine.module.parameters()]
    policy_update(
        accelerator, policy, optimizer, scheduler, None, make_samples(), GRPOConfig(beta=0.0), train,
        tokenizer.pad_token_id,
    )  # fmt: skip
    moved = sum(int((m.detach() != b).sum()) for m, b in zip(masters, before))
    module_moved = sum(int((p.detach() != b).sum()) for p, b in zip(engine.module.parameters(), module_before))
    record = {
        "zero_stage": zero_stage(accelerator),
        "compute_precision": compute_precision(accelerator),
        "ds_bf16": accelerator.state.deepspeed_plugin.deepspeed_config["bf16"],
        "load_dtype": precision.load_dtype,
        "module_dtypes": sorted({str(p.dtype) for p in engine.module.parameters()}),
        "master_dtypes": sorted({str(m.dtype) for m in masters}),
        "master_moved_share": moved / sum(b.numel() for b in before),
        # the bf16 copy the forward uses: rounding hides most 1e-6 moves, which the master accumulates
        "module_moved_share": module_moved / sum(b.numel() for b in module_before),
        "engine_steps": engine.global_steps,
    }
    out.write_text(json.dumps(record, indent=2))
    accelerator.end_training()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""One ``policy_update`` of the tiny policy on a fixed batch of 8 samples, for the DDP and ZeRO equivalence tests.

    python tests/train/distributed_update.py OUT_DIR [CASE ...]
    accelerate launch --config_file launch/accelerate/ddp.yaml --num_processes 2 ... distributed_update.py OUT_DIR
    accelerate launch --config_file launch/accelerate/zero3.yaml --num_processes 2 ... distributed_update.py OUT_DIR

Rank ``r`` of ``w`` trains on ``samples[r::w]`` (with two ranks the shares differ in tokens and in
micro-batch count, so the short rank runs zero-weight padding repeats). The global batch is the
same for every launch, so the updated weights must be too. For every case the main process
writes ``OUT_DIR/CASE.pt`` (the trainable weights after the update, gathered from ZeRO shards:
the whole model, or the LoRA adapters) and ``OUT_DIR/CASE.json`` (the update's metrics, plus
``world_size``, ``distributed_type``, ``zero_stage`` and under DeepSpeed the engine's optimizer step
count); a one-process run also writes ``OUT_DIR/initial_CASE.pt``. The accelerator is built as
``agemem train`` builds it (``agemem.train.distributed.build_accelerator``): under ``accelerate launch`` with a
DeepSpeed config a ZeRO engine on gloo, otherwise DDP on gloo, or one process.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script, sys.path[0] is tests/train

from agemem.rollouts.config import PolicyConfig
from agemem.train.config import GRPOConfig, LoRAConfig, TrainConfig
from agemem.train.samples import TrainSample

# (prompt tokens, completion tokens of each segment, masked tokens between segments): rank 0 of two gets
# the long even-indexed samples (4 micro-batches at MICRO_BATCH_TOKENS), rank 1 the short odd ones (2)
LAYOUT = [
    (30, [12, 8], 6),
    (6, [5], 0),
    (25, [20], 0),
    (8, [7, 5], 3),
    (20, [15], 0),
    (4, [9], 0),
    (14, [6, 10], 4),
    (5, [6], 0),
]
ADVANTAGES = [1.2, -0.8, -0.5, 1.5, 0.9, -0.3, -1.0, 0.7]
WITHOUT_ENGINE_LOGPROBS = {3, 6}
MICRO_BATCH_TOKENS = 48
LOGPROB_CHUNK = 16
LEARNING_RATE = 1e-3

CASES: dict[str, tuple[str, dict, dict]] = {
    # name: (optimizer, GRPOConfig overrides, TrainConfig overrides)
    "token_mean": ("adamw", {"loss_aggregation": "token_mean"}, {}),
    "sequence_mean": ("adamw", {"loss_aggregation": "sequence_mean"}, {}),
    # 4 optimizer steps: logp_old recomputed, ratios away from 1 (clipping), KL > 0, truncated IS weights
    "multi_update": ("adamw", {"loss_aggregation": "token_mean", "tis_cap": 1.5}, {"epochs": 2, "mini_batches": 2}),
    # plain SGD (lr 1) without clipping: the step is minus the gradient itself, so a wrong global scale shows
    # (AdamW's step is invariant to it)
    "sgd": ("sgd", {"loss_aggregation": "token_mean"}, {"learning_rate": 1.0, "max_grad_norm": 0.0}),
    # LoRA adapters (fp32) on the frozen base, the reference the adapter-free base; 2 optimizer steps
    "lora": ("adamw", {"loss_aggregation": "token_mean"}, {"mini_batches": 2}),
}
LORA_CASES = {"lora"}
LORA = LoRAConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])


def make_samples(seed: int = 0) -> list[TrainSample]:
    """The fixed global batch: random ids < 1000, masked prompts and bridges, engine log-probs near the
    tiny model's (about -log(vocab))."""
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for index, ((prompt, segments, bridge), advantage) in enumerate(zip(LAYOUT, ADVANTAGES)):
        mask = [0] * prompt
        for k, n in enumerate(segments):
            if k:
                mask += [0] * bridge
            mask += [1] * n
        ids = torch.randint(0, 1000, (len(mask),), generator=generator).tolist()
        noise = (torch.rand(len(mask), generator=generator) - 0.5).tolist()
        has_engine = index not in WITHOUT_ENGINE_LOGPROBS
        engine = [(-11.9 + e) if m and has_engine else 0.0 for m, e in zip(mask, noise)]
        samples.append(TrainSample(ids, mask, engine, list(segments), advantage, index, has_engine))
    return samples


def run_case(accelerator, lm, pad_id: int, name: str, samples: list[TrainSample]) -> tuple[dict, dict, dict]:
    """(initial trainable state (one-process runs only), trained state, metrics) of one case."""
    from transformers import get_scheduler

    from agemem.train.distributed import configure_deepspeed, is_deepspeed
    from agemem.train.policy import Reference, TokenLogprobs, add_lora
    from agemem.train.update import policy_update

    optimizer_name, grpo_overrides, train_overrides = CASES[name]
    grpo = replace(GRPOConfig(beta=0.1), **grpo_overrides)
    train = replace(
        TrainConfig(learning_rate=LEARNING_RATE, max_grad_norm=1.0, micro_batch_tokens=MICRO_BATCH_TOKENS),
        **train_overrides,
    )
    configure_deepspeed(accelerator, train)
    if name in LORA_CASES:
        torch.manual_seed(1)  # the adapters' random init, the same on every rank and launch
        policy = TokenLogprobs(add_lora(copy.deepcopy(lm), LORA), chunk=LOGPROB_CHUNK)
        reference = Reference.adapters_disabled()
    else:
        policy = TokenLogprobs(copy.deepcopy(lm), chunk=LOGPROB_CHUNK)
        reference = Reference.frozen_copy(TokenLogprobs(copy.deepcopy(lm), chunk=LOGPROB_CHUNK), accelerator)
    params = [p for p in policy.parameters() if p.requires_grad]
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(params, lr=train.learning_rate)
    else:  # as agemem.train.loop.TrainRun
        optimizer = torch.optim.AdamW(
            params, lr=train.learning_rate, betas=tuple(train.adam_betas), weight_decay=train.weight_decay
        )
    policy, optimizer = accelerator.prepare(policy, optimizer)
    scheduler = get_scheduler(
        train.lr_scheduler, optimizer, num_warmup_steps=0, num_training_steps=train.epochs * train.mini_batches
    )
    initial = {}
    if accelerator.num_processes == 1:  # the trainable weights before the update (the adapters' random init)
        initial = {k: v.detach().clone() for k, v in accelerator.unwrap_model(policy).lm.state_dict().items()}
    if name in LORA_CASES:
        initial = {k: v for k, v in initial.items() if "lora_" in k}
    rank, world = accelerator.process_index, accelerator.num_processes
    metrics = policy_update(
        accelerator, policy, optimizer, scheduler, reference, samples[rank::world], grpo, train, pad_id
    )
    if is_deepspeed(accelerator):
        # optimizer steps the engine took: exactly one per mini-batch (accelerate < 1.8.1 stepped per micro-batch)
        metrics["engine_steps"] = accelerator.deepspeed_engine_wrapped.engine.global_steps
    # collective: ZeRO-3 gathers its partitioned parameters (every rank calls)
    full = accelerator.get_state_dict(policy)
    state = {k.removeprefix("lm."): v.detach().cpu() for k, v in full.items()} if full is not None else {}
    if name in LORA_CASES:
        state = {k: v for k, v in state.items() if "lora_" in k}
    accelerator.free_memory()
    return initial, state, metrics


def main(argv: list[str]) -> None:
    from agemem.rollouts.policy import load_policy
    from agemem.train.distributed import build_accelerator, zero_stage

    if not argv:
        raise SystemExit(__doc__)
    out = Path(argv[0])
    names = argv[1:] or list(CASES)
    torch.manual_seed(0)
    accelerator = build_accelerator("no")
    lm, tokenizer = load_policy(PolicyConfig(device="cpu"))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    samples = make_samples()
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
    for name in names:
        initial, state, metrics = run_case(accelerator, lm, pad_id, name, samples)
        if accelerator.is_main_process:
            if accelerator.num_processes == 1:
                torch.save(initial, out / f"initial_{name}.pt")
            torch.save(state, out / f"{name}.pt")
            record = {
                "world_size": accelerator.num_processes,
                "distributed_type": str(accelerator.distributed_type),
                "zero_stage": zero_stage(accelerator),
                "metrics": metrics,
            }
            (out / f"{name}.json").write_text(json.dumps(record, indent=2))
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main(sys.argv[1:])

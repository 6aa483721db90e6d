"""One policy update from a rank's training samples: log-probs, the GRPO loss, optimizer steps.

The loss weights of every token are fixed for the whole mini-batch across ranks before the first
forward (``agemem.train.loss.AGGREGATIONS``), so gradient accumulation over micro-batches and the
average over ranks reproduce the full-batch gradient exactly. Every rank runs the same number of
micro-batches (short ranks run zero-weight repeats): DeepSpeed ZeRO-3 gathers parameters
collectively in each forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from tqdm.auto import tqdm

from agemem.train.config import GRPOConfig, TrainConfig
from agemem.train.distributed import zero_stage
from agemem.train.loss import AGGREGATIONS, grpo_token_loss, truncated_is_weight
from agemem.train.policy import Reference, TokenLogprobs
from agemem.train.samples import TrainSample, micro_batches, split_evenly

if TYPE_CHECKING:
    from accelerate import Accelerator


@dataclass
class MicroBatch:
    """Right-padded rows and the flat (row, col) positions of their completion tokens."""

    input_ids_BT: torch.Tensor
    attention_mask_BT: torch.Tensor
    rows_N: torch.Tensor
    cols_N: torch.Tensor
    advantage_N: torch.Tensor
    weight_N: torch.Tensor
    """aggregation weight of each token (0 for a padding repeat)."""
    engine_logp_N: torch.Tensor
    """the engine's log-prob of each token (0 where it reported none)."""
    has_engine_N: torch.Tensor
    """1 where the engine reported the token's log-prob."""
    sample_slices: list[tuple[int, int, int]]
    """(sample index, start, end) of each sample's tokens in the flat N axis."""


def collate(
    samples: Sequence[TrainSample],
    indices: Sequence[int],
    weights: dict[int, list[float]],
    pad_id: int,
    device: Any,
) -> MicroBatch:
    width = max(len(samples[i]) for i in indices)
    input_ids = torch.full((len(indices), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(indices), width), dtype=torch.long)
    rows, cols, adv, weight, engine, has_engine, slices = [], [], [], [], [], [], []
    for row, index in enumerate(indices):
        sample = samples[index]
        input_ids[row, : len(sample)] = torch.tensor(sample.input_ids_T)
        attention[row, : len(sample)] = 1
        positions = [t for t, m in enumerate(sample.completion_mask_T) if m]
        slices.append((index, len(cols), len(cols) + len(positions)))
        rows += [row] * len(positions)
        cols += positions
        adv += [sample.advantage] * len(positions)
        weight += weights[index]
        known = sample.engine_known_T
        engine += [sample.engine_logprobs_T[t] if known[t] else 0.0 for t in positions]
        has_engine += [float(known[t]) for t in positions]
    as_float = {"dtype": torch.float32, "device": device}
    return MicroBatch(
        input_ids.to(device),
        attention.to(device),
        torch.tensor(rows, dtype=torch.long, device=device),
        torch.tensor(cols, dtype=torch.long, device=device),
        torch.tensor(adv, **as_float),
        torch.tensor(weight, **as_float),
        torch.tensor(engine, **as_float),
        torch.tensor(has_engine, **as_float),
        slices,
    )


def global_sum(accelerator: Accelerator | None, *values: float) -> list[float]:
    """Element-wise sum of ``values`` over ranks (identity on one process)."""
    if accelerator is None or accelerator.num_processes == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=accelerator.device)
    return accelerator.reduce(tensor, reduction="sum").tolist()


def global_max(accelerator: Accelerator | None, value: int) -> int:
    if accelerator is None or accelerator.num_processes == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.long, device=accelerator.device)
    return int(accelerator.gather(tensor).max().item())


def token_weights(
    samples: Sequence[TrainSample], indices: Sequence[int], rule: str, accelerator: Accelerator | None
) -> dict[int, list[float]]:
    """Aggregation weights of each sample's completion tokens over the global mini-batch."""
    tokens = sum(samples[i].completion_tokens for i in indices)
    segments = sum(len(samples[i].segment_lengths) for i in indices)
    total_tokens, total_segments = global_sum(accelerator, tokens, segments)
    world = accelerator.num_processes if accelerator is not None else 1
    # gradients are averaged over ranks; scaling by the world size turns that mean into the global sum
    aggregate = AGGREGATIONS[rule]
    return {
        i: [w * world for w in aggregate(samples[i].segment_lengths, int(total_tokens), int(total_segments))]
        for i in indices
    }


@torch.no_grad()
def per_sample_logprobs(
    module: TokenLogprobs,
    samples: Sequence[TrainSample],
    token_budget: int,
    pad_id: int,
    device: Any,
    accelerator: Accelerator | None = None,
    chunk: int = 1024,
) -> dict[int, torch.Tensor]:
    """Log-probs of every sample's completion tokens (no gradient): logp_old and the reference.

    With ``accelerator``, every rank runs the same number of forwards (repeats of its last micro-batch,
    results discarded), each calling the LM head as often (``chunk``: the module's ``logprob_chunk_tokens``):
    a ZeRO-3 forward gathers each layer's parameters collectively, so a rank with fewer calls would leave the
    others waiting in an all-gather forever.
    """
    out: dict[int, torch.Tensor] = {}
    zeros = {i: [0.0] * samples[i].completion_tokens for i in range(len(samples))}
    batches = micro_batches(samples, token_budget)
    steps = global_max(accelerator, len(batches))
    for i in range(steps):
        batch = collate(samples, batches[min(i, len(batches) - 1)] if batches else [0], zeros, pad_id, device)
        n_chunks = lockstep_chunks(accelerator, chunk, len(batch.rows_N))
        logp_N = module(batch.input_ids_BT, batch.attention_mask_BT, batch.rows_N, batch.cols_N, n_chunks=n_chunks)
        if i < len(batches):
            for index, start, end in batch.sample_slices:
                out[index] = logp_N[start:end]
    return out


def lockstep_chunks(accelerator: Accelerator | None, chunk: int, positions: int) -> int | None:
    """Under ZeRO-3 the number of LM-head calls every rank makes in this forward (the global maximum),
    else None (each rank chunks its own way)."""
    if accelerator is None or accelerator.num_processes == 1 or zero_stage(accelerator) != 3:
        return None
    return max(1, global_max(accelerator, -(-positions // chunk)))


@dataclass
class UpdateStats:
    values: dict[str, float]


def _set_sync(accelerator: Accelerator, sync: bool) -> None:
    # accelerate reads this flag: DeepSpeed reduces and steps in backward() only when it is set, and the
    # prepared optimizer skips step()/zero_grad() while it is unset
    accelerator.gradient_state._set_sync_gradients(sync)


def policy_update(
    accelerator: Accelerator,
    policy: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    reference: Reference | None,
    samples: Sequence[TrainSample],
    grpo: GRPOConfig,
    train: TrainConfig,
    pad_id: int,
    *,
    progress: bool = False,
) -> dict[str, float]:
    """``train.epochs`` x ``train.mini_batches`` optimizer steps on this rank's ``samples`` (``progress``: a bar
    over the micro-batches).

    ``policy`` is the accelerate-prepared :class:`TokenLogprobs`. With one epoch and one mini-batch
    the samples were generated by the current weights, so logp_old is the detached logp of the same
    forward (equal by construction, one forward saved); otherwise logp_old is recomputed here
    before the first update.
    """
    device = accelerator.device
    unwrapped: TokenLogprobs = accelerator.unwrap_model(policy)
    budget = train.micro_batch_tokens
    reuse_forward = train.epochs == 1 and train.mini_batches == 1
    policy.eval()  # no dropout in the no-grad passes
    chunk = unwrapped.chunk
    old = None if reuse_forward else per_sample_logprobs(policy, samples, budget, pad_id, device, accelerator, chunk)
    ref = None
    if grpo.beta > 0:
        assert reference is not None
        # the same autocast as the policy's forward (accelerate wraps only the prepared policy): under bf16 an
        # fp32 reference would differ from the identical initial policy by rounding, a KL floor that is noise
        with reference.model(unwrapped) as ref_module, accelerator.autocast():
            ref = per_sample_logprobs(ref_module, samples, budget, pad_id, device, accelerator, chunk)
    policy.train()

    sums = {"loss": 0.0, "kl": 0.0, "clipped": 0.0, "ratio": 0.0, "mismatch_k1": 0.0, "mismatch_abs": 0.0,
            "tis_excluded": 0.0}  # fmt: skip
    counts = {"tokens": 0.0, "engine_tokens": 0.0}
    grad_norms: list[float] = []
    engine = accelerator.deepspeed_engine_wrapped.engine if accelerator.distributed_type == "DEEPSPEED" else None
    first_step = engine.global_steps if engine is not None else 0
    # the update's micro-batches, counted as each mini-batch is split (a 7B update is minutes of silence otherwise);
    # shown after a second, when the first mini-batch has set the total
    with tqdm(desc="update", unit="micro-batch", total=0, disable=not progress, leave=False, delay=1.0) as bar:
        for _ in range(train.epochs):
            for mini in split_evenly(list(range(len(samples))), train.mini_batches):
                weights = token_weights(samples, mini, grpo.loss_aggregation, accelerator)
                batches = _sub_batches(samples, mini, budget)
                steps = global_max(accelerator, len(batches))
                bar.total += steps
                bar.refresh()
                for i in range(steps):
                    padding = i >= len(batches)  # a zero-weight repeat keeps collective forwards in step across ranks
                    indices = batches[min(i, len(batches) - 1)] if batches else [0]  # a mini-batch empty on this rank
                    batch = collate(
                        samples, indices, _zero_weights(samples, indices) if padding else weights, pad_id, device
                    )
                    last = i == steps - 1
                    _set_sync(accelerator, last)
                    # DDP all-reduces once, after the last micro-batch (a plain sum: the weights already span ranks)
                    with contextlib.nullcontext() if last else accelerator.no_sync(policy):
                        n_chunks = lockstep_chunks(accelerator, chunk, len(batch.rows_N))
                        logp_N, logp_old_N, loss, parts = _forward_backward(
                            accelerator, policy, batch, old, ref, grpo, n_chunks
                        )
                    bar.update(1)
                    if padding:
                        continue
                    n = float(len(logp_N))
                    sums["loss"] += loss.item()
                    sums["kl"] += float(parts["kl"].sum()) if "kl" in parts else 0.0
                    sums["clipped"] += float(parts["clipped"].sum())
                    sums["ratio"] += float(torch.exp(logp_N.detach() - logp_old_N).sum())
                    engine_mask = batch.has_engine_N
                    delta = (logp_old_N - batch.engine_logp_N) * engine_mask
                    sums["mismatch_k1"] += float(delta.sum())
                    sums["mismatch_abs"] += float(delta.abs().sum())
                    counts["tokens"] += n
                    counts["engine_tokens"] += float(engine_mask.sum())
                    if grpo.tis_cap is not None:
                        sums["tis_excluded"] += n - float(engine_mask.sum())
                grad_norms.append(_step(accelerator, policy, optimizer, scheduler, train.max_grad_norm))
                if engine is not None and engine.global_steps != first_step + len(grad_norms):
                    # accelerate < 1.8.1 let DeepSpeed step at every micro-batch's backward, whatever the sync flag
                    raise RuntimeError(
                        f"DeepSpeed took {engine.global_steps - first_step} optimizer steps for {len(grad_norms)} "
                        "mini-batches: the installed accelerate ignores the gradient-sync flag; pip install "
                        "'accelerate>=1.8.1'"
                    )
    total = dict(zip(list(sums) + list(counts), global_sum(accelerator, *sums.values(), *counts.values())))
    tokens, engine_tokens = max(total["tokens"], 1.0), max(total["engine_tokens"], 1.0)
    world = accelerator.num_processes
    updates = train.epochs * train.mini_batches
    return {
        # each rank's loss carries the world-size factor of the rank average; the global loss is their mean
        "loss": total["loss"] / world / updates,
        "kl": total["kl"] / tokens,
        "clip_fraction": total["clipped"] / tokens,
        "ratio_mean": total["ratio"] / tokens,
        "mismatch_kl_k1": total["mismatch_k1"] / engine_tokens,
        "mismatch_abs_logp": total["mismatch_abs"] / engine_tokens,
        "tis_excluded_fraction": total["tis_excluded"] / tokens,
        "grad_norm": sum(grad_norms) / len(grad_norms),
        "learning_rate": scheduler.get_last_lr()[0],
        "tokens_trained": total["tokens"] / updates,
    }


def _forward_backward(
    accelerator: Accelerator,
    policy: torch.nn.Module,
    batch: MicroBatch,
    old: dict[int, torch.Tensor] | None,
    ref: dict[int, torch.Tensor] | None,
    grpo: GRPOConfig,
    n_chunks: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Forward one micro-batch, backward its weighted loss; returns logp, logp_old, the loss and its parts."""
    logp_N = policy(batch.input_ids_BT, batch.attention_mask_BT, batch.rows_N, batch.cols_N, n_chunks=n_chunks)
    logp_old_N = logp_N.detach() if old is None else _gather(old, batch)
    is_weight_N = None
    if grpo.tis_cap is not None:
        engine_N = torch.where(batch.has_engine_N > 0, batch.engine_logp_N, logp_old_N)
        # a token whose sampling probability is unknown cannot be reweighted: it leaves the policy term (weight 0,
        # counted in train/tis_excluded_fraction), never a silent weight of 1
        is_weight_N = truncated_is_weight(logp_old_N, engine_N, grpo.tis_cap) * batch.has_engine_N
    loss_N, parts = grpo_token_loss(
        logp_N,
        logp_old_N,
        batch.advantage_N,
        eps_low=grpo.epsilon_low,
        eps_high=grpo.epsilon_high,
        beta=grpo.beta,
        ref_logp_N=_gather(ref, batch) if ref is not None else None,
        is_weight_N=is_weight_N,
    )
    loss = (loss_N * batch.weight_N).sum()
    accelerator.backward(loss)
    return logp_N, logp_old_N, loss, parts


def _sub_batches(samples: Sequence[TrainSample], indices: Sequence[int], budget: int) -> list[list[int]]:
    subset = [samples[i] for i in indices]
    return [[indices[j] for j in batch] for batch in micro_batches(subset, budget)]


def _zero_weights(samples: Sequence[TrainSample], indices: Sequence[int]) -> dict[int, list[float]]:
    return {i: [0.0] * samples[i].completion_tokens for i in indices}


def _gather(per_sample: dict[int, torch.Tensor], batch: MicroBatch) -> torch.Tensor:
    return torch.cat([per_sample[index] for index, _, _ in batch.sample_slices])


def _step(accelerator: Accelerator, policy: torch.nn.Module, optimizer: Any, scheduler: Any, max_norm: float) -> float:
    """Clip, step, schedule, zero; returns the pre-clip global gradient norm."""
    if accelerator.distributed_type == "DEEPSPEED":
        # the engine already clipped and stepped inside backward() at the boundary
        norm = accelerator.deepspeed_engine_wrapped.get_global_grad_norm()
        scheduler.step()
        return float(norm or 0.0)
    if max_norm > 0:
        norm = accelerator.clip_grad_norm_(policy.parameters(), max_norm)
    else:
        accelerator.unscale_gradients()  # fp16's loss scale (a no-op otherwise), as clip_grad_norm_ does
        norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in policy.parameters() if p.grad is not None))
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)

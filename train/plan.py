"""Plan before launch: the per-GPU memory of a training run, from the config alone.

``agemem plan`` (alias ``agemem train --dry-run``) adds up, per GPU, what a run of :func:`agemem.train.loop.train`
holds: the policy's weights, gradients and optimizer state under the ZeRO stage, the frozen reference,
the vLLM share, the activations of one micro-batch of ``train.micro_batch_tokens`` padded tokens and a
fixed runtime reserve. Nothing is loaded: the parameter count comes from the model's dimensions (a local
``config.json``, the Hugging Face cache, a built-in table of the models our configs name, or the tiny
model's :class:`~agemem.rollouts.config.PolicyConfig`).

Every component is live in some of three phases, and the verdict compares the largest phase with the GPU:

* ``rollout``  — generation: model states, reference, vLLM (or the transformers engine's KV cache);
* ``backward`` — one micro-batch's forward and backward: the above (vLLM only when not asleep) + activations;
* ``step``     — the optimizer step: model states plus the fp32 gradient DeepSpeed builds for the optimizer.

Byte counts per GPU, with Ψ the parameters, Ψ_t the trainable ones (Ψ, or the LoRA adapters'), N the GPUs:

=====================  ===================================  =========================  ==========================
component              ZeRO-0 (plain DDP, no DeepSpeed)      ZeRO-2 (DeepSpeed, bf16)   ZeRO-3 (DeepSpeed, bf16)
=====================  ===================================  =========================  ==========================
weights                4Ψ_t fp32 + frozen LoRA base in        2Ψ (replicated)            2Ψ/N
                       policy.dtype (+ 2Ψ_t autocast casts)
gathered for compute   —                                      —                          2·(2L + prefetch bucket)
gradients              4Ψ_t fp32 + 4Ψ_t DDP buckets           2Ψ_t/N                     2Ψ_t/N
reduce bucket          —                                      2·reduce_bucket_size       2·reduce_bucket_size
optimizer              8Ψ_t (AdamW m, v; fp32 weights are     12Ψ_t/N (fp32 master, m,   12Ψ_t/N
                       their own master)                      v)
fp32 gradient at step  —                                      4Ψ_t/N                     4·min(Ψ_t/N, sub_group)
reference (β > 0,      bytes(policy.dtype)·Ψ                  2Ψ (stage-0 engine)        2Ψ/N (stage-3 engine)
full fine-tune)
=====================  ===================================  =========================  ==========================

L is the largest module's parameter count (DeepSpeed's ``largest_layer_params``: the embedding for Qwen).
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agemem.train.config import TrainRunConfig
from agemem.train.model_size import ModelDims, ParamCounts, PlanError, count_parameters, resolve_model_dims
from agemem.train.parallelism import AccelerateSettings, Parallelism, resolve_parallelism

GIB = 2**30
PHASES = ("rollout", "backward", "step")

DEFAULT_RESERVE_GIB = 1.5
"""CUDA context, NCCL communicators and allocator slack per GPU: an assumption, not a measurement."""
LOGIT_BYTES = 16
"""bytes per [chunk x vocab] logit live while a lm-head chunk runs its backward (see :func:`activation_plan`)."""


# --------------------------------------------------------------------------------------------------------------
# components


@dataclass(frozen=True)
class Component:
    """One row of the plan: bytes per GPU, the formula, and the phases it is live in."""

    name: str
    bytes: int
    how: str
    phases: tuple[str, ...] = PHASES

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def adamw_step_temporary(counts: ParamCounts, par: Parallelism, adamw_impl: str) -> Component:
    """The fp32 temporary AdamW's step allocates, by kernel (``train.adamw_impl``; a GPU's ``auto`` is fused).

    ``foreach`` computes ``sqrt(v)`` for all its tensors at once: ``4Ψ_t`` (``4Ψ_t/N`` for a ZeRO partition, one flat
    tensor); ``for_loop`` one tensor at a time: 4 x the largest (the embedding); the fused kernel none. Measured on an
    H200 (GPU kit, 1.5B full fine-tune, foreach): the step's peak sat 5.83 GiB above the other states, 4Ψ = 5.75 GiB.
    """
    elems = counts.trainable if not par.deepspeed else math.ceil(counts.trainable / par.gpus)
    if adamw_impl == "foreach":
        return Component("AdamW step temporary", 4 * elems, f"foreach sqrt(v): 4 x {_p(elems)}", ("step",))
    if adamw_impl == "for_loop":
        largest = min(counts.largest_module, elems)
        return Component("AdamW step temporary", 4 * largest, f"one tensor's sqrt(v): 4 x {_p(largest)}", ("step",))
    return Component("AdamW step temporary", 0, "fused AdamW (train.adamw_impl auto on CUDA): none", ("step",))


def model_state_components(counts: ParamCounts, par: Parallelism, frozen_bytes: int = 2) -> list[Component]:
    """Weights, gradients, optimizer state and step buffers of the trainable policy (table in the module doc).

    The precision rule of ``agemem.train.policy.plan_precision``: an optimizer only ever steps fp32 weights. DeepSpeed
    with bf16 casts the module to bf16 and keeps fp32 master weights + AdamW moments (12 bytes per trainable
    parameter) in the ZeRO optimizer, partitioned over N; its gradient partition is bf16 (``grad_accum_dtype``
    defaults to the model dtype under ZeRO) and the optimizer step casts it to fp32 first. Without DeepSpeed
    the trainable weights are fp32 and compute under bf16 autocast (AdamW moments: 8 bytes), a LoRA base stays
    frozen in ``policy.dtype`` (``frozen_bytes``), and DDP keeps reduction buckets beside ``.grad`` (accelerate
    leaves ``gradient_as_bucket_view`` off).
    """
    n, total, train = par.gpus, counts.total, counts.trainable
    low = par.low_precision
    w = 2 if low else 4  # bytes of a module parameter under DeepSpeed
    master = 4 if low else 0  # fp32 master copy (DeepSpeed only; fp32 weights are their own master)
    if not par.deepspeed:
        frozen = counts.frozen
        comps = [
            Component(
                "weights",
                4 * train + frozen_bytes * frozen,
                f"fp32 trainable: 4 x {_p(train)}"
                + (f" + frozen base {frozen_bytes} x {_p(frozen)}" if frozen else "")
                + " (replicated)",
            ),
            Component(
                "gradients",
                4 * train + (4 * train if n > 1 else 0),
                f"fp32 .grad 4 x {_p(train)}" + (" + DDP buckets 4 x the same" if n > 1 else ""),
                ("backward", "step") if n == 1 else PHASES,  # .grad freed by zero_grad(set_to_none); buckets stay
            ),
            Component("optimizer", 8 * train, f"AdamW m, v: 8 x {_p(train)} (fp32 weights are the master)"),
        ]
        # autocast caches the bf16 cast of every fp32 weight that requires grad until the forward's autocast region
        # ends, so all of them coexist at the end of the forward even with gradient checkpointing
        if low:
            comps.append(
                Component(
                    "autocast weight copies",
                    2 * train,
                    f"bf16 casts of the fp32 trainable weights kept for backward: 2 x {_p(train)}",
                    ("backward",),
                )
            )
        return comps
    per_rank = math.ceil(train / n)
    opt_on_gpu = not par.offload_optimizer
    gradients = Component(
        "gradients",
        w * per_rank if opt_on_gpu else 0,
        f"{_b(w)} partition: {w} x {_p(train)} / {n}"
        if opt_on_gpu
        else "partition offloaded to CPU with the optimizer",
        # ZeRO-3 allocates its gradient partitions once (grad_partitions_flat_buffer); ZeRO-2 per backward
        PHASES if par.zero_stage == 3 else ("backward", "step"),
    )
    bucket = Component(
        "reduce bucket",
        w * par.reduce_bucket_size,
        f"gradients gathered for one reduce-scatter: {w} x reduce_bucket_size {_p(par.reduce_bucket_size)}",
        PHASES if par.zero_stage == 3 else ("backward",),
    )
    if par.zero_stage == 2:
        comps = [Component("weights", w * total, f"{_b(w)} module, replicated: {w} x {_p(total)}"), gradients, bucket]
    else:
        largest, prefetch = counts.largest_module, par.prefetch_bucket_size
        comps = [
            Component(
                "weights",
                0 if par.offload_param else w * math.ceil(total / n),
                f"{_b(w)} partition: {w} x {_p(total)} / {n}" if not par.offload_param else "partition on CPU",
            ),
            Component(
                "gathered for compute",
                w * (2 * largest + prefetch),
                f"the largest module's full {_b(w)} weights and gradient + prefetch bucket: {w} x (2 x {_p(largest)} "
                f"+ {_p(prefetch)})",
                ("backward",),
            ),
            gradients,
            bucket,
        ]
    if opt_on_gpu:
        comps.append(
            Component(
                "optimizer",
                (master + 8) * per_rank,
                f"fp32 master + AdamW m, v: {master + 8} x {_p(train)} / {n}"
                if master
                else f"AdamW m, v: 8 x {_p(train)} / {n}",
            )
        )
        if low:
            step_elems = per_rank if par.zero_stage == 2 else min(per_rank, par.sub_group_size)
            comps.append(
                Component(
                    "fp32 gradient at step",
                    4 * step_elems,
                    f"the partition's gradient cast to fp32 for the optimizer: 4 x {_p(step_elems)}"
                    + (" (one sub_group at a time)" if par.zero_stage == 3 else ""),
                    ("step",),
                )
            )
    else:
        comps.append(Component("optimizer", 0, "offloaded to CPU (offload_optimizer_device)"))
    return comps


def reference_component(config: TrainRunConfig, counts: ParamCounts, par: Parallelism) -> Component:
    """The frozen reference of the KL term (:class:`agemem.train.policy.Reference`): none when ``grpo.beta == 0``
    or with LoRA (the base with adapters disabled); else a second copy of the initial weights held in ``policy.dtype`` —
    inside a DeepSpeed inference engine, stage 0 (replicated) under ZeRO-1/2 and partitioned under ZeRO-3."""
    if config.grpo.beta == 0:
        return Component("reference", 0, "none: grpo.beta = 0 (no KL term)")
    if config.lora.enabled:
        return Component("reference", 0, "none: LoRA's reference is the base with adapters disabled")
    base = counts.total
    dtype_bytes = _dtype_bytes(config.policy.dtype)
    if par.deepspeed and par.low_precision:
        dtype_bytes = 2  # a bf16 DeepSpeed config casts the reference engine's module too
    if par.zero_stage == 3:
        return Component(
            "reference", dtype_bytes * base // par.gpus, f"stage-3 engine: {dtype_bytes} x {_p(base)} / {par.gpus}"
        )
    kind = "stage-0 DeepSpeed engine" if par.deepspeed else f"policy.dtype={config.policy.dtype}"
    return Component("reference", dtype_bytes * base, f"{kind}, replicated: {dtype_bytes} x {_p(base)}")


def generation_dtype_bytes(config: TrainRunConfig, par: Parallelism) -> int:
    """Bytes per element of the weights the transformers engine generates with, hence of its KV cache: it shares
    the trainable module (``agemem.train.policy.plan_precision``) and runs outside autocast, so a full fine-tune
    without DeepSpeed generates from the fp32 master weights (4), DeepSpeed bf16/fp16 from its half-precision
    module (2), LoRA from the base in ``policy.dtype``."""
    if config.lora.enabled:
        return _dtype_bytes(config.policy.dtype)
    return 2 if par.deepspeed and par.low_precision else 4


def engine_components(config: TrainRunConfig, dims: ModelDims, gpu_bytes: int, par: Parallelism) -> list[Component]:
    """The rollout engine's memory on a training GPU.

    vLLM colocated takes ``engine.vllm.gpu_memory_utilization x GPU memory`` (weights, KV cache, CUDA graphs: its
    whole budget); with ``enable_sleep_mode`` it offloads weights and frees the KV cache after generating, so it
    counts in the rollout phase only. vLLM in server mode runs elsewhere: 0. The transformers engine shares the
    policy's weights and holds KV: ``tokens x layers x 2 x kv_heads x head_dim x bytes`` for its prefix cache
    (every phase) and for a generate() batch of ``engine.batch_size`` longest sequences (rollout only), with
    ``bytes`` those of the weights it generates with (:func:`generation_dtype_bytes`).
    """
    engine = config.engine
    if engine.backend == "openai":
        return [Component("rollout engine", 0, "openai backend: generation runs off these GPUs")]
    if engine.backend == "vllm":
        vllm = engine.vllm
        if vllm.mode == "server":
            return [Component("vLLM", 0, "server mode: `trl vllm-serve` runs on other GPUs")]
        share = int(vllm.gpu_memory_utilization * gpu_bytes)
        how = f"colocate: gpu_memory_utilization {vllm.gpu_memory_utilization:g} x {gpu_bytes / GIB:.1f} GiB"
        if vllm.enable_sleep_mode:
            return [Component("vLLM", share, how + "; asleep during the update (sleep mode)", ("rollout",))]
        return [Component("vLLM", share, how + "; awake throughout (enable_sleep_mode=false)")]
    per_token = dims.num_layers * 2 * dims.kv_width * generation_dtype_bytes(config, par)
    longest = longest_sample(config)
    return [
        Component(
            "prefix KV cache",
            engine.prefix_cache_tokens * per_token,
            f"engine.prefix_cache_tokens {engine.prefix_cache_tokens:,} x {per_token:,} B/token",
        ),
        Component(
            "generate KV cache",
            engine.batch_size * longest * per_token,
            f"engine.batch_size {engine.batch_size} x {longest:,} tokens x {per_token:,} B/token",
            ("rollout",),
        ),
    ]


def longest_sample(config: TrainRunConfig) -> int:
    """The longest training sample a rollout can produce: ``rollout.max_prompt_tokens + sampling.max_tokens``
    when prompts are capped, else vLLM's ``max_model_len``, else the context budget plus a response."""
    if config.rollout.max_prompt_tokens:
        return config.rollout.max_prompt_tokens + config.sampling.max_tokens
    if config.engine.backend == "vllm" and config.engine.vllm.max_model_len:
        return config.engine.vllm.max_model_len
    return config.env.context.max_context_tokens + config.sampling.max_tokens


@dataclass(frozen=True)
class ActivationPlan:
    """Activation memory of one micro-batch's forward + backward."""

    tokens: int
    """padded tokens of the micro-batch."""
    per_token_layer: int
    """bytes a decoder layer saves for backward per token (no checkpointing)."""
    stored: int
    """bytes saved across the whole forward."""
    working: int
    """the largest transient on top: one layer's recompute or one lm-head chunk."""
    logits_chunk: int
    """bytes of one lm-head chunk's working set."""
    logits_unchunked: int
    """what a [tokens x vocab] fp32 logit tensor would take (what the chunking avoids)."""
    checkpointing: bool
    formula: str

    @property
    def total(self) -> int:
        return self.stored + self.working


def activation_plan(
    dims: ModelDims,
    tokens: int,
    *,
    checkpointing: bool,
    chunk: int,
    attention: str = "",
    stream_bytes: int = 2,
    compute_bytes: int = 2,
    lora_r: int = 0,
    lora_modules: int = 0,
    head_copy: int = 0,
) -> ActivationPlan:
    """Bytes saved for backward by ``TokenLogprobs`` (train/policy.py) on ``tokens`` padded tokens.

    After Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", §4.1: a GPT
    layer saves ``s·b·h·(34 + 5·a·s/h)`` bytes), adapted to a Qwen2/Qwen3 decoder layer as transformers runs it:
    no dropout (so no masks), RMSNorm that upcasts to fp32, GQA, SwiGLU of width ``i``, and flash / memory-
    efficient attention that keeps q, k, v, the output and an fp32 logsumexp instead of the ``a·s²`` scores.
    Per token, with s = residual-stream bytes, c = compute bytes (2 under bf16), x = 1 where the stream is the
    compute dtype (else each linear keeps its own autocast cast, x = 3 for q/k/v and 2 for gate/up):

    * 2 RMSNorms:   2·(4h + s·h)           fp32 upcast (kept by pow) + normalised input (kept by the weight multiply)
    * linear inputs: c·h·(x_qkv + x_mlp)   input of q/k/v and of gate/up
    * q/k norms:    (4 + c)·(q + kv)       Qwen3 only
    * attention:    c·(2q + 2kv') + 4a     q, k, v, output, logsumexp (kv' = q when sdpa repeats k/v for GQA);
                    eager attention adds (4 + c)·a·w for the softmax over rows of width w
    * MLP:          4·c·i                  gate output (SiLU input), SiLU output, up output, their product
    * LoRA:         c·r per adapted module (the A projection's output)

    Without checkpointing every layer's activations are stored: ``L·T·per_layer``. With
    ``train.gradient_checkpointing`` each layer keeps only its input (``L·T·s·h``) and recomputes one layer at a
    time in backward. Either way the final norm and the lm-head input (``T·(4h + 2·s·h)``) are kept, and the lm
    head runs on chunks of ``train.logprob_chunk_tokens`` positions inside ``torch.utils.checkpoint``: a chunk's
    backward holds about 16 bytes per logit (the fp32 scaled logits logsumexp keeps, its fp32 softmax gradient and
    a temporary, the gather's fp32 scatter gradient), ``16·C·V``, plus ``head_copy``: the fp32 copy of a
    half-precision head weight that ``train.logprob_head=fp32`` makes per chunk (``4·V·h``, and its fp32 gradient
    ``4·V·h`` when the head trains). The working set is the larger of one layer's recompute and that chunk.
    """
    h, q, kv, i, a = dims.hidden_size, dims.q_width, dims.kv_width, dims.intermediate_size, dims.num_heads
    s, c = stream_bytes, compute_bytes
    same = s == c
    x_qkv, x_mlp = (1, 1) if same else (3, 2)
    kv_saved = q if attention in ("", "sdpa") and dims.num_kv_heads != dims.num_heads else kv
    width = tokens  # a single sample may fill the whole micro-batch
    per_layer = (
        2 * (4 * h + s * h)
        + c * h * (x_qkv + x_mlp)
        + ((4 + c) * (q + kv) if dims.qk_norm else 0)
        + c * (2 * q + 2 * kv_saved)
        + 4 * a
        + ((4 + c) * a * width if attention == "eager" else 0)
        + 4 * c * i
        + c * lora_r * lora_modules
    )
    head_input = tokens * (4 * h + 2 * s * h)
    logits_chunk = LOGIT_BYTES * min(chunk, tokens) * dims.vocab_size + head_copy
    if checkpointing:
        stored = dims.num_layers * tokens * s * h + head_input
        working = max(tokens * per_layer, logits_chunk)
        formula = (
            f"checkpointed: L x T x {s}h = {dims.num_layers} x {tokens:,} x {s * h:,} B + one layer recomputed "
            f"{per_layer:,} B/token x T (or a logits chunk, if larger)"
        )
    else:
        stored = dims.num_layers * tokens * per_layer + head_input
        working = logits_chunk
        formula = f"all layers: L x T x {per_layer:,} B/token = {dims.num_layers} x {tokens:,} x {per_layer:,} B"
    return ActivationPlan(
        tokens=tokens,
        per_token_layer=per_layer,
        stored=stored,
        working=working,
        logits_chunk=logits_chunk,
        logits_unchunked=4 * tokens * dims.vocab_size,
        checkpointing=checkpointing,
        formula=formula,
    )


def _activations_for(config: TrainRunConfig, dims: ModelDims, par: Parallelism, checkpointing: bool) -> ActivationPlan:
    train = config.train
    # DeepSpeed bf16 runs a bf16 module (stream and compute in bf16); DDP runs an fp32 module under bf16
    # autocast (fp32 residual stream, bf16 matmul outputs); no mixed precision is fp32 throughout
    frozen_base = 2 if config.policy.dtype in ("bfloat16", "float16") else 4
    stream = 2 if par.deepspeed and par.low_precision else frozen_base if config.lora.enabled else 4
    compute = 2 if par.low_precision else 4
    lora_modules = len(config.lora.target_modules) if config.lora.enabled else 0
    if config.lora.target_modules == ["all-linear"]:
        lora_modules = 7
    # train.logprob_head=fp32 casts a half-precision head weight per chunk (train/policy.py head_logits_fp32): the
    # DeepSpeed bf16 module's (it trains: the fp32 gradient too) and a frozen LoRA base's; a ZeRO-3 partition keeps
    # the module call, and plain accelerate's fp32 master head needs no copy
    head_elems = dims.vocab_size * dims.hidden_size
    head_copy = 0
    if train.logprob_head == "fp32" and par.zero_stage != 3:
        if config.lora.enabled and frozen_base == 2:
            head_copy = 4 * head_elems
        elif not config.lora.enabled and par.deepspeed and par.low_precision:
            head_copy = 8 * head_elems
    return activation_plan(
        dims,
        train.micro_batch_tokens,
        head_copy=head_copy,
        checkpointing=checkpointing,
        chunk=train.logprob_chunk_tokens,
        attention=config.policy.attn_implementation,
        stream_bytes=stream,
        compute_bytes=compute,
        lora_r=config.lora.r if config.lora.enabled else 0,
        lora_modules=lora_modules,
    )


# --------------------------------------------------------------------------------------------------------------
# DeepSpeed's own estimator


@dataclass(frozen=True)
class DeepSpeedEstimate:
    """DeepSpeed's model-states figure for the same run, and how it compares with ours."""

    bytes: int | None
    """None when DeepSpeed is not importable or its estimator does not apply."""
    formula: str
    note: str
    version: str = ""

    @property
    def gib(self) -> float | None:
        return None if self.bytes is None else self.bytes / GIB


def deepspeed_formula(counts: ParamCounts, par: Parallelism) -> tuple[int, str]:
    """DeepSpeed's estimator formulas as deepspeed 0.19.8 writes them (GPU side, bytes):

    * ``stage_1_and_2.estimate_zero2_model_states_mem_needs``: ``2Ψ + 18Ψ/N`` — bf16 params replicated; bf16
      gradient (2) + fp32 gradient (4) + fp32 master (4) + AdamW m, v (8) partitioned (older releases wrote
      ``4Ψ + 16Ψ/N``, a full-size bf16 gradient on every GPU); ``2Ψ`` with the optimizer offloaded;
    * ``stage3.estimate_zero3_model_states_mem_needs``: ``4L + 18Ψ/N`` — a gathered largest layer's bf16 params
      and gradient (L = ``largest_layer_params``, the largest module's own parameters), then 2 + 16 bytes
      partitioned; ``4L + 2Ψ/N`` with the optimizer offloaded, ``4L`` with parameters offloaded too.
    """
    n, psi = par.gpus, counts.total
    if par.zero_stage == 2:
        if par.offload_optimizer:
            return 2 * psi, f"2Ψ (optimizer offloaded), Ψ = {_p(psi)}"
        return 2 * psi + int(18 * psi / n), f"2Ψ + 18Ψ/N, Ψ = {_p(psi)}, N = {n}"
    largest = 4 * counts.largest_module
    if par.offload_optimizer and par.offload_param:
        return largest, f"4L (everything offloaded), L = {_p(counts.largest_module)}"
    if par.offload_optimizer:
        return largest + int(2 * psi / n), f"4L + 2Ψ/N (optimizer offloaded), L = {_p(counts.largest_module)}"
    return largest + int(18 * psi / n), f"4L + 18Ψ/N, L = {_p(counts.largest_module)}, Ψ = {_p(psi)}, N = {n}"


def deepspeed_available() -> bool:
    """Whether DeepSpeed is installed (looked up without importing it: an import costs seconds)."""
    return importlib.util.find_spec("deepspeed") is not None


def deepspeed_estimate(counts: ParamCounts, par: Parallelism, ours: int) -> DeepSpeedEstimate:
    """Ask DeepSpeed's estimator (``estimate_zero{2,3}_model_states_mem_needs``: the count-taking functions its
    ``..._all_cold`` printers call; ``..._all_live`` needs a built model) when DeepSpeed is importable."""
    if not par.deepspeed:
        return DeepSpeedEstimate(None, "", "ZeRO-0 is plain DDP: DeepSpeed's estimators do not apply")
    if counts.lora:
        return DeepSpeedEstimate(None, "", "LoRA: DeepSpeed's estimators assume every parameter trains; not comparable")
    _, formula = deepspeed_formula(counts, par)
    if not deepspeed_available():
        return DeepSpeedEstimate(None, formula, "DeepSpeed is not installed: its estimator was not consulted")
    try:
        import contextlib
        import io

        # DeepSpeed logs its accelerator choice on import (to stdout or stderr): keep the plan's output clean
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            import deepspeed

            nodes, per_node = 1, par.gpus  # the GPU-side figure depends on the total only
            if par.zero_stage == 2:
                from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

                _, gpu = estimate_zero2_model_states_mem_needs(
                    counts.total, per_node, nodes, cpu_offload=par.offload_optimizer
                )
            else:
                from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

                _, gpu, _ = estimate_zero3_model_states_mem_needs(
                    counts.total,
                    counts.largest_module,
                    per_node,
                    nodes,
                    cpu_offload=par.offload_optimizer,
                    cpu_offload_params=par.offload_param,
                )
    except Exception as err:  # an import that fails on this machine (no CUDA toolkit, ...): our figure stands
        return DeepSpeedEstimate(None, formula, f"DeepSpeed's estimator could not run here ({type(err).__name__})")
    return DeepSpeedEstimate(int(gpu), formula, _why_different(par, counts, int(gpu), ours), deepspeed.__version__)


def _why_different(par: Parallelism, counts: ParamCounts, theirs: int, ours: int) -> str:
    diff = (ours - theirs) / GIB
    if abs(diff) < 0.05:
        return "agrees with ours"
    if par.zero_stage == 2 and not par.offload_optimizer:
        return (
            f"ours is {diff:+.2f} GiB: the same 2Ψ + 18Ψ/N terms plus the reduce bucket DeepSpeed leaves out "
            f"({_p(par.reduce_bucket_size)} bf16 gradients, allocated each backward when contiguous_gradients is on)"
        )
    if par.zero_stage == 3 and not par.offload_optimizer:
        return (
            f"ours is {diff:+.2f} GiB: we add the bf16 gradient partition (grad_partitions_flat_buffer, 2Ψ/N in the "
            "model dtype; DeepSpeed's ZeRO-2 estimator counts it, its ZeRO-3 one does not) and the reduce bucket, "
            "and count its 4L gathered layer in the backward phase, not at the optimizer step"
        )
    return f"ours is {diff:+.2f} GiB: the offloaded case; DeepSpeed counts only what stays on the GPU"


# --------------------------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class MemoryPlan:
    """The per-GPU memory plan of a run: components, phase totals, verdict."""

    model: ModelDims
    params: ParamCounts
    parallelism: Parallelism
    gpu_memory_bytes: int
    components: list[Component]
    activations: ActivationPlan
    activations_other: ActivationPlan
    """the same micro-batch with ``train.gradient_checkpointing`` flipped (not counted)."""
    phases: dict[str, int]
    """bytes live in each phase."""
    deepspeed: DeepSpeedEstimate
    model_states: int
    """our weights + gradients + optimizer figure at its largest phase (what DeepSpeed's estimator covers)."""
    notes: list[str]

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda phase: self.phases[phase])

    @property
    def peak(self) -> int:
        return self.phases[self.peak_phase]

    @property
    def headroom(self) -> int:
        return self.gpu_memory_bytes - self.peak

    @property
    def fits(self) -> bool:
        return self.headroom >= 0

    def verdict(self) -> str:
        word = "FITS" if self.fits else "DOES NOT FIT"
        return (
            f"{word}: peak {self.peak / GIB:.1f} GiB ({self.peak_phase}) of {self.gpu_memory_bytes / GIB:.1f} GiB per "
            f"GPU; headroom {self.headroom / GIB:+.1f} GiB ({self.headroom / self.gpu_memory_bytes:+.0%})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data (bytes and GiB)."""

        def act(a: ActivationPlan) -> dict[str, Any]:
            return {**asdict(a), "total": a.total, "total_gib": a.total / GIB}

        return {
            "model": asdict(self.model),
            "params": {**asdict(self.params), "frozen": self.params.frozen},
            "parallelism": {**asdict(self.parallelism), "deepspeed": self.parallelism.deepspeed},
            "gpu_memory_gib": self.gpu_memory_bytes / GIB,
            "components": [
                {"name": c.name, "bytes": c.bytes, "gib": c.gib, "how": c.how, "phases": list(c.phases)}
                for c in self.components
            ],
            "activations": act(self.activations),
            "activations_if_checkpointing_flipped": act(self.activations_other),
            "phases_gib": {phase: value / GIB for phase, value in self.phases.items()},
            "peak_phase": self.peak_phase,
            "peak_gib": self.peak / GIB,
            "headroom_gib": self.headroom / GIB,
            "fits": self.fits,
            "verdict": self.verdict(),
            "model_states_gib": self.model_states / GIB,
            "deepspeed": {
                "gib": self.deepspeed.gib,
                "formula": self.deepspeed.formula,
                "note": self.deepspeed.note,
                "version": self.deepspeed.version,
            },
            "notes": self.notes,
        }


def plan_memory(
    config: TrainRunConfig,
    *,
    gpus: int | None = None,
    zero: int | None = None,
    gpu_memory_gib: float = 80.0,
    accelerate: AccelerateSettings | None = None,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    dims: ModelDims | None = None,
) -> MemoryPlan:
    """The per-GPU memory plan of ``agemem train`` with ``config`` (see the module doc for the components)."""
    if gpu_memory_gib <= 0:
        raise PlanError(f"--gpu-memory-gb {gpu_memory_gib:g}: give the GPU's memory in GiB, e.g. 80")
    if gpus is not None and gpus < 1:
        raise PlanError(f"--gpus {gpus}: a run needs at least 1 GPU; pass --gpus N with N >= 1")
    dims = dims or resolve_model_dims(config.policy)
    counts = count_parameters(dims, config.lora)
    par = resolve_parallelism(config, dims, gpus=gpus, zero=zero, accelerate=accelerate)
    gpu_bytes = int(gpu_memory_gib * GIB)
    notes: list[str] = []

    states = model_state_components(counts, par, frozen_bytes=_dtype_bytes(config.policy.dtype))
    states.append(adamw_step_temporary(counts, par, config.train.adamw_impl))
    acts = _activations_for(config, dims, par, config.train.gradient_checkpointing)
    other = _activations_for(config, dims, par, not config.train.gradient_checkpointing)
    activation = Component(
        "activations",
        acts.total,
        f"{config.train.micro_batch_tokens:,} padded tokens (train.micro_batch_tokens), "
        + acts.formula
        + f"; lm head in chunks of {config.train.logprob_chunk_tokens} x {dims.vocab_size:,} vocab x "
        f"{LOGIT_BYTES} B = {acts.logits_chunk / GIB:.2f} GiB (unchunked fp32 logits: "
        f"{acts.logits_unchunked / GIB:.1f} GiB)",
        ("backward",),
    )
    components = [
        *states,
        reference_component(config, counts, par),
        *engine_components(config, dims, gpu_bytes, par),
        activation,
        Component("runtime reserve", int(reserve_gib * GIB), "CUDA context, NCCL, allocator slack (assumed)"),
    ]
    phases = {phase: sum(c.bytes for c in components if phase in c.phases) for phase in PHASES}
    state_names = {c.name for c in states}
    model_states = max(sum(c.bytes for c in states if p in c.phases and c.name in state_names) for p in PHASES)
    longest = longest_sample(config)
    if longest > config.train.micro_batch_tokens:
        notes.append(
            f"a sample can reach {longest:,} tokens > train.micro_batch_tokens={config.train.micro_batch_tokens:,}: "
            "such a sample gets a micro-batch of its own, larger than the budget planned here"
        )
    if par.zero_stage == 3 and config.engine.backend == "transformers":
        notes.append("agemem train refuses ZeRO-3 with engine.backend=transformers (it generates from sharded weights)")
    if par.zero_stage == 3 and config.engine.backend == "vllm" and config.engine.vllm.mode == "colocate":
        notes.append("ZeRO-3 + colocated vLLM: the weight push gathers parameters (transient, not counted)")
    if dims.model_type not in ("qwen2", "qwen3", "llama", "mistral"):
        notes.append(f"model_type {dims.model_type!r}: counted as a Llama-style dense decoder")
    return MemoryPlan(
        model=dims,
        params=counts,
        parallelism=par,
        gpu_memory_bytes=gpu_bytes,
        components=components,
        activations=acts,
        activations_other=other,
        phases=phases,
        deepspeed=deepspeed_estimate(counts, par, model_states),
        model_states=model_states,
        notes=notes,
    )


# --------------------------------------------------------------------------------------------------------------
# output


def render_plan(plan: MemoryPlan, title: str = "") -> list[Any]:
    """Rich renderables: a header line, the component table, the DeepSpeed comparison, notes, the verdict."""
    from rich.table import Table
    from rich.text import Text

    dims, counts, par = plan.model, plan.params, plan.parallelism
    mode = "DDP (no DeepSpeed)" if not par.deepspeed else f"DeepSpeed ZeRO-{par.zero_stage}"
    trained = f"LoRA: {counts.trainable:,} trainable" if counts.lora else "full fine-tune"
    header = Text(
        f"{dims.name}: {counts.total:,} parameters ({counts.total / 1e9:.2f}B; dims from {dims.source}); {trained}; "
        f"{par.gpus} GPU(s) x {plan.gpu_memory_bytes / GIB:.0f} GiB, {mode}, mixed precision {par.mixed_precision} "
        f"({par.source})"
    )
    table = Table(title=title or "per-GPU memory plan", show_lines=False)
    table.add_column("component")
    table.add_column("GiB / GPU", justify="right")
    table.add_column("live in")
    table.add_column("how")
    for c in plan.components:
        table.add_row(c.name, f"{c.gib:.2f}", ", ".join(c.phases), c.how)
    other = plan.activations_other
    table.add_row(
        Text(f"(activations with gradient_checkpointing={str(other.checkpointing).lower()})", style="dim"),
        Text(f"{other.total / GIB:.2f}", style="dim"),
        Text("not counted", style="dim"),
        Text(other.formula, style="dim"),
    )
    for phase, value in plan.phases.items():
        table.add_row(Text(f"total: {phase}", style="bold"), Text(f"{value / GIB:.2f}", style="bold"), "", "")
    out: list[Any] = [header, table]
    ds = plan.deepspeed
    ours = f"ours {plan.model_states / GIB:.2f} GiB (weights + gradients + optimizer at their largest phase)"
    if ds.bytes is not None:
        out.append(Text(f"DeepSpeed {ds.version} estimator: {ds.gib:.2f} GiB model states ({ds.formula}); {ours}; "
                        f"{ds.note}"))  # fmt: skip
    else:
        out.append(Text(f"model states: {ours}. {ds.note}" + (f" (its formula: {ds.formula})" if ds.formula else "")))
    out += [Text(f"note: {note}", style="yellow") for note in plan.notes]
    out.append(Text(plan.verdict(), style="bold green" if plan.fits else "bold red"))
    return out


def write_plan_json(plan: MemoryPlan, path: str | Path) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(plan.to_dict(), indent=2) + "\n")


def _p(count: float) -> str:
    """A parameter count in short form: 7.62B, 40.4M."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return f"{count:g}"


def _dtype_bytes(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]


def _b(width: int) -> str:
    return {2: "bf16", 4: "fp32"}[width]

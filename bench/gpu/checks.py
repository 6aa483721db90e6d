"""The GPU kit's checks, each run by ``kit.py`` in a process of its own (its own CUDA context, peaks and time limit):

    python bench/gpu/checks.py NAME --scale gpu|cpu-smoke --work DIR --results DIR

Each writes ``RESULTS/NAME.json``: ``{"status": "ok", ...}``, or ``{"status": "error", "error": ...}`` when it
raised. Every model is randomly initialised from a real architecture's config.json (``bench/gpu/models``) with
the real Qwen2.5 tokenizer; the encoder is the bundled MiniLM's architecture with random weights (its 91.6 MB of
weights cannot travel), so the rollouts' Filter and retrieval see other similarities than a trained encoder's.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    CARRY,
    GIB,
    REPO,
    SCALES,
    Scale,
    as_dict,
    device_facts,
    matmul_rate,
    mfu,
    model_dir,
    plan_ratio,
    read_memory,
    synchronize,
    update_flops,
)

BASE_CONFIG = REPO / "configs" / "tiny_cpu.yaml"
"""the bundled-HotpotQA CPU run; every check overrides its policy, sizes and precision."""
ZERO2 = REPO / "launch" / "accelerate" / "zero2.yaml"
TRAIN_MODEL = "qwen2.5-0.5b-instruct"
FULL_MODEL = "qwen2.5-1.5b-instruct"
LORA_MODEL = "qwen2.5-7b-instruct"


# --------------------------------------------------------------------------------------------------------------
# shared pieces


def random_encoder(work: Path) -> Path:
    """A sentence-transformers directory with the bundled MiniLM's architecture and tokenizer and random weights
    (seed 0), made once per run in ``work``: from ``.gpukit/encoder`` (pack.py) or the installed package."""
    target = work / "encoder"
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import BertConfig, BertModel

    skeleton = CARRY / "encoder"
    if not (skeleton / "config.json").is_file():
        from pack import copy_encoder_skeleton, encoder_source

        skeleton = work / "encoder_skeleton"
        copy_encoder_skeleton(encoder_source(), skeleton)
    shutil.copytree(skeleton, target, dirs_exist_ok=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        BertModel(BertConfig.from_pretrained(skeleton)).save_pretrained(target)
    return target


def policy_overrides(model: Path, *, dtype: str = "bfloat16") -> list[str]:
    """A random policy of ``model``'s architecture with the bundled tokenizer, trained in bf16 autocast over fp32
    master weights (the paper configs' precision) with PyTorch's own attention (no flash-attn on the image)."""
    return [
        f"policy.model={model}",
        "policy.init=random",
        "policy.tokenizer=bundled:qwen2.5-instruct",
        f"policy.dtype={dtype}",
        "policy.attn_implementation=sdpa",
        "train.mixed_precision=bf16",
    ]


def train_overrides(scale: Scale, work: Path) -> list[str]:
    """``agemem train`` on the bundled HotpotQA sample with a Qwen2.5-0.5B-shaped policy, K = 4."""
    run = work / "train_run"
    return [
        *policy_overrides(model_dir(TRAIN_MODEL, scale, work)),
        f"output_dir={run}",
        f"distractors.cache_dir={work / 'distractor_cache'}",
        f"env.encoder.model={random_encoder(work)}",
        f"max_steps={scale.train_steps}",
        f"train.tasks_per_step={scale.train_tasks_per_step}",
        "rollout.rollouts_per_task=4",
        f"sampling.max_tokens={scale.train_max_tokens}",
        "checkpoint.every=0",  # one checkpoint, at the end: its save is timed apart from the steps
        "logging.progress=false",
    ]


def update_overrides(scale: Scale, work: Path, model: str, *, lora: bool) -> list[str]:
    """One GRPO update's config: gradient checkpointing as the paper configs, no prefix KV cache (no rollout runs,
    so the plan must not count one)."""
    return [
        *policy_overrides(model_dir(model, scale, work)),
        f"output_dir={work / ('run_' + model)}",
        f"env.encoder.model={random_encoder(work)}",
        "train.gradient_checkpointing=true",
        f"train.micro_batch_tokens={scale.micro_batch_tokens}",
        "engine.prefix_cache_tokens=0",
        f"lora.enabled={str(lora).lower()}",
    ]


def prior(results: Path, name: str) -> dict[str, Any]:
    """An earlier check's result in this run ({} when it did not run or failed)."""
    path = results / f"{name}.json"
    if not path.is_file():
        return {}
    found = json.loads(path.read_text())
    return found if found.get("status") == "ok" else {}


def peak_flops(results: Path) -> float | None:
    """The bf16 matrix rate the matmul check measured in this run, in FLOP/s."""
    rate = prior(results, "matmul").get("bf16_tflops")
    return rate * 1e12 if rate else None


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# --------------------------------------------------------------------------------------------------------------
# the checks


def check_matmul(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """The device, what agemem's version checks say of this environment, and its bf16 matrix rate (the MFU
    denominator)."""
    from agemem.core.versions import version_problems

    return {"device": device_facts(), "version_problems": version_problems(()), **matmul_rate(scale.matmul_n)}


def check_train(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """``agemem train`` on one GPU: per-step time split, throughput, the update's MFU, per-phase GPU memory."""
    import agemem.train.loop as loop
    from agemem.entrypoints.cli import main as cli
    from agemem.train.model_size import count_parameters, resolve_model_dims

    lengths: list[list[tuple[int, int]]] = []  # per step, each sample's (tokens, completion tokens): the FLOPs
    build_samples = loop.build_samples

    def recording(*args: Any, **kwargs: Any) -> Any:
        samples, stats = build_samples(*args, **kwargs)
        lengths.append([(len(s), s.completion_tokens) for s in samples])
        return samples, stats

    loop.build_samples = recording  # the kit's only instrument inside the trainer: it reads, never changes
    overrides = train_overrides(scale, work)
    shutil.rmtree(work / "train_run", ignore_errors=True)
    start = time.perf_counter()
    code = cli(["train", "--config", str(BASE_CONFIG), *overrides])
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"agemem train exited {code}")
    after = read_memory(reset=False)
    run = work / "train_run"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    from agemem.rollouts.config import PolicyConfig

    dims = resolve_model_dims(PolicyConfig(model=str(model_dir(TRAIN_MODEL, scale, work))))
    peak = peak_flops(results)
    steps = []
    for m, step_lengths in zip(metrics, lengths):
        flops = update_flops(dims, step_lengths, reference=True, lora=False)
        row = {
            "step": m["step"],
            **{
                key.removeprefix("time/"): m[key]
                for key in ("time/rollout_s", "time/score_s", "time/update_s", "time/sync_s", "time/step_s")
            },
            "generated_tokens_per_s": m["throughput/generated_tokens_per_s"],
            "update_tokens_per_s": m["throughput/train_tokens_per_s"],
            "tokens_forwarded": m["samples/tokens_forwarded"],
            "completion_tokens": m["samples/completion_tokens"],
            "samples": m["samples/samples"],
            "update_tflops": flops / m["time/update_s"] / 1e12,
            "update_mfu": mfu(flops, m["time/update_s"], peak),
            "gpu_peak_gib": {k.rsplit("/", 1)[1]: v for k, v in m.items() if k.startswith("memory/gpu_peak_gib/")},
            "gpu_reserved_gib": {
                k.rsplit("/", 1)[1]: v for k, v in m.items() if k.startswith("memory/gpu_reserved_gib/")
            },
        }
        steps.append(row)
    timed = steps[1:] or steps  # step 1 also builds distractors and warms the kernels up
    summary = {
        key: median([row[key] for row in timed if row[key] is not None])
        for key in (
            "rollout_s",
            "score_s",
            "update_s",
            "sync_s",
            "step_s",
            "generated_tokens_per_s",
            "update_tokens_per_s",
            "update_tflops",
            "update_mfu",
        )
    }
    phases = sorted({phase for row in steps for phase in row["gpu_reserved_gib"]})
    manifest = sorted((run / "checkpoints").glob("step_*/manifest.json"))
    saved = json.loads(manifest[-1].read_text()) if manifest else {}
    return {
        "overrides": overrides,
        "config": str(BASE_CONFIG.relative_to(REPO)),
        "parameters": count_parameters(dims).total,
        "wall_s": wall,
        "steps": steps,
        "median_after_first": summary,
        # peaks are the largest over all steps: step 1's rollout runs before AdamW's state exists, later ones with it
        "gpu_peak_gib": {p: max(row["gpu_peak_gib"].get(p, 0.0) for row in steps) for p in phases},
        "gpu_reserved_gib": {p: max(row["gpu_reserved_gib"].get(p, 0.0) for row in steps) for p in phases},
        "outside_torch_gib": after.outside_torch_gib if after else None,
        "checkpoint_write_s": saved.get("write_s"),
        "checkpoint_gib": saved.get("bytes", 0) / GIB,
    }


def check_plan(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """``agemem plan`` of the train check's config for 1 GPU, against that run's measured per-phase peaks."""
    from agemem.entrypoints.cli import main as cli

    memory = prior(results, "matmul").get("device", {}).get("gpu_memory_gib") or 80.0
    path = work / "plan.json"
    cli(
        [
            "plan",
            "--config",
            str(BASE_CONFIG),
            *train_overrides(scale, work),
            "--gpus",
            "1",
            "--zero",
            "0",
            "--gpu-memory-gb",
            f"{memory:.2f}",
            "--json",
            str(path),
        ]
    )
    plan = json.loads(path.read_text())
    phases = plan["phases_gib"]
    reserve = next(c["gib"] for c in plan["components"] if c["name"] == "runtime reserve")
    train = prior(results, "train")
    allocated, reserved = train.get("gpu_peak_gib", {}), train.get("gpu_reserved_gib", {})
    outside = train.get("outside_torch_gib") or 0.0
    update_plan = max(phases["backward"], phases["step"])
    peak_reserved = max(reserved.values()) + outside if reserved else None
    # per phase, torch's allocated peak (tensors); the allocator keeps what it reserved, so a reserved peak is the
    # run's high-water mark so far, not a phase's own: the device-level comparison is made at the peak only
    compared = {
        "rollout": {"tensors": plan_ratio(phases["rollout"] - reserve, allocated.get("rollout"))},
        "update": {"tensors": plan_ratio(update_plan - reserve, allocated.get("update"))},
        "peak": {
            "device": plan_ratio(plan["peak_gib"], peak_reserved),
            "tensors": plan_ratio(plan["peak_gib"] - reserve, max(allocated.values()) if allocated else None),
        },
    }
    return {
        "gpu_memory_gib": memory,
        "phases_gib": phases,
        "peak_phase": plan["peak_phase"],
        "components": {c["name"]: c["gib"] for c in plan["components"]},
        "runtime_reserve_gib": reserve,
        "measured_outside_torch_gib": train.get("outside_torch_gib"),
        "compared": compared,
    }


def synthetic_samples(scale: Scale, vocab: int, seed: int = 0) -> list[Any]:
    """``scale.update_samples`` samples of prompt + completion tokens drawn uniformly from the vocabulary, advantages
    alternating ±1, engine log-probs of −2 (the same samples for every check of a run: same seed)."""
    from agemem.train.samples import TrainSample

    rng = random.Random(seed)
    p, c = scale.update_prompt_tokens, scale.update_completion_tokens
    return [
        TrainSample(
            input_ids_T=[rng.randrange(vocab) for _ in range(p + c)],
            completion_mask_T=[0] * p + [1] * c,
            engine_logprobs_T=[0.0] * p + [-2.0] * c,
            segment_lengths=[c],
            advantage=1.0 if i % 2 else -1.0,
            group=i,
        )
        for i in range(scale.update_samples)
    ]


class StepWindows:
    """GPU peaks split at every optimizer step: ``backward`` from the update's start to the step, ``step`` the
    step itself (global torch optimizer hooks: they fire inside DeepSpeed's ZeRO optimizer too)."""

    def __init__(self) -> None:
        self.backward: list[float] = []
        self.step: list[float] = []
        self.backward_reserved: list[float] = []
        self.step_reserved: list[float] = []

    def __enter__(self) -> StepWindows:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        def before(*_: Any) -> None:
            reading = read_memory()
            if reading is not None:
                self.backward.append(reading.peak_allocated_gib)
                self.backward_reserved.append(reading.peak_reserved_gib)

        def after(*_: Any) -> None:
            reading = read_memory()
            if reading is not None:
                self.step.append(reading.peak_allocated_gib)
                self.step_reserved.append(reading.peak_reserved_gib)

        self.handles = [register_optimizer_step_pre_hook(before), register_optimizer_step_post_hook(after)]
        return self

    def __exit__(self, *_: Any) -> None:
        for handle in self.handles:
            handle.remove()


def run_updates(
    scale: Scale, work: Path, results: Path, model: str, *, lora: bool, zero: int, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Build ``agemem train``'s run (TrainRun) for ``model`` and time ``scale.update_repeats`` GRPO updates on the
    same synthetic samples; the last update's peaks (optimizer state allocated) are compared with the plan."""
    import torch

    from agemem.entrypoints.roots import load_command_config
    from agemem.train.loop import TrainRun
    from agemem.train.parallelism import read_accelerate_config
    from agemem.train.plan import plan_memory
    from agemem.train.update import policy_update

    overrides = [*update_overrides(scale, work, model, lora=lora), *extra]
    config = load_command_config("train", BASE_CONFIG, overrides)
    built = time.perf_counter()
    run = TrainRun(config)
    build_s = time.perf_counter() - built
    samples = synthetic_samples(scale, len(run.tokenizer))
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the random init's fp32 draw is freed: start the windows from what the run holds
    read_memory()
    times, windows = [], StepWindows()
    with windows:
        for _ in range(scale.update_repeats):
            read_memory()  # a new window per update
            synchronize()
            start = time.perf_counter()
            update = policy_update(
                run.accelerator,
                run.policy,
                run.optimizer,
                run.scheduler,
                run.reference,
                samples,
                config.grpo,
                config.train,
                run.pad_id,
            )
            synchronize()
            times.append(time.perf_counter() - start)
    after = read_memory(reset=False)
    gpu_memory = prior(results, "matmul").get("device", {}).get("gpu_memory_gib") or 80.0
    accelerate = read_accelerate_config(ZERO2) if zero == 2 else None
    plan = plan_memory(config, gpus=1, zero=zero, gpu_memory_gib=gpu_memory, accelerate=accelerate)
    reserve = next(c.gib for c in plan.components if c.name == "runtime reserve")
    outside = after.outside_torch_gib if after else 0.0
    dims = plan.model
    flops = update_flops(
        dims, [(len(s), s.completion_tokens) for s in samples], reference=config.grpo.beta > 0, lora=lora
    )
    timed = times[1:] or times
    update_s = statistics.median(timed)
    measured: dict[str, Any] = {}
    compared: dict[str, Any] = {}
    if windows.step:
        last = {"backward": windows.backward[-1], "step": windows.step[-1]}
        last_reserved = {"backward": windows.backward_reserved[-1], "step": windows.step_reserved[-1]}
        measured = {
            "allocated_gib": last,
            "reserved_gib": last_reserved,
            "outside_torch_gib": outside,
            "first_update_allocated_gib": {"backward": windows.backward[0], "step": windows.step[0]},
        }
        # per phase, tensors only (reserved blocks stay reserved across windows); under ZeRO-2 DeepSpeed builds the
        # fp32 gradient partition before AdamW's step, so it lands in the backward window, not the step's
        for phase in ("backward", "step"):
            compared[phase] = {"tensors": plan_ratio(plan.phases[phase] / GIB - reserve, last[phase])}
        compared["peak"] = {
            "device": plan_ratio(plan.peak / GIB, max(last_reserved.values()) + outside),
            "tensors": plan_ratio(plan.peak / GIB - reserve, max(last.values())),
        }
    return {
        "model": model,
        "overrides": overrides,
        "distributed": str(run.accelerator.distributed_type),
        "precision": run.precision.__dict__,
        "parameters": {"total": plan.params.total, "trainable": plan.params.trainable},
        "samples": len(samples),
        "tokens": sum(len(s) for s in samples),
        "build_s": build_s,
        "update_s": times,
        "median_update_s": update_s,
        "update_tokens_per_s": sum(len(s) for s in samples) / update_s,
        "update_tflops": flops / update_s / 1e12,
        "update_mfu": mfu(flops, update_s, peak_flops(results)),
        "loss": update["loss"],
        "grad_norm": update["grad_norm"],
        "measured": measured,
        "plan": {
            "phases_gib": {k: v / GIB for k, v in plan.phases.items()},
            "peak_phase": plan.peak_phase,
            "components": {c.name: c.gib for c in plan.components},
        },
        "compared": compared,
        "memory_after": as_dict(after),
    }


def check_update_full(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """One GRPO update of a full fine-tune of a Qwen2.5-1.5B shape (plain accelerate, bf16 autocast)."""
    return run_updates(scale, work, results, FULL_MODEL, lora=False, zero=0)


def check_update_foreach(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """The full fine-tune's update with torch's foreach AdamW (``train.adamw_impl=foreach``, torch's CUDA default)
    beside the fused one ``auto`` picks: update time and the step's peak, as ratios to the fused run."""
    found = run_updates(scale, work, results, FULL_MODEL, lora=False, zero=0, extra=("train.adamw_impl=foreach",))
    fused = prior(results, "update_full_1.5b")
    step = found.get("measured", {}).get("allocated_gib", {}).get("step")
    fused_step = fused.get("measured", {}).get("allocated_gib", {}).get("step")
    found["fused_update_s"] = fused.get("median_update_s")
    found["vs_fused"] = found["median_update_s"] / found["fused_update_s"] if found["fused_update_s"] else None
    found["step_gib_over_fused"] = step - fused_step if step is not None and fused_step is not None else None
    return found


def check_update_lora(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """One GRPO update with LoRA on a Qwen2.5-7B shape over a bf16 frozen base."""
    return run_updates(scale, work, results, LORA_MODEL, lora=True, zero=0)


def check_zero2(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """The full fine-tune's update under DeepSpeed ZeRO-2 in one process (launched by the kit through
    ``accelerate launch --config_file launch/accelerate/zero2.yaml --num_processes 1``), against plain accelerate."""
    import deepspeed
    import torch.distributed

    try:
        found = run_updates(scale, work, results, FULL_MODEL, lora=False, zero=2)
    finally:  # an NCCL group left open can hang the process on exit
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    plain = prior(results, "update_full_1.5b").get("median_update_s")
    found["deepspeed"] = deepspeed.__version__
    found["plain_accelerate_update_s"] = plain
    found["vs_plain_accelerate"] = found["median_update_s"] / plain if plain else None
    return found


def check_logprobs(scale: Scale, work: Path, results: Path) -> dict[str, Any]:
    """The trainer's log-probs under bf16 autocast vs fp32 on the same sampled completions (and the engine's own,
    and those of a bf16 copy of the weights, as a bf16 engine such as vLLM would report them)."""
    import torch

    from agemem.core.chat import render_chat
    from agemem.core.config import BUNDLED_TOKENIZER
    from agemem.rollouts.build import build_engine
    from agemem.rollouts.config import EngineConfig, PolicyConfig
    from agemem.rollouts.engines.base import SamplingParams
    from agemem.rollouts.policy import cast_parameters, load_policy
    from agemem.tasks.hotpotqa import load_hotpotqa
    from agemem.train.policy import TokenLogprobs

    policy = PolicyConfig(
        model=str(model_dir(TRAIN_MODEL, scale, work)),
        init="random",
        tokenizer=BUNDLED_TOKENIZER,
        dtype="float32",
        attn_implementation="sdpa",
    )
    lm, tokenizer = load_policy(policy)
    tasks = load_hotpotqa("bundled:hotpotqa", limit=scale.logprob_prompts)
    prompts = [
        tokenizer(render_chat(tokenizer, [{"role": "user", "content": task.question}]), add_special_tokens=False)[
            "input_ids"
        ]
        for task in tasks
    ]
    engine = build_engine(EngineConfig(), lm, tokenizer)
    sampling = SamplingParams(temperature=1.0, max_tokens=scale.logprob_max_tokens, seed=0)
    completions = engine.generate(prompts, sampling)
    device = lm.device
    width = max(len(p) + len(c.token_ids) for p, c in zip(prompts, completions))
    pad = tokenizer.pad_token_id or 0
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    rows, cols, engine_logp = [], [], []
    for row, (prompt, completion) in enumerate(zip(prompts, completions)):
        sequence = list(prompt) + list(completion.token_ids)
        ids[row, : len(sequence)] = torch.tensor(sequence)
        mask[row, : len(sequence)] = 1
        rows += [row] * len(completion.token_ids)
        cols += list(range(len(prompt), len(sequence)))
        engine_logp += list(completion.logprobs or [float("nan")] * len(completion.token_ids))
    batch = (ids.to(device), mask.to(device), torch.tensor(rows, device=device), torch.tensor(cols, device=device))
    module = TokenLogprobs(lm, temperature=1.0)  # train.logprob_head=fp32, the default
    bf16_head = TokenLogprobs(lm, temperature=1.0, head_fp32=False)  # train.logprob_head=autocast
    with torch.no_grad():
        fp32 = module(*batch).double().cpu()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            autocast_exact_head = module(*batch).double().cpu()
            torch.set_float32_matmul_precision("high")  # what agemem train runs: the fp32 head's matmul in TF32
            autocast = module(*batch).double().cpu()
            torch.set_float32_matmul_precision("highest")
            autocast_bf16_head = bf16_head(*batch).double().cpu()
        cast_parameters(lm, torch.bfloat16)
        bf16_weights = bf16_head(*batch).double().cpu()  # a bf16 engine's logits are bf16
    engine_t = torch.tensor(engine_logp, dtype=torch.float64)
    del lm, module, bf16_head, engine

    def gap(other: torch.Tensor) -> dict[str, float]:
        delta = (other - fp32).abs()
        return {
            "mean_abs": float(delta.mean()),
            "max_abs": float(delta.max()),
            "mean_signed": float((other - fp32).mean()),
        }

    return {
        "tokens": len(rows),
        "sequences": len(prompts),
        "mean_logp_fp32": float(fp32.mean()),
        "bf16_autocast_vs_fp32": gap(autocast),
        "bf16_autocast_exact_fp32_head_vs_fp32": gap(autocast_exact_head),
        "bf16_autocast_bf16_head_vs_fp32": gap(autocast_bf16_head),
        "bf16_weights_vs_fp32": gap(bf16_weights),
        "engine_vs_fp32": gap(engine_t),
        "head_cost": head_cost(scale, device),
    }


HEAD_WIDTHS = {"qwen2.5-0.5b": 896, "qwen2.5-1.5b": 1536, "qwen2.5-7b": 3584}
"""hidden sizes of the lm heads the head-cost timing runs (the published configs'; 64 in the CPU smoke)."""


def head_cost(scale: Scale, device: Any) -> dict[str, Any]:
    """Seconds of the lm head's forward + backward over one update's completion positions (chunked and checkpointed
    as :class:`TokenLogprobs` runs it), with ``train.logprob_head=fp32`` against ``autocast``, for an fp32 head
    (plain accelerate's master weights) and a bf16 one (DeepSpeed's bf16 module), under bf16 autocast.

    What the fp32 head costs an update: ``extra_s`` = fp32 − autocast, per update of
    ``update_samples x update_completion_tokens`` positions."""
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    from agemem.train.policy import TokenLogprobs

    positions = scale.update_samples * scale.update_completion_tokens
    vocab, chunk = 151_936, 1024
    rows: dict[str, Any] = {"positions": positions, "vocab": vocab, "chunk": chunk}
    widths = {"qwen2.5-7b": 64} if scale.shrink else HEAD_WIDTHS  # the smoke's shrunk models are all 64 wide
    repeats = 2 if scale.shrink else 4
    for name, width in widths.items():
        generator = torch.Generator(device=device).manual_seed(0)
        hidden = torch.randn(positions, width, device=device, generator=generator)
        targets = torch.randint(0, vocab, (positions,), device=device, generator=generator)
        for weight_dtype in (torch.float32, torch.bfloat16):
            head = nn.Linear(width, vocab, bias=False, device=device, dtype=weight_dtype)
            nn.init.normal_(head.weight, std=0.02)
            timings = {}
            for mode, fp32_head, precision in (
                ("fp32", True, "highest"),
                ("fp32_tf32", True, "high"),
                ("autocast", False, "highest"),
            ):
                torch.set_float32_matmul_precision(precision)  # "high": TF32 (what agemem train sets, fp32 head)
                logprobs = TokenLogprobs(nn.Identity(), head_fp32=fp32_head)
                times = []
                for _ in range(repeats):  # one warm-up, the median of the rest
                    h = hidden.clone().requires_grad_(True)
                    synchronize()
                    start = time.perf_counter()
                    with torch.autocast(device.type, dtype=torch.bfloat16):
                        pieces = [
                            checkpoint(
                                logprobs._head_logprobs,
                                head,
                                h[i : i + chunk],
                                targets[i : i + chunk],
                                use_reentrant=False,
                            )
                            for i in range(0, positions, chunk)
                        ]
                    torch.cat(pieces).sum().backward()
                    synchronize()
                    times.append(time.perf_counter() - start)
                    head.weight.grad = None
                timings[mode] = statistics.median(times[1:])
            key = f"{name}_{str(weight_dtype).removeprefix('torch.')}_weight"
            rows[key] = {
                "fp32_s": timings["fp32"],
                "fp32_tf32_s": timings["fp32_tf32"],
                "autocast_s": timings["autocast"],
                "extra_s": timings["fp32"] - timings["autocast"],
                "extra_tf32_s": timings["fp32_tf32"] - timings["autocast"],
            }
            del head
    torch.set_float32_matmul_precision("highest")
    return rows


CHECKS: dict[str, Callable[[Scale, Path, Path], dict[str, Any]]] = {
    "matmul": check_matmul,
    "train": check_train,
    "plan": check_plan,
    "logprobs": check_logprobs,
    "update_full_1.5b": check_update_full,
    "update_full_1.5b_foreach": check_update_foreach,
    "update_lora_7b": check_update_lora,
    "zero2_1.5b": check_zero2,
}
"""in the order the kit runs them: each later one may read an earlier one's result (MFU, plan, step-time ratio)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one GPU-kit check (kit.py runs them all)")
    parser.add_argument("name", choices=list(CHECKS))
    parser.add_argument("--scale", choices=list(SCALES), default="gpu")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.results.mkdir(parents=True, exist_ok=True)
    target = args.results / f"{args.name}.json"
    target.unlink(missing_ok=True)
    try:
        result = {"status": "ok", **CHECKS[args.name](SCALES[args.scale], args.work, args.results)}
        code = 0
    except BaseException as err:  # a failed check records its error; the kit runs the rest
        result = {
            "status": "error",
            "error": f"{type(err).__name__}: {err}"[:2000],
            "traceback": traceback.format_exc()[-4000:],
        }
        code = 1
    target.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

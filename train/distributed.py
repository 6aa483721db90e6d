"""The accelerator of a training run, whatever launched it: one process, DDP (CPU gloo or CUDA NCCL) or
DeepSpeed ZeRO through ``accelerate launch``, and a one-line description of what it is.

Why not plain ``Accelerator(cpu=not torch.cuda.is_available())``: accelerate ignores its DeepSpeed plugin
when ``cpu=True`` (``AcceleratorState`` only turns DeepSpeed on ``and not cpu``), so a ZeRO launch on a
GPU-less machine silently trained as multi-process DDP; and with ``cpu=False`` it finds no communication
backend there and every launched process trains alone. Under a DeepSpeed launch without CUDA we pass
DeepSpeed's own accelerator's backend (gloo, or ccl when oneCCL is installed) explicitly instead.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError

if TYPE_CHECKING:
    from accelerate import Accelerator

    from agemem.train.config import TrainConfig


def deepspeed_launch() -> bool:
    """True under ``accelerate launch`` with a DeepSpeed config (the launcher sets this variable)."""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"


def build_accelerator(mixed_precision: str | None) -> Accelerator:
    """The Accelerator for this launch; ``mixed_precision`` None defers to the launch config."""
    import torch
    from accelerate import Accelerator

    if torch.cuda.is_available():
        return Accelerator(mixed_precision=mixed_precision)
    if deepspeed_launch():
        try:
            from deepspeed.accelerator import get_accelerator
        except ImportError as err:
            raise ConfigError(
                "this is a DeepSpeed launch (accelerate config distributed_type: DEEPSPEED) but deepspeed is not "
                "importable; install it (DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed) or launch with "
                "launch/accelerate/ddp.yaml"
            ) from err
        from accelerate.utils import InitProcessGroupKwargs

        backend = get_accelerator().communication_backend_name()  # 'gloo' on CPU without oneCCL
        return Accelerator(mixed_precision=mixed_precision, kwargs_handlers=[InitProcessGroupKwargs(backend=backend)])
    # cpu=True: otherwise `accelerate launch`/torchrun ranks on a CPU machine silently train alone
    return Accelerator(mixed_precision=mixed_precision, cpu=True)


def is_deepspeed(accelerator: Accelerator) -> bool:
    return str(accelerator.distributed_type).endswith("DEEPSPEED")


def deepspeed_config(accelerator: Accelerator) -> dict[str, Any] | None:
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    return plugin.deepspeed_config if plugin is not None and is_deepspeed(accelerator) else None


def zero_stage(accelerator: Accelerator) -> int | None:
    ds_config = deepspeed_config(accelerator)
    return None if ds_config is None else int(ds_config.get("zero_optimization", {}).get("stage", 0))


def compute_precision(accelerator: Accelerator) -> str:
    """'bf16', 'fp16' or 'no': what the forward computes in. Under DeepSpeed accelerate reports 'no' and
    the DeepSpeed config's bf16 / fp16 sections say it (filled by accelerate from the same mixed_precision)."""
    ds_config = deepspeed_config(accelerator)
    if ds_config is None:
        return str(accelerator.mixed_precision)
    for name in ("bf16", "fp16"):
        if str(ds_config.get(name, {}).get("enabled", False)).lower() == "true":
            return name
    return "no"


def configure_deepspeed(accelerator: Accelerator, train: TrainConfig) -> None:
    """Fill what no dataloader tells DeepSpeed before ``prepare``: our micro-batches are token-packed and
    accumulated by :func:`agemem.train.update.policy_update` (one engine step per mini-batch), clipping is ours."""
    ds_config = deepspeed_config(accelerator)
    if ds_config is None:
        return
    ds_config["train_micro_batch_size_per_gpu"] = 1
    ds_config["gradient_accumulation_steps"] = 1  # DeepSpeed divides each loss by this: ours are pre-weighted
    ds_config["train_batch_size"] = accelerator.num_processes
    ds_config["gradient_clipping"] = train.max_grad_norm
    if train.mixed_precision and train.mixed_precision != compute_precision(accelerator):
        raise ConfigError(
            f"train.mixed_precision={train.mixed_precision} but the DeepSpeed config computes in "
            f"{compute_precision(accelerator)}; make the DeepSpeed config's bf16/fp16 sections match (or leave "
            "them out: accelerate fills them from train.mixed_precision)"
        )


def describe(accelerator: Accelerator) -> dict[str, Any]:
    """What this run trains with: the distributed backend, ZeRO stage, processes, device and precision."""
    stage = zero_stage(accelerator)
    if stage is not None:
        kind = f"deepspeed-zero{stage}"
    elif accelerator.num_processes > 1:
        kind = "ddp"
    else:
        kind = "single"
    backend = None
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        backend = str(torch.distributed.get_backend())
    return {
        "distributed": kind,
        "zero_stage": stage,
        "processes": accelerator.num_processes,
        "backend": backend,
        "device": str(accelerator.device),
        "compute_precision": compute_precision(accelerator),
    }


def log_setup(accelerator: Accelerator, extra: dict[str, Any]) -> None:
    """One line on stderr (main process): a ZeRO launch that trains as DDP is visible at a glance."""
    if accelerator.is_main_process:
        setup = {**describe(accelerator), **extra}
        print("agemem train setup: " + " ".join(f"{k}={v}" for k, v in setup.items()), file=sys.stderr, flush=True)

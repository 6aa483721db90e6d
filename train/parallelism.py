"""How a training run is launched, as far as its memory goes: the ZeRO stage, the GPU count, the precision and
offload, read from an accelerate config file and the run config. Used by ``agemem plan`` (:mod:`agemem.train.plan`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agemem.train.config import TrainRunConfig
from agemem.train.model_size import ModelDims, PlanError

# DeepSpeed's defaults for the settings accelerate's plugin leaves unset (deepspeed/runtime/zero/config.py)
DS_REDUCE_BUCKET_SIZE = 500_000_000
DS_PREFETCH_BUCKET_SIZE = 50_000_000
DS_SUB_GROUP_SIZE = 1_000_000_000
DEFAULT_GPUS = 8


@dataclass(frozen=True)
class Parallelism:
    """How the run is launched, as far as memory goes."""

    gpus: int
    """data-parallel ranks (one per GPU)."""
    zero_stage: int
    """0 = plain DDP without DeepSpeed; 2 or 3 = DeepSpeed ZeRO."""
    mixed_precision: str
    """'bf16', 'fp16' or 'no'."""
    offload_optimizer: bool = False
    offload_param: bool = False
    reduce_bucket_size: int = DS_REDUCE_BUCKET_SIZE
    prefetch_bucket_size: int = DS_PREFETCH_BUCKET_SIZE
    sub_group_size: int = DS_SUB_GROUP_SIZE
    source: str = ""
    """where the stage and GPU count came from."""

    @property
    def deepspeed(self) -> bool:
        return self.zero_stage > 0

    @property
    def low_precision(self) -> bool:
        return self.mixed_precision in ("bf16", "fp16")


@dataclass(frozen=True)
class AccelerateSettings:
    """What :func:`read_accelerate_config` takes from an ``accelerate launch --config_file`` YAML."""

    path: str
    zero_stage: int
    gpus: int | None
    mixed_precision: str
    offload_optimizer: bool = False
    offload_param: bool = False
    buckets: dict[str, Any] = field(default_factory=dict)
    """zero_optimization values from a referenced DeepSpeed JSON (numbers or 'auto')."""


def read_accelerate_config(path: str | Path) -> AccelerateSettings:
    """The ZeRO stage, process count, precision and offload of an accelerate config (``launch/accelerate/``).

    ``distributed_type: DEEPSPEED`` gives ``deepspeed_config.zero_stage`` (or the stage of the
    ``deepspeed_config_file`` it names); ``MULTI_GPU`` / ``NO`` is stage 0 (DDP, or one process).
    """
    import yaml

    file = Path(path)
    if not file.is_file():
        raise PlanError(f"--accelerate-config {path}: no such file; pass one of launch/accelerate/*.yaml")
    raw = yaml.safe_load(file.read_text()) or {}
    if not isinstance(raw, dict):
        raise PlanError(f"--accelerate-config {path}: not an accelerate config (a YAML mapping)")
    kind = str(raw.get("distributed_type", "NO")).upper()
    gpus = raw.get("num_processes")
    precision = str(raw.get("mixed_precision") or "no")
    if kind in ("NO", "MULTI_GPU"):
        return AccelerateSettings(str(path), 0, int(gpus) if gpus else None, precision)
    if kind != "DEEPSPEED":
        raise PlanError(f"--accelerate-config {path}: distributed_type {kind} is not planned; use DDP or DeepSpeed")
    ds = raw.get("deepspeed_config") or {}
    stage = ds.get("zero_stage")
    offload_opt = str(ds.get("offload_optimizer_device", "none")).lower() not in ("none", "")
    offload_par = str(ds.get("offload_param_device", "none")).lower() not in ("none", "")
    buckets: dict[str, Any] = {}
    if ds.get("deepspeed_config_file"):
        ds_file = Path(ds["deepspeed_config_file"])
        ds_file = ds_file if ds_file.is_file() else file.parent / ds_file
        if not ds_file.is_file():
            raise PlanError(f"{path}: deepspeed_config_file {ds['deepspeed_config_file']} not found")
        ds_json = json.loads(ds_file.read_text())
        zero = ds_json.get("zero_optimization") or {}
        stage = zero.get("stage", stage)
        offload_opt = str((zero.get("offload_optimizer") or {}).get("device", "none")) not in ("none", "")
        offload_par = str((zero.get("offload_param") or {}).get("device", "none")) not in ("none", "")
        keys = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "sub_group_size")
        buckets = {key: zero[key] for key in keys if key in zero}
        if (ds_json.get("bf16") or {}).get("enabled") in (True, "auto") and precision == "no":
            precision = "bf16"
    return AccelerateSettings(
        str(path), int(stage if stage is not None else 2), int(gpus) if gpus else None, precision,
        offload_opt, offload_par, buckets,
    )  # fmt: skip


def resolve_parallelism(
    config: TrainRunConfig,
    dims: ModelDims,
    *,
    gpus: int | None = None,
    zero: int | None = None,
    accelerate: AccelerateSettings | None = None,
) -> Parallelism:
    """``--gpus`` > the accelerate config's ``num_processes`` > 8; ``--zero`` > its stage > 2 (our launch scripts'
    zero2.yaml). Precision: ``train.mixed_precision`` (the Accelerator is built with it) > the accelerate
    config's > bf16 under DeepSpeed, no under DDP."""
    n = gpus if gpus is not None else (accelerate.gpus if accelerate and accelerate.gpus else DEFAULT_GPUS)
    if n < 1:
        raise PlanError(f"--gpus {n}: a run needs at least 1 GPU; pass --gpus N with N >= 1")
    stage = zero if zero is not None else (accelerate.zero_stage if accelerate else 2)
    if stage not in (0, 2, 3):
        raise PlanError(
            f"ZeRO stage {stage} is not planned; use --zero 0 (DDP), 2 or 3 (ZeRO-1 saves less than ZeRO-2 at the "
            "same communication)"
        )
    gpus_from = "--gpus" if gpus is not None else accelerate.path if accelerate and accelerate.gpus else "default"
    stage_from = "--zero" if zero is not None else accelerate.path if accelerate else "default (zero2.yaml)"
    where = [f"gpus from {gpus_from}", f"stage from {stage_from}"]
    precision = config.train.mixed_precision or (accelerate.mixed_precision if accelerate else "")
    precision = precision or ("bf16" if stage else "no")
    buckets = dict(accelerate.buckets) if accelerate and stage else {}
    h2 = dims.hidden_size**2  # accelerate fills 'auto' buckets from the hidden size (utils/deepspeed.py)
    return Parallelism(
        gpus=n,
        zero_stage=stage,
        mixed_precision=precision,
        offload_optimizer=bool(accelerate and accelerate.offload_optimizer and stage >= 2),
        offload_param=bool(accelerate and accelerate.offload_param and stage == 3),
        reduce_bucket_size=_bucket(buckets.get("reduce_bucket_size"), h2, DS_REDUCE_BUCKET_SIZE),
        prefetch_bucket_size=_bucket(buckets.get("stage3_prefetch_bucket_size"), 0.9 * h2, DS_PREFETCH_BUCKET_SIZE),
        sub_group_size=_bucket(buckets.get("sub_group_size"), DS_SUB_GROUP_SIZE, DS_SUB_GROUP_SIZE),
        source="; ".join(where),
    )


def _bucket(value: Any, auto: float, default: int) -> int:
    if value is None:
        return default
    return int(auto) if value == "auto" else int(float(value))

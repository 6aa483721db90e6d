"""Atomic checkpoints: ``<output_dir>/checkpoints/step_000050/`` holds everything a resume needs.

* ``accelerate/``: model, optimizer, scheduler and every rank's RNG states (``Accelerator.save_state``,
  which also handles DeepSpeed's sharded states);
* ``policy/``: the weights as a plain Hugging Face directory (or the LoRA adapter) plus tokenizer,
  loadable by transformers / vLLM / ``agemem eval`` without this package's trainer;
* ``trainer_state.json``: the step, the data position, and what the run was;
* ``manifest.json``, written last: every file's size and (``checkpoint.checksums``) sha256, and how long
  the save took (``agemem.core.manifest``).

A checkpoint is written to ``step_N.tmp`` and renamed when complete; an interrupted save leaves
only a ``.tmp`` directory, which is ignored and removed by the next save. Resuming takes the newest
checkpoint that verifies against its manifest and says which newer ones it skipped and why.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.manifest import write_manifest
from agemem.core.runs import (
    CHECKPOINT_NAME,
    CheckpointError,
    TrainerState,
    checkpoint_dir,
    latest_checkpoint,
    read_trainer_state,
)
from agemem.rollouts.policy import torch_dtype

__all__ = [
    "CheckpointError",
    "TrainerState",
    "checkpoint_dir",
    "latest_checkpoint",
    "load_checkpoint",
    "read_trainer_state",
    "save_checkpoint",
]

if TYPE_CHECKING:
    from accelerate import Accelerator
    from transformers import PreTrainedTokenizerBase


def save_checkpoint(
    accelerator: Accelerator,
    output_dir: Path,
    state: TrainerState,
    policy_module: Any,
    tokenizer: PreTrainedTokenizerBase,
    *,
    keep_last: int,
    dtype: str | None = None,
    checksums: bool = True,
) -> Path:
    """Write the checkpoint of ``state.step`` atomically and prune to the ``keep_last`` newest.

    ``dtype`` (``policy.dtype``): the dtype of ``policy/``'s full weights. Training steps fp32 master weights
    (``accelerate/`` keeps them for the resume); what eval / vLLM load is the model in the run's dtype.
    The manifest is written last (``checksums``: with every file's sha256).
    """
    started = time.perf_counter()
    final = checkpoint_dir(output_dir, state.step)
    tmp = final.with_name(final.name + ".tmp")
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp / "accelerate"))
    lm = accelerator.unwrap_model(policy_module).lm
    is_peft = hasattr(lm, "peft_config")  # an adapter saves itself; full weights may sit in ZeRO-3 shards
    state_dict = None if is_peft else accelerator.get_state_dict(policy_module)  # collective: every rank calls
    if accelerator.is_main_process:
        if is_peft:
            lm.save_pretrained(tmp / "policy")  # adapter_config.json + the adapter weights
        else:
            weights = {k.removeprefix("lm."): _cast(v, dtype) for k, v in state_dict.items() if k.startswith("lm.")}
            config_dtype = lm.config.dtype  # save_pretrained sets it from the (fp32) parameters
            try:
                lm.save_pretrained(tmp / "policy", state_dict=weights, safe_serialization=True)
            finally:
                lm.config.dtype = config_dtype
            if dtype is not None:  # config.json's dtype must say what the files hold
                config_file = tmp / "policy" / "config.json"
                config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "dtype": dtype}, indent=2))
        tokenizer.save_pretrained(tmp / "policy")
        (tmp / "trainer_state.json").write_text(json.dumps(asdict(state), indent=2))
    accelerator.wait_for_everyone()  # every rank's shards are on disk before the manifest certifies them
    if accelerator.is_main_process:
        # how long the files took: what a preemption's grace period must cover (docs/cluster.md)
        write_manifest(tmp, checksums=checksums, extra={"write_s": round(time.perf_counter() - started, 3)})
        if final.exists():  # the same step saved before (a resumed run re-reached it)
            shutil.rmtree(final)
        tmp.rename(final)
        _prune(output_dir / "checkpoints", keep_last)
    accelerator.wait_for_everyone()
    return final


def _cast(tensor: Any, dtype: str | None) -> Any:
    return tensor.to(torch_dtype(dtype)) if dtype is not None and tensor.is_floating_point() else tensor


def _prune(root: Path, keep_last: int) -> None:
    complete = sorted((p for p in root.iterdir() if CHECKPOINT_NAME.match(p.name)), key=lambda p: p.name)
    for old in complete[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob("step_*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)


def load_checkpoint(accelerator: Accelerator, path: Path) -> TrainerState:
    """Restore model, optimizer, scheduler and RNG states from ``path``; returns the trainer state.

    Any failure to read it is a :class:`CheckpointError` that names the checkpoint and the way past it.
    """
    state = read_trainer_state(path)
    if state.world_size != accelerator.num_processes:
        raise CheckpointError(
            f"{path} was written by {state.world_size} process(es) but this run has {accelerator.num_processes}; "
            "resume with the same number of processes (the data order and RNG states are per rank)"
        )
    try:
        accelerator.load_state(str(path / "accelerate"))
    except Exception as error:  # torch, safetensors and DeepSpeed each raise their own kinds
        raise CheckpointError(
            f"{path} passed verification but could not be loaded ({type(error).__name__}: {error}); "
            f"resume from an older one with --resume-from step_N, or delete {path.name}"
        ) from error
    return state

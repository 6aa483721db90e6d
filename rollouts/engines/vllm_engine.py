"""Generation with vLLM through TRL's ``VLLMGeneration`` (colocated in the trainer, or a ``trl vllm-serve`` server).

This is the training engine for real runs: TRL owns the hard parts (starting vLLM next to the trainer
or connecting to ``trl vllm-serve``, gathering prompts across ranks, pushing the policy's weights into
vLLM under DDP / DeepSpeed / FSDP / PEFT). This module only adapts it to our
:class:`~rollouts.engines.base.Engine` protocol.

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
  every optimizer step (LoRA adapters are merged for the push and unmerged again by TRL).

vLLM and TRL's vLLM code are imported lazily in the constructor: without vLLM (the optional extra
``agemem[vllm]``, CUDA only) constructing the engine raises
:class:`~rollouts.engines.base.EngineUnavailable` saying how to install it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from rollouts.engines.base import Completion, EngineUnavailable, FinishReason, SamplingParams

if TYPE_CHECKING:
    from accelerate import Accelerator
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

INSTALL_HINT = (
    "the vLLM engine needs the optional vLLM extra: pip install 'agemem[vllm]' "
    "(vLLM runs on a CUDA GPU only; on CPU use the transformers engine)"
)

_PER_CALL_SETTINGS = frozenset({"temperature", "top_p", "top_k", "max_completion_length", "logprobs"})
"""VLLMGeneration arguments this engine sets from SamplingParams on every call; not constructor options."""


def _vllm_generation_class() -> type:
    """TRL's ``VLLMGeneration``, after checking that vLLM itself is importable."""
    try:
        import vllm  # noqa: F401  (TRL only checks availability lazily; fail here with our hint)
    except ImportError as err:
        raise EngineUnavailable(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    try:
        from trl.generation.vllm_generation import VLLMGeneration
    except ImportError as err:
        raise EngineUnavailable(
            f"TRL's vLLM backend could not be imported ({err}); the vLLM engine needs trl>=1.0 with "
            f"trl.generation.vllm_generation; {INSTALL_HINT}"
        ) from err
    return VLLMGeneration


class VLLMEngine:
    """The :class:`~rollouts.engines.base.Engine` protocol on TRL's ``VLLMGeneration``.

    ``model`` is the policy being trained (a transformers model or a ``PeftModel``; in colocate mode
    vLLM loads ``model.name_or_path`` and then receives the live weights through :meth:`sync_weights`).
    ``accelerator`` is the trainer's ``Accelerator`` (a fresh one when None). ``mode`` is ``"colocate"``
    (vLLM inside each training process, sharing its GPU) or ``"server"`` (a ``trl vllm-serve`` process at
    ``server_base_url``, or ``http://{server_host}:{server_port}``). ``max_model_len`` bounds prompt +
    completion. Other keyword arguments go to ``VLLMGeneration`` unchanged (``max_num_seqs``,
    ``group_port``, ``model_impl``, ``trust_remote_code``, ``repetition_penalty``, ``min_p``,
    ``generation_kwargs``, ...); the sampling settings that ``SamplingParams`` carries are refused there.
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

"""The trainable policy: log-probs of chosen tokens without full-vocabulary logits, LoRA, the reference.

:class:`TokenLogprobs` runs the decoder once and applies the LM head only at the positions that
predict completion tokens, in chunks of ``chunk`` positions whose ``[chunk, V]`` logits are
recomputed in the backward pass instead of stored: with Qwen's 151k vocabulary a full
``[B, T, V]`` fp32 logit tensor for 16k tokens would be 10 GB. It is the module accelerate wraps
(DDP / DeepSpeed), so every forward goes through the wrapper.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional
from torch.utils.checkpoint import checkpoint

from agemem.core.configlib import ConfigError
from agemem.rollouts.engines.transformers_engine import truncate_logits
from agemem.train.config import LoRAConfig

if TYPE_CHECKING:
    from accelerate import Accelerator
    from transformers import PreTrainedModel


def chosen_token_logprobs(
    logits_NV: torch.Tensor, targets_N: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """The log-prob of each row's target under the distribution the engine samples from, in at least fp32.

    With ``s = logits / T`` and ``S`` the tokens top-k / top-p truncation keeps (the sampler's support,
    :func:`agemem.rollouts.engines.transformers_engine.truncate_logits`):
    ``log π(a) = s_a − logsumexp_{v ∈ S ∪ {a}} s_v``; without truncation ``S`` is the vocabulary and this is
    ``log softmax(s)_a``. The target joins ``S`` so that a token the updated policy would no longer keep gets a
    finite, small log-prob (its ratio falls, the clip handles it) instead of −inf; the support is a constant of the
    gradient, as the sampler's choice of it was.
    """
    if logits_NV.dtype in (torch.float16, torch.bfloat16):
        logits_NV = logits_NV.float()  # a 151k-way logsumexp in bf16 is off by ~0.1 nat
    scaled_NV = logits_NV / temperature
    chosen_N = scaled_NV.gather(1, targets_N[:, None]).squeeze(1)
    if top_k <= 0 and top_p >= 1.0:
        return chosen_N - torch.logsumexp(scaled_NV, dim=1)
    with torch.no_grad():
        kept_NV = truncate_logits(scaled_NV.detach(), top_k, top_p).isfinite()
        kept_NV.scatter_(1, targets_N[:, None], True)
    return chosen_N - torch.logsumexp(scaled_NV.masked_fill(~kept_NV, float("-inf")), dim=1)


def head_logits_fp32(head: nn.Module, hidden_NH: torch.Tensor) -> torch.Tensor:
    """``logits = hidden · Wᵀ + b`` computed and returned in fp32, whatever the autocast region or ``W``'s dtype.

    Under bf16 autocast the head's matmul rounds its output to bf16: a logit near 20 is then off by up to 1/16, and
    the log-prob by about 0.01 nat a token on average against an fp32 forward (the GPU kit's ``logprobs`` check),
    which is noise in the ratio π_θ/π_old and in the importance weight against an engine's log-probs. Here the
    matmul runs outside autocast on fp32 operands: an fp32 weight (plain accelerate's master weights) is used as
    is; a half-precision one (DeepSpeed's bf16 module, a frozen LoRA base) is cast, a transient copy, and its
    gradient flows back through the cast. A head that is not a plain ``nn.Linear`` (a LoRA-wrapped head) or whose
    weight is a ZeRO-3 partition (empty outside its module's forward) keeps the module call: its logits are
    upcast after the matmul.
    """
    weight = getattr(head, "weight", None)
    if type(head) is not nn.Linear or weight is None or weight.numel() == 0:
        return head(hidden_NH).float()
    # at least fp32: a float64 module (the exactness tests') keeps float64
    dtype = torch.promote_types(torch.promote_types(hidden_NH.dtype, weight.dtype), torch.float32)
    bias = None if head.bias is None else head.bias.to(dtype)
    with torch.autocast(device_type=hidden_NH.device.type, enabled=False):
        return functional.linear(hidden_NH.to(dtype), weight.to(dtype), bias)


def fp32_matmul_precision(logprob_head: str, compute: str, device_type: str) -> str:
    """The ``torch.set_float32_matmul_precision`` a run uses: ``high`` (TF32) for a bf16/fp16 run on CUDA whose lm
    head computes fp32 logits, else ``highest``.

    Under autocast the head is the only fp32 matmul of the update. TF32 keeps its fp32 output (the point: no bf16
    rounding of the logits) with 10-bit-mantissa inputs, finer than the bf16 inputs autocast gives every other
    matmul, at about half the bf16 rate where exact fp32 runs at a tenth: on an H200 the exact fp32 head added
    0.65 s to each 8,192-position update of a 7B shape (GPU kit, ``logprobs.head_cost``). A run without mixed
    precision keeps exact fp32.
    """
    return "high" if logprob_head == "fp32" and compute != "no" and device_type == "cuda" else "highest"


class TokenLogprobs(nn.Module):
    """``forward(input_ids_BT, attention_mask_BT, rows_N, cols_N)`` → log-prob of token ``[row, col]``
    given the tokens before it, for the N (row, col) positions asked for (``col >= 1``)."""

    def __init__(
        self,
        lm: PreTrainedModel,
        *,
        temperature: float = 1.0,
        chunk: int = 1024,
        top_k: int = 0,
        top_p: float = 1.0,
        head_fp32: bool = True,
    ):
        super().__init__()
        self.lm = lm
        self.head_fp32 = head_fp32
        """fp32 logits (:func:`head_logits_fp32`, ``train.logprob_head=fp32``) or the head under the forward's
        autocast."""
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        """the sampler's truncation: log-probs are those of the truncated distribution it draws from."""
        self.chunk = chunk

    def forward(
        self,
        input_ids_BT: torch.Tensor,
        attention_mask_BT: torch.Tensor,
        rows_N: torch.Tensor,
        cols_N: torch.Tensor,
        n_chunks: int | None = None,
    ) -> torch.Tensor:
        """``n_chunks``: call the LM head exactly that many times (trailing chunks may be empty) instead of
        once per ``chunk`` positions. ZeRO-3 gathers the head's sharded weight collectively at every call, so
        ranks must agree on the count (:func:`agemem.train.update.policy_update` passes the global maximum)."""
        hidden_BTH = self.lm.get_decoder()(input_ids=input_ids_BT, attention_mask=attention_mask_BT).last_hidden_state
        hidden_NH = hidden_BTH[rows_N, cols_N - 1]  # the position before a token predicts it
        targets_N = input_ids_BT[rows_N, cols_N]
        head = self.lm.get_output_embeddings()
        n = len(targets_N)
        size = self.chunk if n_chunks is None else max(1, -(-n // n_chunks))
        starts = range(0, n, size) if n_chunks is None else [min(k * size, n) for k in range(n_chunks)]
        pieces = []
        for start in starts:
            h, t = hidden_NH[start : start + size], targets_N[start : start + size]
            if torch.is_grad_enabled() and h.requires_grad:
                pieces.append(checkpoint(self._head_logprobs, head, h, t, use_reentrant=False))
            else:
                pieces.append(self._head_logprobs(head, h, t))
        return torch.cat(pieces) if pieces else hidden_NH.new_zeros(0)

    def _head_logprobs(self, head: nn.Module, hidden_NH: torch.Tensor, targets_N: torch.Tensor) -> torch.Tensor:
        logits_NV = head_logits_fp32(head, hidden_NH) if self.head_fp32 else head(hidden_NH)
        return chosen_token_logprobs(logits_NV, targets_N, self.temperature, self.top_k, self.top_p)


HALF_DTYPES = ("bfloat16", "float16")


@dataclass(frozen=True)
class Precision:
    """Where each weight lives and what the forward computes in (the rule is in ``PolicyConfig.dtype``'s docs).

    The optimizer never steps a bf16/fp16 parameter: an AdamW update at lr 1e-6 is below half a bf16 ulp of
    a typical weight and rounds away (ten steps on 1,000 bf16 weights ~0.02*N(0,1) changed 19 of them).
    """

    load_dtype: str
    """dtype the trainable policy is loaded in."""
    frozen_dtype: str
    """dtype of weights that never train: the frozen reference and the LoRA base (``policy.dtype``)."""
    compute: str
    """'bf16', 'fp16' or 'no': accelerate's autocast, or DeepSpeed's half-precision module copy."""
    master: str
    """who holds the fp32 weights the optimizer steps: 'fp32 parameters', 'fp32 LoRA adapters' or
    'DeepSpeed fp32 master'."""


def plan_precision(policy_dtype: str, compute: str, *, lora: bool, deepspeed: bool) -> Precision:
    """The precision of a training run (``compute`` is the accelerator's, see agemem.train.distributed)."""
    if lora:  # the base is frozen in policy.dtype; the adapters are cast to fp32 by add_lora
        return Precision(policy_dtype, policy_dtype, compute, "fp32 LoRA adapters")
    if policy_dtype in HALF_DTYPES and compute == "no":
        raise ConfigError(
            f"policy.dtype={policy_dtype} with full fine-tuning and no mixed precision would step {policy_dtype} "
            f"weights, and updates at small learning rates round away; set train.mixed_precision="
            f"{'bf16' if policy_dtype == 'bfloat16' else 'fp16'} (fp32 master weights, half-precision compute), "
            "or policy.dtype=float32, or train LoRA adapters (lora.enabled=true)"
        )
    if deepspeed and compute != "no":
        # DeepSpeed casts the module to its bf16/fp16 config and keeps fp32 master partitions in its optimizer:
        # loading in fp32 would only double the host memory of the load
        return Precision(policy_dtype, policy_dtype, compute, "DeepSpeed fp32 master")
    return Precision("float32", policy_dtype, compute, "fp32 parameters")


def add_lora(model: PreTrainedModel, config: LoRAConfig) -> PreTrainedModel:
    """Wrap ``model`` with trainable LoRA adapters (peft); the base weights are frozen, the adapters fp32
    whatever the base dtype (an optimizer must not step half-precision weights)."""
    from peft import LoraConfig, get_peft_model

    adapters = LoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, adapters)
    for parameter in model.parameters():
        if parameter.requires_grad:
            parameter.data = parameter.data.float()
    return model


class Reference:
    """The reference policy of the KL term: the adapter-free base when training LoRA (no extra
    memory), else ``frozen``, a separately loaded copy of the initial weights (full fine-tuning)."""

    def __init__(self, frozen: TokenLogprobs | None = None):
        self.frozen = frozen

    @classmethod
    def adapters_disabled(cls) -> Reference:
        return cls(None)

    @classmethod
    def frozen_copy(cls, module: TokenLogprobs, accelerator: Accelerator | None = None) -> Reference:
        """``module`` (loaded like the policy, never a deepcopy: ZeRO-3 partitions weights at load time)
        frozen, in eval mode, on the accelerator's device or inside an inference-only DeepSpeed engine."""
        module.requires_grad_(False)
        module.eval()
        plugin = getattr(accelerator.state, "deepspeed_plugin", None) if accelerator is not None else None
        if plugin is None:
            return cls(module.to(accelerator.device) if accelerator is not None else module)
        import deepspeed

        ds_config = copy.deepcopy(plugin.deepspeed_config)
        ds_config.pop("optimizer", None)
        ds_config.pop("scheduler", None)
        zero = ds_config.setdefault("zero_optimization", {})
        if zero.get("stage") != 3:  # ZeRO-1/2 shard optimizer state only: a frozen model needs no engine sharding
            zero["stage"] = 0
        engine, *_ = deepspeed.initialize(model=module, config=ds_config)
        engine.eval()
        return cls(engine)

    @contextlib.contextmanager
    def model(self, policy: TokenLogprobs) -> Iterator[nn.Module]:
        """The module computing reference log-probs (``policy`` is the unwrapped trainable one)."""
        if self.frozen is not None:
            yield self.frozen
            return
        with policy.lm.disable_adapter():
            yield policy


def trainable_parameters(module: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(p.numel() for p in module.parameters())
    return sum(p.numel() for p in module.parameters() if p.requires_grad), total

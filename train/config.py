"""The training sections and the root of `agemem train` (and `agemem plan`, `agemem export`).

Each section is read by the trainer only: GRPO (:mod:`agemem.train.loss`, :mod:`agemem.train.advantages`), the
optimizer and batching (:mod:`agemem.train.update`), LoRA (:mod:`agemem.train.policy`), checkpoints
(:mod:`agemem.train.checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError
from agemem.tasks.config import TaskRunConfig


@dataclass
class GRPOConfig:
    beta: float = 0.1
    """weight of the k3 KL penalty against the reference policy (paper: 0.1); 0 = no reference model."""
    epsilon_low: float = 0.2
    """lower PPO clip: the ratio is clipped at 1 - epsilon_low."""
    epsilon_high: float = 0.2
    """upper PPO clip: the ratio is clipped at 1 + epsilon_high."""
    advantage_scale: Literal["group", "batch", "none"] = "group"
    """A = (R - group mean) / (std + eps) with the group's sample std (paper), the batch's, or A = R - group mean."""
    advantage_eps: float = 1e-6
    """eps in the advantage denominator."""
    advantage_std_floor: float = 0.0
    """the std in the advantage denominator is at least this (group and batch scaling): rewards that differ by less
    than about the floor give advantages below 1 instead of ±1; 0 = the paper's Eq. 5."""
    loss_aggregation: Literal["token_mean", "sequence_mean"] = "token_mean"
    """token_mean: mean over every completion token of the global batch; sequence_mean: mean over LLM steps of
    each step's token mean."""
    tis_cap: float | None = None
    """truncated importance sampling: weight each token by min(exp(logp_old - logp_engine), cap); null = off."""

    def validate(self) -> None:
        if self.beta < 0 or self.epsilon_low < 0 or self.epsilon_high < 0:
            raise ConfigError("beta, epsilon_low and epsilon_high must be >= 0")
        if self.epsilon_low >= 1:
            raise ConfigError(f"epsilon_low={self.epsilon_low} must be < 1 (the ratio is clipped at 1 - epsilon_low)")
        if self.advantage_eps <= 0:
            raise ConfigError(f"advantage_eps={self.advantage_eps} must be > 0")
        if self.advantage_std_floor < 0:
            raise ConfigError(f"advantage_std_floor={self.advantage_std_floor} must be >= 0 (0 = no floor)")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ConfigError(f"tis_cap={self.tis_cap} must be > 0 (or null to turn the correction off)")


@dataclass
class LoRAConfig:
    enabled: bool = False
    """train LoRA adapters (peft) instead of every weight; the reference policy is then the adapter-free base."""
    r: int = 16
    """adapter rank."""
    alpha: int = 32
    """adapter scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    """dropout on the adapter input; 0 keeps logp_old and the update's logp identical before the first step."""
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """module names that get adapters (Qwen2/Qwen3 attention and MLP projections)."""

    def validate(self) -> None:
        if self.r < 1 or self.alpha < 1 or not self.target_modules:
            raise ConfigError("lora.r and lora.alpha must be >= 1 and lora.target_modules non-empty")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"lora.dropout={self.dropout} must be in [0, 1)")


@dataclass
class TrainConfig:
    tasks_per_step: int = 8
    """tasks per optimizer step across all ranks, each rolled out rollout.rollouts_per_task times."""
    learning_rate: float = 1e-6
    """peak learning rate of AdamW."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """AdamW betas."""
    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    """learning-rate schedule after warmup, over max_steps optimizer steps x mini_batches x epochs."""
    warmup_steps: int = 0
    """linear warmup, in optimizer updates."""
    max_grad_norm: float = 1.0
    """gradient clipping by global norm; 0 = off."""
    epochs: int = 1
    """passes over each rollout batch (PPO epochs); 1 with mini_batches 1 = one update per batch (default)."""
    mini_batches: int = 1
    """optimizer updates per epoch: each rank's samples are cut into this many mini-batches."""
    micro_batch_tokens: int = 16384
    """padded tokens per forward pass (micro-batching by a token budget; gradients accumulate over them)."""
    merge_steps: bool = True
    """merge consecutive steps of a trajectory whose prompt + completion prefixes the next prompt (same loss,
    fewer tokens forwarded)."""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass (less memory, ~30% more compute)."""
    mixed_precision: Literal["", "no", "bf16", "fp16"] = ""
    """what the forward computes in: accelerate's autocast over fp32 master weights, or under DeepSpeed its
    bf16/fp16 section (filled from this; a DeepSpeed config that says otherwise is refused); empty: whatever
    `accelerate launch` / its config says (else no). See policy.dtype for where the weights live."""
    logprob_chunk_tokens: int = 1024
    """completion positions per lm-head chunk when computing log-probs ([chunk, vocab] logits live at a time)."""
    logprob_head: Literal["fp32", "autocast"] = "fp32"
    """precision of the lm head's logits in the loss: fp32 (its matmul outside autocast; a half-precision head
    weight gets a transient fp32 copy per chunk) or the forward's autocast (bf16 logits: ~0.01 nat a token of
    noise against an fp32 forward). Measured cost: docs/training.md#lm-head-precision."""
    adamw_impl: Literal["auto", "fused", "foreach", "for_loop"] = "auto"
    """AdamW's kernels: auto = fused on CUDA (one kernel per step, no temporaries), torch's default elsewhere;
    foreach holds a temporary the size of the trainable fp32 weights during the step (agemem plan counts it)."""
    shuffle: bool = True
    """shuffle tasks each epoch over the data (seeded by the run seed)."""
    release_memory_s: float = 10.0
    """seconds between returns of freed host memory to the system (glibc ``malloc_trim`` from a background thread,
    agemem.core.hostmem): without it a CPU run's resident memory grows to several times what it uses
    (docs/training.md#host-memory); 0 = never."""
    off_policy: bool = False
    """allow an engine whose weights are never synced (engine.backend=openai): its samples are reweighted by
    truncated importance sampling (grpo.tis_cap, required); false refuses such a run at start."""
    max_initial_mismatch_kl: float | None = 0.05
    """off-policy runs: the largest |train/mismatch_kl_k1| (nats a token between the served model and the trainer)
    accepted at step 1, where both should be the same initial weights; a larger gap stops the run before it saves
    anything (another model served, sampling fields ignored, raw log-probs); null turns the check off."""

    def validate(self) -> None:
        if self.tasks_per_step < 1 or self.epochs < 1 or self.mini_batches < 1:
            raise ConfigError("tasks_per_step, epochs and mini_batches must be >= 1")
        if self.learning_rate <= 0 or self.max_grad_norm < 0 or self.warmup_steps < 0:
            raise ConfigError("learning_rate must be > 0, max_grad_norm and warmup_steps >= 0")
        if len(self.adam_betas) != 2 or not all(0 <= b < 1 for b in self.adam_betas):
            raise ConfigError(f"adam_betas={self.adam_betas} must be two numbers in [0, 1)")
        if self.max_initial_mismatch_kl is not None and self.max_initial_mismatch_kl <= 0:
            raise ConfigError(
                f"max_initial_mismatch_kl={self.max_initial_mismatch_kl} must be > 0 (or null to turn the check off)"
            )
        if self.micro_batch_tokens < 1 or self.logprob_chunk_tokens < 1:
            raise ConfigError("micro_batch_tokens and logprob_chunk_tokens must be >= 1")
        if self.release_memory_s < 0:
            raise ConfigError(f"release_memory_s={self.release_memory_s} must be >= 0 (0 never returns freed memory)")


@dataclass
class CheckpointConfig:
    every: int = 50
    """save a checkpoint every this many steps (and at the last step); 0 = only at the end."""
    keep_last: int = 2
    """checkpoints kept; older ones are deleted after a new one is complete (keep 2 or more: a corrupted
    newest checkpoint is then skipped for the one before it)."""
    checksums: bool = True
    """record every file's sha256 in the checkpoint's manifest and check it on resume (sizes and readable
    headers are always checked); hashing reads the checkpoint once more (docs/cluster.md has the cost)."""
    on_signals: list[str] = field(default_factory=lambda: ["SIGTERM", "SIGUSR1", "SIGINT"])
    """signals that make training stop at the next safe point, checkpoint its last complete step and exit
    with code 75 (preemption, or SLURM's warning before the time limit; SIGINT, Ctrl-C: exit 130, and a
    second Ctrl-C stops at once); [] leaves the default actions."""

    def validate(self) -> None:
        if self.every < 0 or self.keep_last < 1:
            raise ConfigError(f"every={self.every} must be >= 0 and keep_last={self.keep_last} >= 1")
        from agemem.train.preemption import parse_signals

        parse_signals(self.on_signals)  # a ConfigError naming the bad signal


@dataclass
class TrainRunConfig(TaskRunConfig):
    """`agemem train`'s root: the tasks, the episode and its reward, plus how the policy learns from it."""

    max_steps: int = 100
    """optimizer steps of agemem train (one rollout batch each)."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """step-wise GRPO: advantages, clipping, KL (paper §3.4)."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """optimizer, batches, precision."""
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """LoRA adapters (peft)."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """checkpoints of agemem train."""

    def validate(self) -> None:
        super().validate()
        if self.max_steps < 1:
            raise ConfigError(f"max_steps={self.max_steps} must be >= 1 (the optimizer steps to train)")

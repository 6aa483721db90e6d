"""The settings of the CPU learning recipe (`agemem learn`), kept with the recipe.

``LearnRunConfig`` is the command's config root: everything ``agemem train`` reads (the GRPO stage is
that same config with the warm start as ``policy.model``) plus the recipe's own ``learn`` section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agemem.core.configlib import ConfigError
from agemem.train.config import TrainRunConfig


@dataclass
class LearnConfig:
    """`agemem learn`: tokenizer → SFT warm start on an imperfect expert → GRPO → held-out evaluation.

    The GRPO stage is this same config (max_steps, train, grpo, rollout, reward, ...) with the warm
    start as policy.model; policy.tiny_* size the model; data.synthetic shapes every task set.
    """

    seeds: list[int] = field(default_factory=lambda: [0])
    """run seeds; each trains its own tokenizer, model, warm start and GRPO run on its own task sets."""
    warm_start: str = ""
    """GRPO starts from this warm start instead of one trained per seed (stages 1-3 skipped): a folder with a policy
    and its tokenizer (an earlier run's output_dir/seed_N/warm_start), or bundled:learn-warm-start, the package's
    (seed 0 of configs/learn_cpu.yaml, `agemem learn --bundle-warm-start` rebuilds it). "" = train one per seed."""
    sft_tasks: int = 1000
    """synthetic tasks the expert demonstrates for the warm start (one demonstration each)."""
    sft_drills: int = 1000
    """reading drills: tasks a careful expert plays whose final answer, read from the memories it retrieved, is added
    to the SFT data (loss on that answer only); they teach reading, not when to store or retrieve. 0 = none."""
    sft_maintenance_drills: bool = False
    """also train each drill's maintenance reply: the Update_memory (or Delete_memory) written once its lookup shows
    the stale entry, or with expert_maintenance=overwrite in reply to the change (loss on that reply only). It
    teaches writing the fix; whether to look up stays the expert's, and with overwrite the drills fix every time."""
    eval_tasks: int = 200
    """held-out synthetic tasks scored before and after GRPO (the same set for every seed)."""
    eval_seed: int = 999_999
    """generator seed of the held-out tasks (training task sets use seeds derived from the run seed)."""
    tokenizer_tasks: int = 3000
    """synthetic tasks whose text trains the tokenizer (many names, so none becomes one token)."""
    vocab_size: int = 1024
    """tokenizer vocabulary, special and tag tokens included."""
    expert_store_fact: float = 0.5
    """expert: probability of storing each Stage-1 paragraph."""
    expert_store_distractor: float = 0.25
    """expert: probability of storing a Stage-2 distractor (a mistake)."""
    expert_retrieve: float = 0.6
    """expert: probability of retrieving before answering."""
    expert_update_stale: float = 0.0
    """expert: probability of updating a stored fact that a later Stage-1 message changes (data.synthetic.revisions)."""
    expert_maintenance: Literal["update", "replace", "delete", "overwrite"] = "update"
    """expert: a stale entry is rewritten (``update``: Update_memory, one sentence replaced), overwritten by the
    changed sentence its lookup quoted (``replace``: one call, a near copy), deleted with the change stored as it
    came (``delete``: Delete_memory + Add_memory in one reply), or overwritten without a lookup by the change as it
    came, the id read from the earlier Add_memory's result (``overwrite``: one call; pair it with
    data.synthetic.restate_unchanged so the entry keeps the person's other facts)."""
    expert_lookup_stored_only: bool = False
    """expert: look a change up only when its own earlier Add_memory stored the sentence it changes (every lookup then
    finds the stale entry; without it, half of them return another person's entry at expert_store_fact 0.5)."""
    expert_summarise_context: float = 0.0
    """expert: probability of summarising the context after a Stage-2 distractor it did not store."""
    expert_quote_evidence: bool = False
    """expert: an answer's thought quotes the sentence the value is read from (reading becomes copying)."""
    expert_quote_style: Literal["sentence", "clause"] = "sentence"
    """expert: quote the whole sentence, or the clause after the person's name ("Memory: plays the cello.")."""
    sft_answer_copies: int = 0
    """warm start: thought-to-answer turns ("<think>X plays the cello.</think><answer>cello</answer>", 8 per row,
    loss on the answer) mixed into SFT, teaching the quoting reader to answer with the value it quoted.
    Needs expert_quote_evidence. 0 = none."""
    expert_whole_message: bool = False
    """expert: store a kept Stage-1 message whole (lead-in included) rather than its bare paragraphs."""
    copy_steps: int = 2000
    """warm start, first phase: optimizer steps on random-token copy batches (recipes/learn/copy_task.py); 0 = skip."""
    copy_learning_rate: float = 1e-3
    """warm start, first phase: learning rate."""
    copy_word_share: float = 0.5
    """copy sequences (both phases) whose span is made of recurring words, so the copy must keep its place."""
    sft_copy_share: float = 0.5
    """warm start, imitation phase: copy sequences mixed in per demonstration row (keeps the copy circuit)."""
    sft_epochs: float = 2.0
    """warm start: passes over the demonstrations."""
    sft_learning_rate: float = 5e-4
    """warm start: peak learning rate."""
    sft_batch_size: int = 12
    """warm start: sequences per optimizer step (demonstrations and copy sequences together)."""
    sft_micro_batches: int = 1
    """warm start: split each step's random rows into this many micro-batches of similar length and accumulate
    (the same update, less padding; 3 of 18 rows: 1.45x faster a step on a CPU); must divide sft_batch_size."""
    copy_attention: Literal["eager", "sdpa"] = "sdpa"
    """attention kernel of the copy warm-up (not saved with the model). Its batches are short (<= 88 tokens) and
    unpadded, where eager is 1.5x faster a step than sdpa on a CPU (bench/sft_batching.py)."""
    warm_start_attention: Literal["eager", "sdpa"] = "sdpa"
    """attention kernel of the SFT (not saved: GRPO and rollouts use sdpa). As fast as eager a SFT step for the
    128-wide model on a CPU (bench/sft_batching.py); both warm starts whose SFT ran with eager drifted under GRPO."""

    def validate(self) -> None:
        if self.warm_start:
            from agemem.core.resources import resolve

            folder = Path(resolve(self.warm_start)).expanduser()
            if not (folder / "config.json").is_file() or not (folder / "tokenizer_config.json").is_file():
                raise ConfigError(
                    f"warm_start={self.warm_start!r}: {folder} holds no policy with its tokenizer (config.json, "
                    "tokenizer_config.json); give an earlier run's output_dir/seed_N/warm_start, "
                    'bundled:learn-warm-start, or "" to train one per seed'
                )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds={self.seeds} must be a non-empty list of distinct integers")
        if not 0.0 <= self.copy_word_share <= 1.0:
            raise ConfigError(f"copy_word_share={self.copy_word_share} is a share; use a value in [0, 1]")
        if self.copy_steps < 0 or self.copy_learning_rate <= 0 or self.sft_copy_share < 0:
            raise ConfigError(
                f"copy_steps={self.copy_steps} must be >= 0, learn.copy_learning_rate={self.copy_learning_rate} "
                f"> 0 and learn.sft_copy_share={self.sft_copy_share} >= 0"
            )
        if self.sft_drills < 0:
            raise ConfigError(f"sft_drills={self.sft_drills} must be >= 0 (0: no reading drills)")
        if self.sft_maintenance_drills and not self.sft_drills:
            raise ConfigError(
                "sft_maintenance_drills=true trains the drills' maintenance replies, but learn.sft_drills=0 plays no "
                "drill; set learn.sft_drills > 0 or learn.sft_maintenance_drills=false"
            )
        if self.sft_answer_copies < 0:
            raise ConfigError(f"sft_answer_copies={self.sft_answer_copies} must be >= 0 (0: none)")
        if self.sft_answer_copies and not self.expert_quote_evidence:
            raise ConfigError(
                f"sft_answer_copies={self.sft_answer_copies} teaches answering with the value a thought "
                "quoted, but learn.expert_quote_evidence is false (the expert's thoughts quote nothing); "
                "set learn.expert_quote_evidence=true or learn.sft_answer_copies=0"
            )
        for name in ("sft_tasks", "eval_tasks", "tokenizer_tasks", "sft_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        probabilities = (
            "expert_store_fact",
            "expert_store_distractor",
            "expert_retrieve",
            "expert_update_stale",
            "expert_summarise_context",
        )
        for name in probabilities:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)} is a probability; use a value in [0, 1]")
        if self.sft_micro_batches < 1 or self.sft_batch_size % self.sft_micro_batches:
            raise ConfigError(
                f"sft_micro_batches={self.sft_micro_batches} must be >= 1 and divide "
                f"learn.sft_batch_size={self.sft_batch_size}"
            )
        if self.vocab_size < 300 or self.sft_epochs <= 0 or self.sft_learning_rate <= 0:
            raise ConfigError("vocab_size must be >= 300, sft_epochs and sft_learning_rate > 0")


@dataclass
class LearnRunConfig(TrainRunConfig):
    """`agemem learn`'s root: the training config plus the recipe's ``learn`` section."""

    learn: LearnConfig = field(default_factory=LearnConfig)
    """the CPU learning demonstration (`agemem learn`)."""

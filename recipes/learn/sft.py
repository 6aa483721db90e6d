"""Supervised warm start: imitate demonstration trajectories with TRL's ``SFTTrainer``.

A demonstration is a trajectory like any rollout (an expert's or a stronger model's). Its
LLM steps become training sequences exactly as GRPO sees them: :func:`agemem.train.samples.build_samples`
merges consecutive steps whose prompt + completion prefixes the next prompt, and only the
completion tokens carry loss (``completion_mask``), so the warm start and the RL update train
the same tokens in the same contexts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.train.samples import build_samples

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from agemem.rollouts.records import Step as Step
    from agemem.rollouts.records import Trajectory


@dataclass(frozen=True)
class SFTSettings:
    epochs: float = 3.0
    """passes over the demonstrations."""
    learning_rate: float = 1e-3
    """peak AdamW learning rate (cosine decay after a linear warmup)."""
    batch_size: int = 16
    """sequences per optimizer step."""
    warmup: float = 0.05
    """share of the steps spent warming up."""
    adam_beta2: float = 0.98
    """AdamW's second-moment decay (TRL's default is 0.999)."""
    group_by_length: bool = False
    """batch rows of similar length (less padding, about 2x faster on a CPU) instead of shuffling them.
    Measured together with ``adam_beta2=0.98`` (not separated): shuffled batches and 0.98 gave a warm start
    that stores and retrieves at the expert's rates (Stage-1 P(store) 0.5 as demonstrated); length-grouped
    batches with 0.999 learned 0.27 and stored the answer's fact in 8% of episodes instead of 43%."""
    seed: int = 0
    """data order and dropout seed."""
    micro_batches: int = 1
    """split each batch of ``batch_size`` random rows into this many micro-batches of similar length and
    accumulate their gradients (transformers' ``batch_rebalance`` sampler): the same update as the whole batch,
    normalised by its completion tokens, with less padding. 1 pads every row to the batch's longest."""
    max_steps: int = 0
    """stop after this many optimizer steps (a smoke run, a benchmark); 0 runs the epochs."""
    mixed_precision: bool = True
    """bf16 autocast over fp32 master weights (TRL's default, CPUs included: about 2x faster on a CPU)."""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass to save memory. TRL turns it on by default, which suits
    billion-parameter models; for a small model it is a second forward pass a step for memory nobody needs."""
    copy_share: float = 0.0
    """copy-task rows mixed in per demonstration row (:func:`.copy_task.copy_rows`): a small model that
    learned to copy in a copy warm-up keeps the skill, and stretches it to the demonstrations' distances."""
    copy_word_share: float = 0.5
    """share of those copy rows whose span is made of recurring words (:func:`.copy_task.word_span`)."""
    maintenance_drills: bool = False
    """also train the drills' maintenance replies (:func:`maintenance_drill_dataset`)."""
    progress: bool = True
    """show TRL's progress bar."""

    def __post_init__(self) -> None:
        if self.micro_batches < 1 or self.batch_size % self.micro_batches:
            raise ValueError(
                f"micro_batches={self.micro_batches} must be >= 1 and divide batch_size={self.batch_size} "
                "(each optimizer step takes batch_size rows, split into micro_batches groups)"
            )
        if self.group_by_length and self.micro_batches > 1:
            raise ValueError("group_by_length and micro_batches > 1 are two ways to batch by length; pick one")


def demonstration_dataset(trajectories: Sequence[Trajectory]) -> Dataset:
    """Pre-tokenized rows ``{input_ids, completion_mask}``, one per merged run of LLM steps."""
    from datasets import Dataset

    samples, _ = build_samples(list(trajectories), [0.0] * len(trajectories), merge=True)
    if not samples:
        raise ValueError("the demonstrations hold no LLM step with a completion; nothing to imitate")
    return Dataset.from_dict(
        {
            "input_ids": [s.input_ids_T for s in samples],
            "completion_mask": [[int(bit) for bit in s.completion_mask_T] for s in samples],
        }
    )


def reading_drill_dataset(trajectories: Sequence[Trajectory]) -> Dataset:
    """Rows ``{input_ids, completion_mask}`` of each trajectory's final answer when it follows a
    ``Retrieve_memory`` call of the same turn: the prompt (ending with the retrieved memories) and, with
    loss, only the answer. Played by an expert that reads correctly, they teach reading retrieved memories
    and nothing about when to store or retrieve (the imitated decisions stay those of the imperfect expert)."""
    answers = []
    for trajectory in trajectories:
        final, previous = trajectory.steps[-1], trajectory.steps[-2] if len(trajectory.steps) > 1 else None
        if final.answer is not None and previous is not None and _follows_a_lookup(previous, final):
            answers.append(final)
    return _reply_rows(answers)


def _follows_a_lookup(previous: Step, step: Step) -> bool:
    return previous.turn == step.turn and any(c.get("name") == "Retrieve_memory" for c in previous.tool_calls)


def _reply_rows(steps: Sequence[Step]) -> Dataset:
    """Rows ``{input_ids, completion_mask}``, one a step: its prompt, then its reply, with loss on the reply only."""
    from datasets import Dataset

    steps = [step for step in steps if step.completion_ids]
    return Dataset.from_dict(
        {
            "input_ids": [list(s.prompt_ids) + list(s.completion_ids) for s in steps],
            "completion_mask": [[0] * len(s.prompt_ids) + [1] * len(s.completion_ids) for s in steps],
        }
    )


MAINTENANCE_TOOLS = frozenset({"Update_memory", "Delete_memory"})


def maintenance_drill_dataset(trajectories: Sequence[Trajectory]) -> Dataset:
    """Rows ``{input_ids, completion_mask}`` of each reply that calls ``Update_memory`` or ``Delete_memory``: the
    prompt and, with loss, only that reply. Played by an expert that always brings a changed fact up to date, they
    teach how to write the fix (copy the id, rewrite the entry). After a lookup (``learn.expert_maintenance``
    ``update``, ``replace``, ``delete``) the prompt ends with the lookup's result, the stale entry and its id in
    it, and whether to look a change up at all stays the imperfect expert's decision; with ``overwrite`` the fix is
    the reply to the change itself, its id in the earlier ``Add_memory``'s result."""
    return _reply_rows(
        [
            step
            for trajectory in trajectories
            for step in trajectory.steps
            if any(c.get("name") in MAINTENANCE_TOOLS for c in step.tool_calls)
        ]
    )


def answer_copy_rows(
    tokenizer: PreTrainedTokenizerBase, statements: Sequence[tuple[str, str]], *, per_row: int = 8
) -> Dataset:
    """Rows ``{input_ids, completion_mask}`` of ``per_row`` assistant turns each,
    ``<think>{statement}</think><answer>{value}</answer>``, with loss on the answer only.

    They teach the last copy of reading: a policy whose thought quotes the memory it reads from
    ("Velora Quint plays the cello.") still has to repeat the value that ends the quote as its answer.
    Learned from episodes alone this took thousands of answers (a 1.1M-parameter model answered some other
    value even after quoting the right sentence); these rows are a few dozen tokens a turn, and the thought,
    which carries no loss, never teaches stating an invented fact.
    """
    from datasets import Dataset

    from agemem.core.chat import end_of_turn_ids, render_chat

    if per_row < 1:
        raise ValueError(f"per_row={per_row} must be >= 1")
    probe = [{"role": "user", "content": "x"}]
    closed = render_chat(tokenizer, probe, add_generation_prompt=False)
    header = render_chat(tokenizer, probe, add_generation_prompt=True)[len(closed) :]  # "<|im_start|>assistant\n"

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    end_of_turn, newline = [end_of_turn_ids(tokenizer)[0]], encode("\n")
    rows: dict[str, list[list[int]]] = {"input_ids": [], "completion_mask": []}
    for start in range(0, len(statements) - per_row + 1, per_row):
        ids: list[int] = []
        mask: list[int] = []
        for statement, value in statements[start : start + per_row]:
            shown = encode(f"{header}<think>{statement}</think><answer>")
            answered = encode(f"{value}</answer>") + end_of_turn
            ids += shown + answered + newline
            mask += [0] * len(shown) + [1] * len(answered) + [0] * len(newline)
        rows["input_ids"].append(ids)
        rows["completion_mask"].append(mask)
    return Dataset.from_dict(rows)


def supervised_warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    trajectories: Sequence[Trajectory],
    settings: SFTSettings,
    output_dir: str | Path,
    *,
    drills: Sequence[Trajectory] = (),
    answer_statements: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Fine-tune ``model`` in place on the demonstrations' completions (plus the reading-drill answers of
    ``drills``, :func:`reading_drill_dataset`, and the answer-copy rows of ``answer_statements``,
    :func:`answer_copy_rows`); save model and tokenizer to ``output_dir`` (a Hugging Face directory
    ``policy.model`` can point at) and return TRL's train metrics."""
    import torch
    from trl import SFTConfig

    dataset, counts = warm_start_dataset(
        tokenizer, trajectories, settings, drills=drills, answer_statements=answer_statements
    )
    output = Path(output_dir)
    args = SFTConfig(
        output_dir=str(output / "trl"),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps or -1,
        # with micro-batches the sampler draws batch_size random rows a step and splits them by length; the
        # trainer normalises the accumulated loss by the whole batch's completion tokens (num_items_in_batch)
        per_device_train_batch_size=settings.batch_size // settings.micro_batches,
        gradient_accumulation_steps=settings.micro_batches,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=settings.warmup,
        weight_decay=0.0,
        max_length=None,  # demonstrations are complete sequences; truncating one would cut its answer off
        completion_only_loss=True,
        adam_beta2=settings.adam_beta2,
        train_sampling_strategy=_sampling_strategy(settings),
        save_strategy="no",
        report_to="none",
        logging_steps=max(1, _optimizer_steps(len(dataset), settings) // 8),
        disable_tqdm=not settings.progress,
        seed=settings.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=settings.mixed_precision,
        gradient_checkpointing=settings.gradient_checkpointing,
    )
    trainer = _seeded_trainer_class()(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    metrics = trainer.train().metrics
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    metrics["first_loss"], metrics["final_loss"] = losses[0], losses[-1]  # logged batch losses, for a glance
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    metrics.update(counts)
    return metrics


def warm_start_dataset(
    tokenizer: PreTrainedTokenizerBase,
    trajectories: Sequence[Trajectory],
    settings: SFTSettings,
    *,
    drills: Sequence[Trajectory] = (),
    answer_statements: Sequence[tuple[str, str]] = (),
) -> tuple[Dataset, dict[str, int]]:
    """The warm start's rows (demonstrations, reading drills and, with ``settings.maintenance_drills``, maintenance
    drills, answer-copy turns, copy sequences: see :func:`supervised_warm_start`) and how many of each, with the
    demonstrations' token counts."""
    from datasets import concatenate_datasets

    dataset = demonstration_dataset(trajectories)
    demonstration_rows = len(dataset)
    extras = {
        "drill_sequences": reading_drill_dataset(drills) if drills else None,
        "maintenance_drill_sequences": maintenance_drill_dataset(drills)
        if drills and settings.maintenance_drills
        else None,
        "answer_copy_sequences": answer_copy_rows(tokenizer, answer_statements) if answer_statements else None,
    }
    extra_counts = {name: len(rows) if rows is not None else 0 for name, rows in extras.items()}
    filled = [rows for rows in extras.values() if rows is not None and len(rows)]
    if filled:
        dataset = concatenate_datasets([dataset, *filled])
    if settings.copy_share > 0:
        dataset = with_copy_rows(dataset, tokenizer, settings)
    counts = {
        "sequences": demonstration_rows,
        **extra_counts,
        "copy_sequences": len(dataset) - demonstration_rows - sum(extra_counts.values()),
        "completion_tokens": sum(sum(mask) for mask in dataset["completion_mask"][:demonstration_rows]),
        "tokens": sum(len(ids) for ids in dataset["input_ids"][:demonstration_rows]),
    }
    return dataset, counts


def _optimizer_steps(rows: int, settings: SFTSettings) -> int:
    return settings.max_steps or math.ceil(math.ceil(rows / settings.batch_size) * settings.epochs)


def _sampling_strategy(settings: SFTSettings) -> str:
    if settings.group_by_length:
        return "group_by_length"
    return "batch_rebalance" if settings.micro_batches > 1 else "random"


def completion_loss(model: PreTrainedModel, inputs: dict[str, Any], num_items_in_batch: Any = None) -> Any:
    """Next-token cross-entropy summed over the completion tokens, divided by the batch's completion tokens:

        L = -(1/N) sum_{t: labels[t+1] != -100} log p(labels[t+1] | ids[:t+1]),   N = ``num_items_in_batch``

    (N is the whole accumulated batch's count, so micro-batches sum to the whole batch's loss; the micro-batch's
    own count when None). The LM head runs only at those positions: the same loss as TRL's completion-only
    loss, whose chunked head scores every position, in 0.86x the step time on the recipe's CPU model
    (``bench/sft_batching.py``, modes ``3:sdpa:trl`` and ``3:sdpa``)."""
    from torch.nn import functional

    labels_BT = inputs["labels"]
    passed = {k: inputs[k] for k in ("input_ids", "attention_mask", "position_ids") if inputs.get(k) is not None}
    hidden_BTH = model.get_decoder()(**passed, use_cache=False).last_hidden_state
    targets_BT = labels_BT[:, 1:]
    scored_BT = targets_BT != -100
    logits_NV = model.get_output_embeddings()(hidden_BTH[:, :-1][scored_BT])
    count = scored_BT.sum() if num_items_in_batch is None else num_items_in_batch
    return functional.cross_entropy(logits_NV.float(), targets_BT[scored_BT], reduction="sum") / count


def _seeded_trainer_class():
    """``SFTTrainer`` whose length-balanced sampler shuffles with ``args.seed`` (transformers builds its
    ``BatchRebalanceSampler`` with a fixed seed, 42, so every run seed would see the same row order) and whose loss
    is :func:`completion_loss`."""
    from transformers.trainer_pt_utils import BatchRebalanceSampler
    from trl import SFTTrainer

    class SeededSFTTrainer(SFTTrainer):
        def _get_train_sampler(self, train_dataset=None):
            sampler = super()._get_train_sampler(train_dataset)
            if isinstance(sampler, BatchRebalanceSampler):  # it reads its seed when iterated, so this takes effect
                sampler.seed = self.args.seed
            return sampler

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if return_outputs:  # evaluation asks for outputs; the warm start never evaluates inside the trainer
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            return completion_loss(model, inputs, num_items_in_batch)

    return SeededSFTTrainer


def with_copy_rows(dataset: Dataset, tokenizer: PreTrainedTokenizerBase, settings: SFTSettings) -> Dataset:
    """``dataset`` plus ``round(copy_share x len(dataset))`` copy sequences as long as its rows (the trainer
    shuffles them together, so every epoch keeps practising copying)."""
    from datasets import Dataset, concatenate_datasets

    from agemem.recipes.learn.copy_task import copy_rows

    lengths = [len(ids) for ids in dataset["input_ids"]]
    count = round(settings.copy_share * len(dataset))
    if count == 0:
        return dataset
    shortest = max(16, min(lengths))  # room for two spans of 8 tokens
    rows = copy_rows(
        tokenizer,
        count,
        lengths=(shortest, max(shortest, max(lengths))),
        word_share=settings.copy_word_share,
        seed=settings.seed,
    )
    return concatenate_datasets([dataset, Dataset.from_dict(rows)])

"""SFT warm start: the dataset trains exactly the completion tokens, and TRL's trainer learns them."""

from __future__ import annotations

import pytest
import torch

from agemem.recipes.learn.expert import ExpertHabits
from agemem.recipes.learn.sft import (
    SFTSettings,
    answer_copy_rows,
    demonstration_dataset,
    maintenance_drill_dataset,
    reading_drill_dataset,
    supervised_warm_start,
    warm_start_dataset,
)
from agemem.recipes.learn.task_tokenizer import train_task_tokenizer
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import tiny_qwen2_config
from agemem.tasks.synthetic import BY_NAME, generate_synthetic_tasks
from tests.rollouts.scripted import play_expert


@pytest.fixture(scope="module")
def demonstrations():
    tasks = generate_synthetic_tasks(6, seed=2, attributes_per_entity=1, distractors_per_task=1)
    texts = sorted({text for t in tasks for text in (t.question, *t.distractors, *(p.text for p in t.contexts))})
    tokenizer = train_task_tokenizer(texts, vocab_size=400)
    return tokenizer, play_expert(tokenizer, tasks, ExpertHabits(1.0, 0.0, 1.0))


def test_dataset_masks_exactly_the_completion_tokens(demonstrations):
    _, trajectories = demonstrations
    dataset = demonstration_dataset(trajectories)
    completion_tokens = sum(len(s.completion_ids) for t in trajectories for s in t.steps)
    assert sum(sum(mask) for mask in dataset["completion_mask"]) == completion_tokens
    # merged runs: every trajectory is (Stage 1) + (Stage 2 and 3, which append to one context) = 2 rows
    assert len(dataset) == 2 * len(trajectories)
    row = dataset[0]
    first = trajectories[0].steps[0]
    start = len(first.prompt_ids)
    assert row["input_ids"][start : start + len(first.completion_ids)] == first.completion_ids
    assert row["completion_mask"][:start] == [0] * start


def test_reading_drills_train_only_the_answer_read_from_retrieved_memories(demonstrations):
    tokenizer, trajectories = demonstrations  # the careful expert: every fact stored, always retrieves
    dataset = reading_drill_dataset(trajectories)
    assert len(dataset) == len(trajectories)
    for row, trajectory in zip(dataset, trajectories, strict=True):
        final = trajectory.steps[-1]
        masked = [t for t, bit in zip(row["input_ids"], row["completion_mask"], strict=True) if bit]
        assert masked == final.completion_ids  # the loss covers the answer and nothing else
        assert tokenizer.decode(masked).startswith("<think>Answer.</think><answer>" + trajectory.gold_answer)
        prompt = tokenizer.decode(row["input_ids"][: len(final.prompt_ids)])
        assert "Retrieve_memory" in prompt and trajectory.question in prompt
    # an expert that never retrieves gives no drill: its answers were not read from memory
    tasks = generate_synthetic_tasks(3, seed=2, attributes_per_entity=1, distractors_per_task=1)
    assert len(reading_drill_dataset(play_expert(tokenizer, tasks, ExpertHabits(1.0, 0.0, 0.0)))) == 0


def test_warm_start_learns_the_demonstrations_and_saves_a_loadable_model(demonstrations, tmp_path):
    from transformers import AutoModelForCausalLM, Qwen2ForCausalLM

    tokenizer, trajectories = demonstrations
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(tiny_qwen2_config(PolicyConfig(tiny_hidden_size=32, tiny_layers=1), len(tokenizer)))
    settings = SFTSettings(epochs=8, learning_rate=1e-2, batch_size=4, progress=False)
    metrics = supervised_warm_start(model, tokenizer, trajectories, settings, tmp_path / "warm")
    # a random model starts near ln(400) = 6.0 nats a token; 8 epochs on 12 rows halve it (measured 6.0 -> 3.0)
    assert metrics["first_loss"] > 5.5
    assert metrics["final_loss"] < 4.0
    assert not model.is_gradient_checkpointing  # TRL's default recomputes each forward; off for small models
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "warm")
    trained = model.state_dict()
    assert all(torch.equal(tensor, trained[name]) for name, tensor in reloaded.state_dict().items())
    assert reloaded.generation_config.eos_token_id == tokenizer.eos_token_id
    assert (tmp_path / "warm" / "tokenizer_config.json").exists()


def test_no_completion_tokens_is_a_clear_error():
    with pytest.raises(ValueError, match="nothing to imitate"):
        demonstration_dataset([])


def test_copy_rows_are_mixed_in_per_demonstration_row(demonstrations):
    from agemem.recipes.learn.sft import with_copy_rows

    tokenizer, trajectories = demonstrations
    dataset = demonstration_dataset(trajectories)  # 12 rows
    mixed = with_copy_rows(dataset, tokenizer, SFTSettings(copy_share=0.5, seed=1))
    assert len(mixed) == 12 + 6
    assert mixed[:12] == dataset[:12]  # the demonstrations are untouched, the copy rows come after
    shortest, longest = min(map(len, dataset["input_ids"])), max(map(len, dataset["input_ids"]))
    assert all(shortest <= len(ids) <= longest for ids in mixed["input_ids"][12:])
    assert all(sum(mask) >= 7 for mask in mixed["completion_mask"][12:])  # a repeat of >= 8 tokens, first unmasked
    assert with_copy_rows(dataset, tokenizer, SFTSettings(copy_share=0.01)) is dataset  # rounds to no row


def test_answer_copy_rows_train_only_the_value_the_thought_quoted(demonstrations):
    from agemem.tasks.synthetic import ATTRIBUTES, fact_statements

    tokenizer, _ = demonstrations
    statements = fact_statements(20, seed=3)
    assert statements == fact_statements(20, seed=3) and statements != fact_statements(20, seed=4)
    for sentence, value in statements:  # each a real fact sentence, ending with its value
        entity = " ".join(sentence.split()[:2]).removesuffix("'s")
        assert any(a.state(entity, value) == sentence for a in ATTRIBUTES)
        assert sentence.endswith(f" {value}.")
    dataset = answer_copy_rows(tokenizer, statements, per_row=8)
    assert len(dataset) == 2  # 20 statements, 8 a row: the 4 left over make no partial row
    for index, row in enumerate(dataset):
        ids, mask = row["input_ids"], row["completion_mask"]
        # the loss covers exactly "{value}</answer><|im_end|>" of each of the row's 8 turns
        spans, current = [], []
        for token, bit in zip(ids, mask, strict=True):
            if bit:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        turns = statements[8 * index : 8 * index + 8]
        assert [tokenizer.decode(span) for span in spans] == [f"{value}</answer><|im_end|>" for _, value in turns]
        text = tokenizer.decode(ids)
        for sentence, value in turns:  # ... after the quoted sentence, which carries no loss
            assert f"<|im_start|>assistant\n<think>{sentence}</think><answer>{value}</answer><|im_end|>" in text
    with pytest.raises(ValueError, match="per_row"):
        answer_copy_rows(tokenizer, statements, per_row=0)


@pytest.fixture(scope="module")
def revised_tasks():
    return generate_synthetic_tasks(5, seed=5, attributes_per_entity=2, distractors_per_task=1, revisions=1)


@pytest.mark.parametrize(
    ("maintenance", "fix"), [("update", "Update_memory"), ("replace", "Update_memory"), ("delete", "Delete_memory")]
)
def test_maintenance_drills_train_only_the_fix_written_after_the_lookup(
    qwen_tokenizer, revised_tasks, maintenance, fix
):
    habits = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance=maintenance, whole_message=True)
    trajectories = play_expert(qwen_tokenizer, revised_tasks, habits, paragraphs_per_turn=1, id_style="short")
    dataset = maintenance_drill_dataset(trajectories)
    assert len(dataset) == len(trajectories)  # one change a task, its fact always stored: one fix each
    for row, trajectory, task in zip(dataset, trajectories, revised_tasks, strict=True):
        (step,) = [s for s in trajectory.steps if any(c["name"] == fix for c in s.tool_calls)]
        masked = [t for t, bit in zip(row["input_ids"], row["completion_mask"], strict=True) if bit]
        assert masked == step.completion_ids  # the loss covers the fix and nothing else
        (change,) = task.metadata["revisions"]
        stale = BY_NAME[change["attribute"]].state(change["entity"], change["old"])
        fixed = next(c for c in step.tool_calls if c["name"] == fix)["arguments"]["memory_id"]
        prompt = qwen_tokenizer.decode(row["input_ids"][: len(step.prompt_ids)])
        # the prompt ends with the lookup's result: the stale entry and the id the fix copies
        lookup = prompt.rsplit("<tool_response>", 1)[1]
        assert stale in lookup and f'"memory_id": "{fixed}"' in lookup
    # an expert that never looks a change up writes no fix to drill
    lazy = ExpertHabits(1.0, 0.0, 1.0, update_stale=0.0, maintenance=maintenance, whole_message=True)
    assert len(maintenance_drill_dataset(play_expert(qwen_tokenizer, revised_tasks, lazy, paragraphs_per_turn=1))) == 0


def test_overwrite_drills_train_the_reply_to_the_change_whose_id_an_earlier_add_named(qwen_tokenizer):
    tasks = generate_synthetic_tasks(
        5, seed=5, attributes_per_entity=2, distractors_per_task=1, revisions=1, restate_unchanged=True
    )
    habits = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="overwrite", whole_message=True)
    trajectories = play_expert(qwen_tokenizer, tasks, habits, paragraphs_per_turn=1, id_style="short")
    dataset = maintenance_drill_dataset(trajectories)
    assert len(dataset) == len(trajectories)  # one change a task, its person always stored: one overwrite each
    for row, trajectory, task in zip(dataset, trajectories, tasks, strict=True):
        (step,) = [s for s in trajectory.steps if any(c["name"] == "Update_memory" for c in s.tool_calls)]
        masked = [t for t, bit in zip(row["input_ids"], row["completion_mask"], strict=True) if bit]
        assert masked == step.completion_ids  # the loss covers the overwrite and nothing else
        prompt = qwen_tokenizer.decode(row["input_ids"][: len(step.prompt_ids)])
        news = next(p for p in task.contexts if p.title.endswith("'s news"))
        # no lookup: the prompt ends with the change itself, and the id was named by the Add that stored the person
        last_user = prompt.rsplit("<|im_start|>user\n", 1)[1]
        assert all(sentence in last_user for sentence in news.sentences) and "<tool_response>" not in last_user
        (update,) = step.tool_calls
        assert f"stored 1 memory entry: {update['arguments']['memory_id']}" in prompt


def test_maintenance_drills_join_the_warm_start_only_when_asked(qwen_tokenizer, revised_tasks):
    habits = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, whole_message=True)
    drills = play_expert(qwen_tokenizer, revised_tasks, habits, paragraphs_per_turn=1)
    settings = dict(epochs=1, learning_rate=1e-3, batch_size=2, copy_share=0.0)
    plain, plain_counts = warm_start_dataset(qwen_tokenizer, drills, SFTSettings(**settings), drills=drills)
    both, counts = warm_start_dataset(
        qwen_tokenizer, drills, SFTSettings(**settings, maintenance_drills=True), drills=drills
    )
    assert plain_counts["maintenance_drill_sequences"] == 0 and counts["maintenance_drill_sequences"] == 5
    assert len(both) == len(plain) + 5
    assert both["input_ids"][-5:] == maintenance_drill_dataset(drills)["input_ids"]


def _warm_start(trajectories, tokenizer, directory, **settings):
    torch.manual_seed(0)
    model = _tiny(tokenizer)
    base = dict(epochs=2, learning_rate=1e-2, batch_size=12, mixed_precision=False, progress=False)
    metrics = supervised_warm_start(model, tokenizer, trajectories, SFTSettings(**{**base, **settings}), directory)
    return model, metrics


def test_length_balanced_micro_batches_give_the_whole_batch_update(demonstrations, tmp_path):
    """12 rows, batch 12: each step sees all rows, as one padded batch or as 3 length-sorted micro-batches
    whose losses are summed over the batch's completion tokens. Same losses, same weights after 2 steps.
    (Averaging each micro-batch's own tokens instead weights a short row's tokens ~2x: measured to fail.)"""
    tokenizer, trajectories = demonstrations
    assert len(demonstration_dataset(trajectories)) == 12
    whole, whole_metrics = _warm_start(trajectories, tokenizer, tmp_path / "whole")
    split, split_metrics = _warm_start(trajectories, tokenizer, tmp_path / "split", micro_batches=3)
    assert split_metrics["first_loss"] == pytest.approx(whole_metrics["first_loss"], rel=1e-5)
    assert split_metrics["final_loss"] == pytest.approx(whole_metrics["final_loss"], rel=1e-5)
    # the second step moves each weight by ~lr = 1e-2 (Adam); summation order leaves ~1e-6 (measured 6e-6 on one
    # weight of 4,096 whose gradient is near 0, where Adam's g / sqrt(v) magnifies rounding)
    split_state = split.state_dict()
    for name, tensor in whole.state_dict().items():
        torch.testing.assert_close(split_state[name], tensor, rtol=0, atol=5e-5)


def test_micro_batches_split_a_seeded_random_batch_by_length(demonstrations, tmp_path):
    from trl import SFTConfig

    from agemem.recipes.learn.sft import _seeded_trainer_class

    tokenizer, trajectories = demonstrations
    dataset = demonstration_dataset(trajectories)
    lengths = [len(ids) for ids in dataset["input_ids"]]

    def steps(seed: int) -> list[list[list[int]]]:
        args = SFTConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=2,
            gradient_accumulation_steps=2,
            train_sampling_strategy="batch_rebalance",
            seed=seed,
            use_cpu=True,
            report_to="none",
        )
        trainer = _seeded_trainer_class()(
            model=_tiny(tokenizer), args=args, train_dataset=dataset, processing_class=tokenizer
        )
        micro = list(trainer._get_train_sampler())
        return [micro[i : i + 2] for i in range(0, len(micro), 2)]

    seed0, seed1 = steps(0), steps(1)
    assert len(seed0) == 3  # 12 rows, 4 a step
    assert sorted(i for step in seed0 for mb in step for i in mb) == list(range(12))  # every row once an epoch
    for step in seed0:  # a step's rows, sorted by length, cut in two: no row of one is between two of the other
        first, second = ([lengths[i] for i in micro] for micro in step)
        assert min(first) >= max(second) or min(second) >= max(first)
    assert seed0 != seed1  # the run seed shuffles (transformers' own sampler is always seeded 42)


def _tiny(tokenizer):
    from transformers import Qwen2ForCausalLM

    return Qwen2ForCausalLM(tiny_qwen2_config(PolicyConfig(tiny_hidden_size=32, tiny_layers=1), len(tokenizer)))


def test_micro_batches_must_divide_the_batch():
    with pytest.raises(ValueError, match="divide batch_size=12"):
        SFTSettings(batch_size=12, micro_batches=5)
    with pytest.raises(ValueError, match="pick one"):
        SFTSettings(batch_size=12, micro_batches=2, group_by_length=True)


def test_completion_loss_is_the_mean_cross_entropy_of_the_completion_tokens(demonstrations):
    """A model whose every weight is 0 gives logits 0: each scored token costs ln V. Two rows of 7 tokens, 3 and 2
    of them scored (-100 elsewhere): L = 5 ln V / 5 = ln V; with N = 10 (the accumulated batch's count), ln V / 2."""
    import math

    from agemem.recipes.learn.sft import completion_loss

    tokenizer, _ = demonstrations
    model = _tiny(tokenizer)
    for parameter in model.parameters():
        torch.nn.init.zeros_(parameter)
    vocab = model.get_output_embeddings().weight.shape[0]
    input_ids = torch.randint(0, vocab, (2, 7))
    labels = torch.full((2, 7), -100)
    labels[0, 4:], labels[1, 5:] = input_ids[0, 4:], input_ids[1, 5:]  # positions 0 are never targets
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
    assert completion_loss(model, inputs).item() == pytest.approx(math.log(vocab), rel=1e-6)
    assert completion_loss(model, inputs, torch.tensor(10)).item() == pytest.approx(math.log(vocab) / 2, rel=1e-6)


def test_completion_loss_equals_trl_completion_only_loss_on_padded_batches(demonstrations, tmp_path):
    """The recipe's trainer scores completions only; TRL's own loss scores every position with a chunked head and
    masks. On the demonstrations' padded collated batches, with a random model, both give the same loss."""
    from trl import SFTConfig, SFTTrainer

    from agemem.recipes.learn.sft import completion_loss

    tokenizer, trajectories = demonstrations
    dataset = demonstration_dataset(trajectories)
    torch.manual_seed(0)
    model = _tiny(tokenizer)
    args = SFTConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, use_cpu=True, report_to="none", bf16=False
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    assert (batch["attention_mask"] == 0).any()  # rows of different lengths: padding is in play
    scored = (batch["labels"][:, 1:] != -100).sum()
    with torch.no_grad():
        theirs = trainer.compute_loss(model, dict(batch), num_items_in_batch=scored)
        ours = completion_loss(model, dict(batch), scored)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)

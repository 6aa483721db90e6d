"""Held-out evaluation statistics and per-episode scores, checked by hand."""

from __future__ import annotations

import math

import pytest

from agemem.recipes.learn.evaluate import EpisodeScore, mean_ci, mean_scores, paired_differences


def _score(task_id: str, em: float, reward: float = 0.0) -> EpisodeScore:
    return EpisodeScore(task_id, em, reward, 0.0, 0.0, 0.0, 0.0, 10.0, 5.0, 3.0, 0.0, None)


def test_mean_ci_is_the_student_t_interval():
    # values 1, 2, 3, 4: mean 2.5, sample sd sqrt(5/3) = 1.29099, se = 0.645497;
    # t_{0.975, 3} = 3.182446, half width 2.054255
    mean, low, high = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert low == pytest.approx(2.5 - 2.054255, abs=1e-5)
    assert high == pytest.approx(2.5 + 2.054255, abs=1e-5)
    # three seeds improving by 0.2, 0.3, 0.25: sd 0.05, se 0.028868, t_{0.975, 2} = 4.302653 -> +-0.124207
    mean, low, high = mean_ci([0.2, 0.3, 0.25])
    assert (mean, low, high) == pytest.approx((0.25, 0.125793, 0.374207), abs=1e-5)
    assert all(math.isnan(v) for v in mean_ci([0.4])[1:])
    with pytest.raises(ValueError):
        mean_ci([])


def test_paired_differences_match_tasks_by_id_not_position():
    before = [_score("a", 0.0), _score("b", 1.0), _score("c", 0.0)]
    after = [_score("c", 1.0), _score("a", 1.0), _score("b", 1.0)]
    assert paired_differences(before, after, "em") == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="same tasks"):
        paired_differences(before, [_score("z", 1.0), *after[1:]], "em")


def test_mean_scores_averages_every_metric():
    means = mean_scores([_score("a", 1.0, 0.5), _score("b", 0.0, -0.5)])
    assert means["em"] == 0.5
    assert means["reward"] == 0.0
    assert means["context_tokens"] == 10.0


# ---------------------------------------------------------------- useful use of each tool
def _tool_use(qwen_tokenizer, tasks, habits, **play):
    from agemem.recipes.learn.evaluate import tool_use
    from tests.rollouts.scripted import play_expert

    return [tool_use(t, task) for t, task in zip(play_expert(qwen_tokenizer, tasks, habits, **play), tasks)]


def test_an_update_counts_only_where_a_stale_entry_was_stored_and_is_gone(qwen_tokenizer):
    from agemem.recipes.learn.expert import ExpertHabits
    from agemem.tasks.synthetic import generate_synthetic_tasks

    revised = generate_synthetic_tasks(5, seed=5, attributes_per_entity=2, distractors_per_task=2, revisions=1)
    one_each = {"paragraphs_per_turn": 1}
    updating = _tool_use(qwen_tokenizer, revised, ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0), **one_each)
    assert [(u["updated_stale"], u["stale_kept"]) for u in updating] == [(1.0, 0.0)] * 5
    # deleting the stale entry and storing the change as it came counts the same
    deleting = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="delete", whole_message=True)
    replaced = _tool_use(qwen_tokenizer, revised, deleting, id_style="short", **one_each)
    assert [(u["updated_stale"], u["stale_kept"]) for u in replaced] == [(1.0, 0.0)] * 5
    # storing the change beside the stale entry leaves it there: no useful update
    beside = _tool_use(qwen_tokenizer, revised, ExpertHabits(1.0, 0.0, 1.0, update_stale=0.0), **one_each)
    assert [(u["updated_stale"], u["stale_kept"]) for u in beside] == [(0.0, 1.0)] * 5
    # nothing stored: nothing stale to fix, and not counted as fixed
    forgetting = _tool_use(qwen_tokenizer, revised, ExpertHabits(0.0, 0.0, 1.0, update_stale=1.0), **one_each)
    assert [(u["updated_stale"], u["stale_kept"]) for u in forgetting] == [(0.0, 0.0)] * 5


def test_only_a_stage_3_lookup_counts_as_retrieving_before_the_answer(qwen_tokenizer):
    from agemem.recipes.learn.expert import ExpertHabits
    from agemem.tasks.synthetic import generate_synthetic_tasks

    revised = generate_synthetic_tasks(4, seed=8, attributes_per_entity=2, distractors_per_task=2, revisions=1)
    # the updating expert retrieves in Stage 1 (the stale entry) whether or not it looks before answering
    asks = _tool_use(qwen_tokenizer, revised, ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0), paragraphs_per_turn=1)
    skips = _tool_use(qwen_tokenizer, revised, ExpertHabits(1.0, 0.0, 0.0, update_stale=1.0), paragraphs_per_turn=1)
    assert [u["retrieved_before_answer"] for u in asks] == [1.0] * 4
    assert [u["retrieved_before_answer"] for u in skips] == [0.0] * 4


def test_summarising_counts_as_managing_the_context_only_when_the_cap_was_never_hit(qwen_tokenizer):
    from agemem.recipes.learn.expert import ExpertHabits
    from agemem.tasks.synthetic import generate_synthetic_tasks

    long_stage_2 = generate_synthetic_tasks(3, seed=6, distractors_per_task=6, distractor_sentences=10)
    careful = ExpertHabits(1.0, 0.0, 1.0)
    summarising = ExpertHabits(1.0, 0.0, 1.0, summarise_context=1.0)
    # uncapped, both finish; summarising is the management, overflow impossible
    assert [u["managed_context"] for u in _tool_use(qwen_tokenizer, long_stage_2, summarising)] == [1.0] * 3
    assert [u["overflowed"] for u in _tool_use(qwen_tokenizer, long_stage_2, careful)] == [0.0] * 3
    # a cap between the summarised and the growing context's largest prompt: only the growing one is cut off
    cap = {"max_prompt_tokens": 900}
    assert [
        (u["managed_context"], u["overflowed"]) for u in _tool_use(qwen_tokenizer, long_stage_2, summarising, **cap)
    ] == [(1.0, 0.0)] * 3
    assert [
        (u["managed_context"], u["overflowed"]) for u in _tool_use(qwen_tokenizer, long_stage_2, careful, **cap)
    ] == [(0.0, 1.0)] * 3
    # a cap too small for anything: summarising that still overflows is not counted as useful
    tiny = {"max_prompt_tokens": 200}
    assert [u["managed_context"] for u in _tool_use(qwen_tokenizer, long_stage_2, summarising, **tiny)] == [0.0] * 3


def test_malformed_calls_count_as_nothing_written():
    from agemem.recipes.learn.evaluate import tool_use
    from agemem.rollouts.records import EpisodeStats, Step, Trajectory
    from agemem.tasks.synthetic import generate_synthetic_tasks

    (task,) = generate_synthetic_tasks(1, seed=5, revisions=1)
    calls = [{"name": "Add_memory", "arguments": "not an object"}, {"name": "Add_memory"}, {"arguments": {}}]
    step = Step(1, "action", 0, [1], [2], None, "stop", "", "", tool_calls=calls)
    trajectory = Trajectory(task.id, 0, task.question, task.answer, [step], None, "round_limit", EpisodeStats())
    assert tool_use(trajectory, task) == {
        "retrieved_before_answer": 0.0,
        "updated_stale": 0.0,
        "stale_kept": 0.0,
        "managed_context": 0.0,
        "overflowed": 0.0,
    }


def test_the_report_counts_the_seeds_on_which_each_tools_useful_use_rose():
    from agemem.recipes.learn.config import LearnRunConfig
    from agemem.recipes.learn.recipe import compare_seeds

    def seed(number, retrieve, update, summary):
        """before/after of each tool's metric; the other metrics 0."""
        before = {"retrieved_before_answer": retrieve[0], "updated_stale": update[0], "managed_context": summary[0]}
        after = {"retrieved_before_answer": retrieve[1], "updated_stale": update[1], "managed_context": summary[1]}
        return {
            "seed": number,
            "before": before,
            "after": after,
            "em_difference": {"mean": 0.1},
            "em_differences": [0.1],
        }

    results = [
        seed(0, (0.5, 0.9), (0.1, 0.0), (0.0, 0.2)),
        seed(1, (0.5, 0.5), (0.1, 0.3), (0.0, 0.1)),  # equal is not a rise
        seed(2, (0.4, 0.6), (0.2, 0.1), (0.3, 0.2)),
    ]
    # an evaluation from before the metric existed (no key) never counts as a rise
    results.append({**seed(3, (0.0, 1.0), (0.0, 1.0), (0.0, 1.0)), "before": {}})
    report = compare_seeds(LearnRunConfig(), results)
    assert report["useful_use_rises_on_seeds"] == {"Retrieve": 2, "Update/Delete": 1, "Summary/Filter": 2}

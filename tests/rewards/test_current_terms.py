"""``reward.terms=current``: storage judged against every fact the task holds true (a stale entry scores 0) and
maintenance paid for the share of superseded facts that memory ends up to date on, within Stage 1 included."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from agemem.core.configlib import ConfigError
from agemem.core.env import MemoryOpRecord
from agemem.recipes.learn.expert import ExpertHabits
from agemem.rewards.composite import change_shown_at, current_facts, score_trajectories
from agemem.rewards.config import RewardConfig
from agemem.rewards.judges import RuleJudge
from agemem.rewards.terms import (
    Supersession,
    carries,
    maintenance_reward_current,
    stale_facts_fixed,
    zero_stale_entries,
)
from agemem.tasks.synthetic import BY_NAME, generate_synthetic_tasks
from tests.rollouts.scripted import play_expert

STALE = Supersession("Ada Quint plays the cello.", "Ada Quint has switched instruments and now plays the harp.")
OTHER = "Bo Lind was born in 1979."


def add(step: int, memory_id: str, content: str) -> MemoryOpRecord:
    return MemoryOpRecord("add", 1, step, True, memory_id, content)


def update(step: int, memory_id: str, content: str, stage: int = 1) -> MemoryOpRecord:
    return MemoryOpRecord("update", stage, step, True, memory_id, content, previous_content="")


def delete(step: int, memory_id: str, stage: int = 1) -> MemoryOpRecord:
    return MemoryOpRecord("delete", stage, step, True, memory_id, "")


# ------------------------------------------------------------------------------------------- carries


def test_carries_reads_words_up_to_formatting_and_never_part_of_a_word():
    rng = random.Random(0)
    for task in generate_synthetic_tasks(40, seed=1, revisions=1):
        for sentence in task.metadata["current_facts"]:
            words = sentence.split()
            noisy = " ".join(w.upper() if rng.random() < 0.3 else w for w in words).rstrip(".") + " !"
            assert carries(f"Note: {noisy} And more.", sentence)
            # one word changed, or cut short, or run into the next word: not carried
            i = rng.randrange(len(words))
            changed = [*words[:i], words[i].rstrip(".") + "x", *words[i + 1 :]]
            assert not carries(" ".join(changed), sentence)
            assert not carries(" ".join(words[:-1]), sentence)
            assert not carries(sentence.rstrip(".") + "s.", sentence)
    assert not carries("anything", "")  # nothing to carry is never carried


def test_a_stale_entry_scores_0_whatever_else_it_carries():
    contents = [f"{OTHER} {STALE.stale}", OTHER, STALE.by]
    assert zero_stale_entries(contents, [1.0, 1.0, 1.0], [STALE]) == [0.0, 1.0, 1.0]
    assert zero_stale_entries(contents, [1.0, 0.5, 0.2], []) == [1.0, 0.5, 0.2]  # nothing superseded: the judge's


# ------------------------------------------------------------------------------------------- fixes, by hand

SHOWN = {STALE.by: 4}  # the change message was first in the prompt at env step 4
CASES = [
    # (operations, (fixed, went_stale)): why
    ([add(1, "m1", STALE.stale)], (0, 1)),  # stored before the change, never fixed
    ([add(1, "m1", STALE.stale), update(4, "m1", STALE.by)], (1, 1)),  # overwritten in reply to the change
    ([add(1, "m1", f"{OTHER} {STALE.stale}"), update(5, "m1", f"{OTHER} {STALE.by}", stage=3)], (1, 1)),  # later
    ([add(1, "m1", STALE.stale), delete(4, "m1"), add(4, "m2", STALE.by)], (1, 1)),  # deleted, the change stored
    ([add(1, "m1", STALE.stale), delete(4, "m1")], (0, 1)),  # deleted, the change lost: not up to date
    ([add(1, "m1", STALE.stale), update(4, "m1", OTHER)], (0, 1)),  # rewritten to something else
    ([add(1, "m1", STALE.stale), add(4, "m2", STALE.by)], (0, 1)),  # the change beside the stale entry
    (
        [add(1, "m1", STALE.stale), add(2, "m2", OTHER), update(4, "m2", STALE.by)],
        (0, 1),
    ),  # another's entry overwritten
    ([add(1, "m1", STALE.stale), delete(4, "m1"), add(4, "m2", STALE.stale), add(4, "m3", STALE.by)], (0, 1)),
    ([add(4, "m1", STALE.stale), update(5, "m1", STALE.by)], (0, 0)),  # stored with the change in view: a farm
    ([add(1, "m1", "zebra quasar"), delete(2, "m1")], (0, 0)),  # junk was never true
    ([add(1, "m1", STALE.by)], (0, 0)),  # only the change stored: nothing went stale
    ([MemoryOpRecord("add", 1, 1, False, None, STALE.stale, error="bad")], (0, 0)),  # a failed add wrote nothing
]


@pytest.mark.parametrize(("ops", "expected"), CASES)
def test_stale_facts_fixed_by_hand(ops, expected):
    assert stale_facts_fixed(ops, [STALE], SHOWN) == expected


def test_a_change_never_shown_makes_nothing_stale():
    assert stale_facts_fixed([add(1, "m1", STALE.stale), update(9, "m1", STALE.by)], [STALE], {}) == (0, 0)


def test_maintenance_pays_the_share_fixed():
    # two facts went stale, one fixed: 1 / 2; none went stale: 0, not 0 / 0
    assert maintenance_reward_current(1, 2) == 0.5
    assert maintenance_reward_current(0, 0) == 0.0


# ------------------------------------------------------------------------------------------- tasks


def test_synthetic_tasks_list_every_current_fact_and_what_changed():
    for task in generate_synthetic_tasks(30, seed=2, revisions=1, attributes_per_entity=2, restate_unchanged=True):
        facts, superseded = current_facts(task)
        (change,) = task.metadata["revisions"]
        attribute = BY_NAME[change["attribute"]]
        assert superseded == (
            Supersession(
                attribute.state(change["entity"], change["old"]), attribute.revise(change["entity"], change["new"])
            ),
        )
        # one per person and attribute; the changed one as the change states it, the stale one gone
        assert len(facts) == 3 * 2 and superseded[0].by in facts and superseded[0].stale not in facts
        assert task.supporting_facts[0].text in facts
        stated = {s for p in task.contexts for s in p.sentences}
        assert set(facts) <= stated
    (plain,) = generate_synthetic_tasks(1, seed=2)
    assert current_facts(plain) == (tuple(s for p in plain.contexts for s in p.sentences), ())


def test_tasks_that_do_not_list_their_facts_are_refused_with_the_fix():
    (task,) = generate_synthetic_tasks(1, seed=2)
    with pytest.raises(ConfigError, match=r"reward\.terms=current .* use reward\.terms=effects"):
        current_facts(replace(task, metadata={"source": "hotpotqa"}))


# ------------------------------------------------------------------------------------------- played


@pytest.fixture(scope="module")
def revised():
    return generate_synthetic_tasks(
        8, seed=5, attributes_per_entity=2, distractors_per_task=1, revisions=1, restate_unchanged=True
    )


def play_and_score(tokenizer, tasks, habits, terms="current"):
    trajectories = play_expert(tokenizer, tasks, habits, paragraphs_per_turn=1, id_style="short")
    config = RewardConfig(terms=terms)
    return trajectories, score_trajectories(trajectories, {t.id: t for t in tasks}, RuleJudge(), config, 8192)


def test_a_fix_within_stage_1_pays_where_the_effects_reading_sees_none(qwen_tokenizer, revised):
    fixer = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="overwrite", whole_message=True)
    beside = ExpertHabits(1.0, 0.0, 1.0, update_stale=0.0, whole_message=True)
    fixed_runs, fixed = play_and_score(qwen_tokenizer, revised, fixer)
    _, kept = play_and_score(qwen_tokenizer, revised, beside)
    _, fixed_effects = play_and_score(qwen_tokenizer, revised, fixer, terms="effects")
    for trajectory, task, f, k, e in zip(fixed_runs, revised, fixed, kept, fixed_effects):
        (superseded,) = current_facts(task)[1]
        # the change message reached the prompt at the step the expert overwrote in: env steps count agent steps
        (overwrite,) = [op for op in trajectory.stats.memory_ops if op.op == "update"]
        assert change_shown_at(trajectory, [superseded.by]) == {superseded.by: overwrite.step}
        assert overwrite.stage == 1
        # fixer: three entries, each a person's current facts: storage 3/3, the one stale fact fixed: 1/1
        assert (f["memory/storage"], f["memory/maintenance"], f["memory/maintained"]) == (1.0, 1.0, 1.0)
        # beside: four entries, the stale one scores 0: 3/4; nothing fixed
        assert (k["memory/storage"], k["memory/maintenance"]) == (0.75, 0.0)
        # the same fixer under effects: the fix happened within Stage 1, which its per-stage count cannot see
        assert e["memory/maintenance"] == 0.0 and e["memory/maintained"] == 0.0
        # R_memory = (storage + maintenance + relevance) / 3: the fix adds (0.25 + 1) / 3 to it, and more to the total
        assert f["memory"] - k["memory"] == pytest.approx(
            (0.25 + 1.0 + f["memory/relevance"] - k["memory/relevance"]) / 3
        )
        assert f["total"] > k["total"] and f["task"] >= k["task"]


def test_a_deleting_fixer_is_paid_as_the_overwriting_one(qwen_tokenizer, revised):
    deleter = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="delete", whole_message=True)
    _, scores = play_and_score(qwen_tokenizer, revised, deleter)
    assert all((s["memory/storage"], s["memory/maintenance"]) == (1.0, 1.0) for s in scores)


def test_training_refuses_a_reading_its_tasks_cannot_serve_before_any_rollout(tmp_path, capsys):
    from agemem.entrypoints.cli import main
    from tests.train.tiny_run import TINY

    args = [*TINY, "data.source=bundled:hotpotqa", "data.limit=2", "reward.terms=current", f"output_dir={tmp_path}"]
    with pytest.raises(SystemExit) as exit_:
        main(["train", *args, "max_steps=1"])
    assert exit_.value.code == 2  # a configuration error
    err = capsys.readouterr().err
    assert "reward.terms=current" in err and "use reward.terms=effects" in err
    assert not (tmp_path / "trajectories.jsonl").exists() and not (tmp_path / "metrics.jsonl").exists()  # no step

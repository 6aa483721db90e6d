"""LoCoMo's loader and its questions as training tasks, on the real file from the shared data (CC BY-NC 4.0: never in
the package): the counts the paper and the data's README give, evidence read leniently where the data are
malformed, a session per Stage-1 message headed by its date, and errors that say how to point at the file."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.rollouts.config import RolloutConfig
from agemem.tasks import load_tasks, task_for_source, task_names
from agemem.tasks.config import TaskRunConfig
from agemem.tasks.locomo import (
    LOCOMO,
    NOT_MENTIONED,
    LocomoConfig,
    evidence_ids,
    load_locomo,
    question_tasks,
)
from tests.games_support import needs_shared, shared_data

DATA = shared_data("locomo")
FILE = DATA / "locomo10.json" if DATA else None
needs_locomo = needs_shared("locomo")


@pytest.fixture(scope="module")
def conversations():
    return load_locomo(FILE)


def test_evidence_ids_are_read_leniently():
    assert evidence_ids(("D1:3",)) == ["D1:3"]
    assert evidence_ids(("D8:6; D9:17", "D9:1 D4:4 D4:6")) == ["D8:6", "D9:17", "D9:1", "D4:4", "D4:6"]
    assert evidence_ids(("D:11:26", "D30:05")) == ["D11:26", "D30:5"]  # a stray colon, a leading zero
    assert evidence_ids(("D",)) == []


@needs_locomo
def test_the_file_holds_what_the_paper_says(conversations):
    assert len(conversations) == 10
    assert sum(len(c.sessions) for c in conversations) == 272
    assert sum(len(s.turns) for c in conversations for s in c.sessions) == 5882
    assert {len(c.sessions) for c in conversations} <= set(range(19, 33))
    counts = Counter(q.category for c in conversations for q in c.questions)
    assert counts == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}  # 1,540 in categories 1-4, as the memory papers score
    first = conversations[0]
    assert first.sample_id == "conv-26" and first.speakers == ("Caroline", "Melanie")
    assert first.sessions[0].date_time == "1:56 pm on 8 May, 2023"


@needs_locomo
def test_a_question_is_a_task_with_its_evidence_turns_as_supporting_facts(conversations):
    tasks = question_tasks(conversations[0], LocomoConfig())
    first = tasks[0]
    assert first.id == "conv-26/q0" and first.question == "When did Caroline go to the LGBTQ support group?"
    assert first.answer == "7 May 2023" and first.metadata["category"] == 2
    (fact,) = first.supporting_facts  # evidence D1:3: session 1's third turn
    assert fact.title == "Session 1 (1:56 pm on 8 May, 2023)" and fact.sentence_index == 2
    assert fact.text == "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    assert first.contexts[0].sentences[2] == fact.text
    # a number in the data is text here (When did Melanie paint a sunrise? 2022)
    assert tasks[1].answer == "2022"
    assert all(task.metadata["category"] in (1, 2, 3, 4) for task in tasks)


@needs_locomo
def test_adversarial_questions_are_asked_only_when_chosen_and_expect_not_mentioned(conversations):
    default = sum(len(question_tasks(c, LocomoConfig())) for c in conversations)
    everything = [t for c in conversations for t in question_tasks(c, LocomoConfig(categories=[1, 2, 3, 4, 5]))]
    assert default == 1540 and len(everything) == 1986
    adversarial = [t for t in everything if t.metadata["category"] == 5]
    assert len(adversarial) == 446 and all(t.answer == NOT_MENTIONED for t in adversarial)
    assert adversarial[0].metadata["adversarial_answer"] == "self-care is important"


@needs_locomo
def test_every_evidence_id_names_a_turn_but_two(conversations):
    tasks = [t for c in conversations for t in question_tasks(c, LocomoConfig(categories=[1, 2, 3, 4, 5]))]
    missing = {t.id: t.metadata["missing_evidence"] for t in tasks if t.metadata["missing_evidence"]}
    assert missing == {"conv-42/q58": ["D10:19"], "conv-47/q38": ["D4:36"]}
    facts = sum(len(t.supporting_facts) for t in tasks)
    # 2,815 evidence strings; four hold several ids (2 + 3 + 4 + 4 in place of 4); "D" names none; 2 name no turn
    assert facts == 2815 - 4 + (2 + 3 + 4 + 4) - 1 - 2 == 2821


@needs_locomo
def test_stage_1_is_the_conversation_a_message_per_session_with_its_date(conversations):
    task = question_tasks(conversations[0], LocomoConfig())[0]
    stages = LOCOMO.stages(task, [], RolloutConfig())
    assert len(stages.facts) == len(conversations[0].sessions) == 19
    assert stages.facts[0].splitlines()[:2] == [
        "[Session 1 (1:56 pm on 8 May, 2023)]",
        "Caroline: Hey Mel! Good to see you! How have you been?",
    ]
    assert stages.distractors == [] and stages.question == task.question and not LOCOMO.uses_distractors
    photo = next(line for line in stages.facts[0].splitlines() if "[shares a photo:" in line)
    assert photo.endswith("[shares a photo: a photo of a dog walking past a wall with a painting of a woman]")
    plain = question_tasks(conversations[0], LocomoConfig(image_captions=False))[0]
    assert not any("[shares a photo" in s for p in plain.contexts for s in p.sentences)


@needs_locomo
def test_data_source_and_the_section_pick_the_file_and_the_conversations():
    assert "locomo" in task_names() and task_for_source(f"locomo:{FILE}") is LOCOMO
    config = load_config(TaskRunConfig, overrides=[f"data.source=locomo:{FILE}", "locomo.conversations=[conv-30]"])
    tasks = load_tasks(config)
    assert tasks and {t.metadata["conversation"] for t in tasks} == {"conv-30"}
    config = load_config(TaskRunConfig, overrides=["data.source=locomo", f"locomo.data={FILE}", "data.limit=5"])
    assert [t.id for t in load_tasks(config)] == [f"conv-26/q{i}" for i in range(5)]
    wrong = load_config(
        TaskRunConfig, overrides=["data.source=locomo", f"locomo.data={FILE}", "locomo.conversations=[x]"]
    )
    with pytest.raises(ConfigError, match=r"names \['x'\], not in the file; it holds \['conv-26'"):
        load_tasks(wrong)


def test_a_missing_or_malformed_file_says_how_to_point_at_it(tmp_path):
    with pytest.raises(ConfigError, match=r"no LoCoMo file given: set locomo\.data"):
        load_tasks(load_config(TaskRunConfig, overrides=["data.source=locomo"]))
    with pytest.raises(ConfigError, match=r"does not exist: set locomo\.data"):
        load_locomo(tmp_path / "nowhere.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match="is not LoCoMo's JSON"):
        load_locomo(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"sample_id": "x", "conversation": {}, "qa": [{"question": "q?", "category": 9}]}]))
    with pytest.raises(ConfigError, match=r"qa\[0\]: a question lacks its text or a category in \[1, 2, 3, 4, 5\]"):
        load_locomo(wrong)
    with pytest.raises(ConfigError, match=r"locomo.categories=\[6\] must name some of"):
        load_config(TaskRunConfig, overrides=["locomo.categories=[6]"])


@needs_locomo
@pytest.mark.slow
def test_grpo_steps_on_locomo_conversations_change_the_weights(tmp_path):
    """`agemem train data.source=locomo:PATH`: Stage 1 is the conversation, a session per message with its date,
    Stage 3 a question; two GRPO steps on the tiny random policy move the weights."""
    import torch
    from safetensors.torch import load_file

    from agemem.entrypoints.cli import main
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy
    from agemem.rollouts.records import read_trajectories
    from tests.train.tiny_run import TINY

    out = tmp_path / "run"
    settings = [f"data.source=locomo:{FILE}", "locomo.conversations=[conv-26]", "locomo.sessions=2"]
    tiny = [arg for arg in TINY if not arg.startswith(("data.", "distractors."))]
    # a second Stage-3 step sees the first's random reply, whose re-encoded length differs between rollouts: the
    # context terms then differ within a group (the random policy never answers, so the task term never does)
    steps = ["rollout.stage1_max_steps=2", "rollout.stage3_max_steps=2"]
    assert main(["train", *tiny, *settings, *steps, "max_steps=2", f"output_dir={out}"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in records] == [1, 2] and all(m["episodes"] == 4 for m in records)
    assert any(m["reward/total_std"] > 0 for m in records)
    trajectories = list(read_trajectories(out / "trajectories.jsonl"))
    assert trajectories and all(t.task_id.startswith("conv-26/q") and not t.distractors for t in trajectories)
    for t in trajectories:
        stage1 = t.stage_steps(1)
        assert [s.prompt_text.count("[Session 1 (") for s in stage1[:1]] == [1]
        assert "1:56 pm on 8 May, 2023" in stage1[0].prompt_text
        assert not t.stage_steps(2) and t.stage_steps(3)
    initial, _ = load_policy(PolicyConfig(device="cpu"))
    final = load_file(out / "checkpoints" / "step_000002" / "policy" / "model.safetensors")
    changed = [k for k, v in initial.state_dict().items() if k in final and not torch.equal(v, final[k])]
    assert len(changed) > 10
    assert json.loads((out / "config.json").read_text())["locomo"]["sessions"] == 2

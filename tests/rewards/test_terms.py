"""Every reward term by hand, and the composite on constructed trajectories."""

from __future__ import annotations

import pytest

from agemem.core.env import EpisodeStats, FilterRecord, MemoryOpRecord, RetrievalRecord, SummaryRecord
from agemem.rewards import terms
from agemem.rewards.composite import reward_breakdown, score_trajectories
from agemem.rewards.config import RewardConfig
from agemem.rollouts.records import Paragraph, Step, SupportingFact, Task, Trajectory


def test_task_reward():
    assert terms.task_reward(0.75) == 0.75
    assert terms.task_reward(None) == -1.0  # no answer (Eq. 17)


def test_compression_reward():
    assert terms.compression_reward(2048, 8192) == 0.75  # 1 - 2048/8192
    assert terms.compression_reward(9000, 8192) == 0.0  # max(0, 1 - 1.098...)


def test_preventive_reward():
    assert terms.preventive_reward([3, 9], first_overflow_step=5) == 1.0  # step 3 came before the overflow at 5
    assert terms.preventive_reward([7], first_overflow_step=5) == 0.0  # managed only after it
    assert terms.preventive_reward([], first_overflow_step=5) == 0.0
    assert terms.preventive_reward([2], first_overflow_step=None) == 1.0
    assert terms.preventive_reward([], first_overflow_step=None) == 0.0


@pytest.mark.parametrize(
    ("question", "items"),
    [
        ("Were Scott Derrickson and Ed Wood of the same nationality?", ["Scott Derrickson", "Ed Wood"]),
        ("Which city hosted the 1996 Summer Olympics on July 19, 1996?", ["1996", "Summer Olympics", "July 19, 1996"]),
        ("Who was born in March 1970 in the Republic of Ireland?", ["March 1970", "Republic of Ireland"]),
        ("what is the capital?", []),
    ],
)
def test_key_items(question, items):
    assert terms.key_items(question) == items


def test_preservation_reward():
    items = ["Scott Derrickson", "Ed Wood"]
    assert terms.preservation_reward(items, "[Summary] scott derrickson is American.") == 0.5  # 1 of 2
    assert terms.preservation_reward(items, "Scott Derrickson ... Ed Wood") == 1.0
    assert terms.preservation_reward([], "anything") == 1.0


def test_context_and_memory_means():
    assert terms.context_reward(0.75, 1.0, 0.5) == 0.75  # (0.75 + 1 + 0.5) / 3
    assert terms.memory_reward(0.5, 0.0, 1.0) == 0.5  # (0.5 + 0 + 1) / 3


def test_storage_maintenance_relevance():
    assert terms.storage_reward([0.9, 0.2, 0.5, 0.49], threshold=0.5) == 0.5  # 0.9 and 0.5 pass: 2 / 4
    assert terms.storage_reward([], threshold=0.5) == 0.0
    assert terms.maintenance_reward(0) == 0.0 and terms.maintenance_reward(2) == 1.0
    assert terms.maintenance_reward_paper(2, 0.9, 0.1) == 1.0  # the letter: the qualities are not read
    assert terms.relevance_reward([1.0, 0.5]) == 0.75 and terms.relevance_reward([]) == 0.0


def test_penalty():
    kwargs = {"round_limit_penalty": -1.0, "overflow_penalty": -0.5, "format_penalty": -0.1}
    assert terms.penalty(True, True, 3, **kwargs) == pytest.approx(-1.8)  # -1 - 0.5 - 3 x 0.1
    assert terms.penalty(False, False, 0, **kwargs) == 0.0


def test_composite_and_answer_only():
    third = 1 / 3
    assert terms.composite_reward(1.0, 0.5, 0.25, -0.5, (third, third, third)) == pytest.approx(0.0833333, abs=1e-6)
    # (1 + 0.5 + 0.25) / 3 - 0.5 = 0.58333 - 0.5
    assert terms.answer_only_reward(1.0, -0.5) == 0.5


QUESTION = "Where does Ada Quill live?"


def trajectory(*, answer="Oslo", context_tokens=2048, limit_hits=(), overflow_step=None, summaries=(), filters=()):
    stats = EpisodeStats(
        memory_ops=[
            MemoryOpRecord("add", 1, 1, True, "mem_1", "Ada Quill lives in Oslo."),
            MemoryOpRecord("add", 1, 2, True, "mem_2", "It rained."),
            MemoryOpRecord("update", 2, 4, True, "mem_2", "It rained a lot.", "It rained."),
        ],
        retrievals=[RetrievalRecord(3, 9, QUESTION, 3, ["mem_1"], ["Ada Quill lives in Oslo."], [0.9])],
        summaries=[SummaryRecord(2, s, "all", ["It rained."], "gist") for s in summaries],
        filters=[FilterRecord(2, s, "rain", ["It rained."], [0.9]) for s in filters],
        overflow=overflow_step is not None,
        first_overflow_step=overflow_step,
    )
    step = Step(
        stage=3,
        kind="action",
        turn=0,
        prompt_ids=[1] * context_tokens,
        completion_ids=[2],
        logprobs=[-0.1],
        finish_reason="stop",
        prompt_text=f"system ... [Summary] Ada Quill lives in Oslo. user: {QUESTION}",
        completion_text=f"<answer>{answer}</answer>",
        answer=answer,
        context_tokens=context_tokens,
        violations=["text_outside_tags"],
    )
    return Trajectory(
        task_id="t",
        rollout_index=0,
        question=QUESTION,
        gold_answer="Oslo",
        steps=[step],
        answer=answer,
        ended_by="answer",
        stats=stats,
        limit_hits=list(limit_hits),
    )


TASK = Task(
    "t",
    QUESTION,
    "Oslo",
    [Paragraph("Ada Quill", ["Ada Quill lives in Oslo."])],
    [SupportingFact("Ada Quill", 0, "Ada Quill lives in Oslo.")],
)


def test_reward_breakdown_by_hand():
    config = RewardConfig(format_penalty=-0.1)
    # the judge scored the Stage-1 entries [fact 1.0, "It rained." 0.0] and the final ones [fact 1.0, "It rained a
    # lot." 0.0]
    breakdown = reward_breakdown(
        trajectory(summaries=[3], overflow_step=6),
        1.0,
        [1.0, 0.0],
        [0.8],
        config,
        token_budget=8192,
        final_scores=[1.0, 0.0],
    )
    assert breakdown["task"] == 1.0
    assert breakdown["context/compression"] == 0.75  # 1 - 2048 / 8192
    assert breakdown["context/preventive"] == 1.0  # summary at step 3 < first overflow at step 6
    assert breakdown["context/preservation"] == 1.0  # "Ada Quill" survives in the summary
    assert breakdown["context"] == pytest.approx(2.75 / 3)
    assert breakdown["memory/storage"] == 0.5  # 1 of 2 entries held after Stage 1 scores >= 0.5
    # the update changed mem_2's meaning: "it rained" no longer held (1) + "it rained a lot" written (1) ...
    assert breakdown["memory/maintained"] == 2.0
    assert breakdown["memory/quality_final"] == 0.5  # ... but Q_final = 1/2 = Q_stage1
    assert breakdown["memory/maintenance"] == 0.0  # max(0, 1/2 - 1/2): it improved nothing the judge sees
    assert breakdown["memory/relevance"] == pytest.approx(0.8)
    assert breakdown["memory"] == pytest.approx(1.3 / 3)  # (0.5 + 0 + 0.8) / 3
    assert breakdown["penalty"] == pytest.approx(-0.6)  # overflow -0.5, one violation -0.1
    # total = (1 + 2.75/3 + 1.3/3) / 3 - 0.6 = (1 + 0.91667 + 0.43333) / 3 - 0.6 = 0.78333 - 0.6
    assert breakdown["total"] == pytest.approx(0.183333, abs=1e-5)
    # the paper's letter: the update is maintenance (R_maintenance 1), whatever it did to the judged quality
    paper = reward_breakdown(
        trajectory(summaries=[3], overflow_step=6),
        1.0,
        [1.0, 0.0],
        [0.8],
        RewardConfig(format_penalty=-0.1, terms="paper"),
        token_budget=8192,
        final_scores=[1.0, 0.0],
    )
    assert paper["memory/storage"] == 0.5  # 1 of 2 Stage-1 adds
    assert paper["memory/maintenance"] == 1.0
    assert paper["memory"] == pytest.approx(2.3 / 3)  # (0.5 + 1 + 0.8) / 3
    # total = (1 + 2.75/3 + 2.3/3) / 3 - 0.6 = (1 + 0.91667 + 0.76667) / 3 - 0.6 = 0.89444 - 0.6
    assert paper["total"] == pytest.approx(0.294444, abs=1e-5)


def test_round_limit_scope():
    stage1_cap = [{"stage": 1, "turn": 0, "limit": "turn"}]
    everywhere = reward_breakdown(trajectory(limit_hits=stage1_cap), 1.0, [], [], RewardConfig(), token_budget=8192)
    assert everywhere["penalty/round_limit"] == 1.0 and everywhere["penalty"] == -1.0
    stage3_only = RewardConfig(round_limit_scope="stage3")
    capped = reward_breakdown(trajectory(limit_hits=stage1_cap), 1.0, [], [], stage3_only, token_budget=8192)
    assert capped["penalty/round_limit"] == 0.0 and capped["penalty"] == 0.0  # a capped Stage-1 turn just passes
    stage3 = reward_breakdown(trajectory(limit_hits=[{"stage": 3}]), 1.0, [], [], stage3_only, token_budget=8192)
    assert stage3["penalty"] == -1.0


def op(kind, stage, memory_id, content, previous=None, ok=True):
    return MemoryOpRecord(kind, stage, 0, ok, memory_id, content, previous)


def test_management_counts_calls_or_changes():
    summaries = [SummaryRecord(2, 3, "all", ["a", "b"], "gist"), SummaryRecord(2, 5, "all", [], "")]
    filters = [FilterRecord(2, 4, "x", [], []), FilterRecord(2, 6, "y", ["z"], [0.8])]
    assert terms.management_steps_paper(summaries, filters) == [3, 5, 4, 6]  # every call
    assert terms.management_steps_effective(summaries, filters) == [3, 6]  # the calls that changed the context
    # a no-op filter alone: management under the paper's letter, none by its effect
    assert terms.preventive_reward(terms.management_steps_paper([], filters[:1]), None) == 1.0
    assert terms.preventive_reward(terms.management_steps_effective([], filters[:1]), None) == 0.0


@pytest.mark.parametrize(
    ("ops", "paper", "effective"),
    [
        # a real update and a real delete of Stage-1 entries: meanings changed = Stage 2: A gone + A2 written (2),
        # Stage 3: B gone (1) = 3
        (
            [
                op("add", 1, "m1", "A"),
                op("add", 1, "m2", "B"),
                op("update", 2, "m1", "A2", "A"),
                op("delete", 3, "m2", "B"),
            ],
            2,
            3,
        ),
        # the same text written back (case and spacing aside): nothing changed
        (
            [
                op("add", 1, "m1", "Ada  lives in Oslo"),
                op("update", 3, "m1", "ada lives in oslo", "Ada  lives in Oslo"),
            ],
            1,
            0,
        ),
        # deleted, then the same text added back in the same stage
        ([op("add", 1, "m1", "A"), op("delete", 3, "m1", "A"), op("add", 3, "m9", "A")], 1, 0),
        # added and deleted within one stage: the memory the stage began with is unchanged
        ([op("add", 2, "m5", "junk"), op("delete", 2, "m5", "junk")], 1, 0),
        # changed, then changed back within the stage
        ([op("add", 1, "m1", "A"), op("update", 2, "m1", "B", "A"), op("update", 2, "m1", "A", "B")], 2, 0),
        # a failed update counts in neither
        ([op("add", 1, "m1", "A"), op("update", 2, "m1", "B", "A", ok=False)], 0, 0),
    ],
)
def test_maintenance_counts_calls_or_changes(ops, paper, effective):
    assert terms.maintenance_count_paper(ops) == paper
    assert terms.maintenance_count_effective(ops) == effective


def test_preservation_items_the_question_needs():
    question = "When was Ada Quill born?"
    facts = ["Ada Quill was born in Bergen on March 3, 1921.", "Bergen is in Norway."]
    distractors = ["Ada Quill was a painter in Bergen."]
    assert terms.preservation_items_paper(question, facts, distractors) == ["Ada Quill"]
    # K(F) = [Ada Quill, Bergen, March 3, 1921, Norway]; the distractor names Ada Quill and Bergen
    assert terms.preservation_items_needed(question, facts, distractors) == ["March 3, 1921", "Norway"]
    # a kept distractor scores nothing under the needed items; the paper's items count it fully
    kept_distractor = "user: Ada Quill was a painter in Bergen."
    assert terms.preservation_reward(terms.preservation_items_paper(question, facts, distractors), kept_distractor) == 1
    assert (
        terms.preservation_reward(terms.preservation_items_needed(question, facts, distractors), kept_distractor) == 0
    )
    # every fact item also in a distractor: all fact items; no fact: the question's items
    assert terms.preservation_items_needed(question, ["Ada Quill sang."], ["Ada Quill"]) == ["Ada Quill"]
    assert terms.preservation_items_needed(question, [], distractors) == ["Ada Quill"]


def test_answer_only_mode_and_no_answer():
    config = RewardConfig(mode="answer_only")
    breakdown = reward_breakdown(trajectory(limit_hits=[{"stage": 3}]), None, [], [], config, token_budget=8192)
    assert breakdown["task"] == -1.0 and breakdown["penalty"] == -1.0
    assert breakdown["total"] == -2.0  # R_task + P = -1 - 1


class FixedJudge:
    """Scores by lookup, recording what it was asked (batched once per role)."""

    name = "fixed"

    def __init__(self):
        self.calls = []

    def answer_scores(self, items):
        self.calls.append(("answer", len(items)))
        return [1.0 if i.prediction == i.gold else 0.0 for i in items]

    def memory_scores(self, items):
        self.calls.append(("memory", len(items)))
        assert all(i.supporting_facts == ("Ada Quill lives in Oslo.",) for i in items)  # sentence text, not title
        return [1.0 if i.content in i.supporting_facts else 0.0 for i in items]

    def relevance_scores(self, items):
        self.calls.append(("relevance", len(items)))
        return [0.5 for _ in items]


def test_score_trajectories_batches_the_judge_and_fills_the_breakdown():
    judge = FixedJudge()
    right, wrong = trajectory(), trajectory(answer="Bergen")
    breakdowns = score_trajectories([right, wrong], {"t": TASK}, judge, RewardConfig(), token_budget=8192)
    # memory: the distinct entries of the task, once each: Stage-1 "Ada Quill lives in Oslo." and "It rained.", and
    # "It rained a lot." as Stage 2 left mem_2 (the fact, unchanged, and the second rollout's entries reuse scores)
    assert judge.calls == [("answer", 2), ("memory", 3), ("relevance", 2)]
    assert [b["task"] for b in breakdowns] == [1.0, 0.0]
    assert right.reward is breakdowns[0] and breakdowns[0]["total"] > breakdowns[1]["total"]
    # w_task x R_task differs by 1/3, and the wrong answer's context state is not paid (S = 0): compression
    # 1 - 2048/8192 = 0.75 and preservation 1, each a third of R_context weighted 1/3: 1/3 + 1.75/9 = 4.75/9
    assert breakdowns[0]["total"] - breakdowns[1]["total"] == pytest.approx(4.75 / 9)


def test_a_registered_term_is_logged_and_paid_only_by_its_weight():
    from agemem.core.configlib import ConfigError, load_config
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.rewards.build import build_scorer
    from agemem.rewards.registry import RewardTerm, register_reward_term, unregister_reward_term

    # brevity = -(completion tokens) / 10: the fixture's one answering step has one completion token -> -0.1
    def brevity(trajectory, facts):
        return -sum(len(s.completion_ids) for s in trajectory.steps) / 10

    args = (trajectory(summaries=[3], overflow_step=6), 1.0, [1.0, 0.0], [0.8])
    plain = reward_breakdown(*args, RewardConfig(format_penalty=-0.1), token_budget=8192, final_scores=[1.0, 0.0])
    register_reward_term(RewardTerm("brevity", brevity, "-(completion tokens) / 10"))
    try:
        logged = reward_breakdown(*args, RewardConfig(format_penalty=-0.1), token_budget=8192, final_scores=[1.0, 0.0])
        assert logged["extra/brevity"] == pytest.approx(-0.1) and logged["total"] == plain["total"]  # unweighted
        config = load_config(AgeMemConfig, overrides=["reward.format_penalty=-0.1", "reward.term_weights.brevity=2"])
        assert config.reward.term_weights == {"brevity": 2.0}  # a dotted override is read as the number it is
        paid = reward_breakdown(*args, config.reward, token_budget=8192, final_scores=[1.0, 0.0])
        # total = 0.183333 (test_reward_breakdown_by_hand) + 2 x (-0.1) = -0.016667
        assert paid["total"] == pytest.approx(plain["total"] - 0.2) == pytest.approx(-0.016667, abs=1e-5)
        assert build_scorer(config.reward, 8192).config is config.reward
    finally:
        unregister_reward_term("brevity")
    with pytest.raises(ConfigError, match=r"term_weights names 'brevity', which no reward term registers"):
        build_scorer(config.reward, 8192)
    with pytest.raises(ConfigError, match=r"reward.term_weights.x must be a number, got .lots."):
        load_config(AgeMemConfig, overrides=["reward.term_weights.x=lots"])


@pytest.mark.parametrize("answer_score, share", [(1.0, 1.0), (0.5, 0.5), (0.0, 0.0), (None, 0.0)])
def test_context_state_is_paid_by_the_answer_under_effects(answer_score, share):
    traj = trajectory(answer="Oslo" if answer_score is not None else None)
    effects = reward_breakdown(traj, answer_score, [], [], RewardConfig(), token_budget=8192)
    paper = reward_breakdown(traj, answer_score, [], [], RewardConfig(terms="paper"), token_budget=8192)
    # the letter pays the state whatever the answer: compression 1 - 2048/8192 = 0.75, preservation 1 (Ada Quill and
    # Oslo are in the kept summary); by effect both are scaled by S (0 without an answer): 0.75 S and S
    assert paper["context/compression"] == 0.75 and paper["context/preservation"] == 1.0
    assert effects["context/state_share"] == share
    assert effects["context/compression"] == pytest.approx(0.75 * share)
    assert effects["context/preservation"] == pytest.approx(share)
    # R_context (the mean of the three) differs by what the two terms lose: (1 - S) * 1.75 / 3
    assert paper["context"] - effects["context"] == pytest.approx((1 - share) * 1.75 / 3)

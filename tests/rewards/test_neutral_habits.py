"""The property the effect reading of the reward must have: no neutral habit raises any agent's total reward.

A neutral habit (``tests/rewards/habits.py``) is a tool call, or a short run of them, whose effect is erased before
the answer or that leaves memory and the answer-time context unchanged up to formatting and duplicates: every tool,
in each stage, each kind of no-op. Each is inserted into four scripted agents of different quality (never manages,
manages well, stores everything, stores little) that play synthetic tasks through the real driver and env (real Qwen
tokenizer, word-set encoder) and are scored by the rule judge. Under ``reward.terms=effects`` the agent with the
habit never scores above the same agent without it, on any task; under ``reward.terms=paper`` the table of the
habits that pay is documented (docs/rewards.md).
"""

from __future__ import annotations

import pytest

from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.rewards.habits import AGENTS, HABITS, NOT_NEUTRAL, Habit, calls_made, play, score

TOLERANCE = 1e-9

PAYS_UNDER_PAPER = {
    # every Summary/Filter call is management (Eq. 20's letter) and every Update/Delete maintenance (Eq. 24's), each
    # worth 1/9 of the total to an agent that had none; a Stage-1 duplicate is one more high-quality add (Eq. 23)
    *(
        f"{name} (Stage {stage})"
        for stage in (1, 2, 3)
        for name in [
            "filter removing nothing",
            "filter of its own acknowledgements",
            "summary restating its span",
            "update with the same text",
            "update dropping the final '.'",
            "delete and re-add the same text",
            "duplicate a fact in Stage 1, delete the copy",
            "add junk and delete it",
            "add junk in Stage 1, rewrite it as a copy of a fact",
        ]
    ),
    "add junk in Stage 1, delete it (Stage 2)",
    "add junk in Stage 1, delete it (Stage 3)",
    "summary (Stage 1)",
    "update in lower case (Stage 3)",
    "update with doubled spaces (Stage 3)",
}
"""the neutral habits that raise some agent's total under ``reward.terms=paper`` (the retrievals do not: relevance
averages the same scores, and the repeated one costs context tokens)."""


class Plays:
    """Each (agent, habit) played once on the same tasks, scored under both readings (the reading does not change
    the play), computed on first use."""

    def __init__(self, tasks, tokenizer):
        self.tasks, self.tokenizer = tasks, tokenizer
        self._plays: dict[tuple[str, str | None], tuple[list, list[dict], list[dict]]] = {}

    def __call__(self, agent: str, habit: Habit | None = None):
        key = (agent, habit.label if habit else None)
        if key not in self._plays:
            trajectories = play(self.tasks, self.tokenizer, agent, habit)
            self._plays[key] = (
                trajectories,
                score(trajectories, self.tasks, "effects"),
                score(trajectories, self.tasks, "paper"),
                score(trajectories, self.tasks, "current"),
            )
        return self._plays[key]


@pytest.fixture(scope="module")
def plays(qwen_tokenizer):
    return Plays(generate_synthetic_tasks(2, seed=4), qwen_tokenizer)


@pytest.fixture(scope="module")
def revised_plays(qwen_tokenizer):
    """Tasks where a later Stage-1 message changes a fact: the agents that store every message hold a stale entry,
    the habits act on it too, and ``reward.terms=current`` judges it (0) and pays only its fix."""
    return Plays(generate_synthetic_tasks(1, seed=4, revisions=1, restate_unchanged=True), qwen_tokenizer)


EFFECTS, PAPER, CURRENT = 1, 2, 3
"""the index of each reading's breakdowns in a play."""


def gains(plays, agent: str, habit: Habit, reading: int) -> list[float]:
    """Per task: the total with the habit minus without (``reading``: EFFECTS, PAPER or CURRENT)."""
    with_habit, without = plays(agent, habit)[reading], plays(agent)[reading]
    return [h["total"] - b["total"] for h, b in zip(with_habit, without)]


@pytest.mark.parametrize("habit", HABITS, ids=[h.label for h in HABITS])
@pytest.mark.parametrize("agent", list(AGENTS))
@pytest.mark.parametrize(
    ("task_set", "reading"),
    # current differs from effects in storage and maintenance, which only a changed fact tells apart
    [("plays", EFFECTS), ("revised_plays", CURRENT)],
    ids=["effects", "current-revised"],
)
def test_no_neutral_habit_raises_the_reward(request, task_set, reading, agent, habit):
    plays = request.getfixturevalue(task_set)
    trajectories = plays(agent, habit)[0]
    honest = plays(agent)[0]
    # the habit happened: more tool calls than the honest play, no round limit reached, the same answers
    assert all(calls_made(h) > calls_made(b) for h, b in zip(trajectories, honest))
    assert all(not t.limit_hits and t.answer == b.answer for t, b in zip(trajectories, honest))
    if "summary_verbatim" in habit.moves:
        assert max(gains(plays, agent, habit, reading)) <= restated_framing_gain(plays, agent, habit, reading)
    else:
        assert max(gains(plays, agent, habit, reading)) <= TOLERANCE


FRAMING_TOKENS = 8
"""most tokens a summary restating its span may save: the merged messages' chat framing (``<|im_start|>``, role,
``<|im_end|>``) beyond what the call and its short answer add."""
BUDGET = 4000  # habits.py's env.context.max_context_tokens


def restated_framing_gain(plays, agent: str, habit: Habit, reading: int = EFFECTS) -> float:
    """A summary restating its span word for word puts the span into one message: the answer's context is shorter by
    the framing of the messages it merged, and compression (1/3 of R_context, itself 1/3 of R) pays for those tokens
    and for nothing else (most often the call costs more than it saves). Checks that no other term moved and at most
    FRAMING_TOKENS were saved; returns the most that may pay: (1/3)(1/3) * 8 / 4000 = 2.2e-4."""
    for with_habit, without in zip(plays(agent, habit)[reading], plays(agent)[reading]):
        assert without["context/tokens_used"] - with_habit["context/tokens_used"] <= FRAMING_TOKENS
        for term in ("task", "context/preventive", "context/preservation", "memory", "penalty"):
            assert with_habit[term] == pytest.approx(without[term], abs=TOLERANCE), term
    return FRAMING_TOKENS / BUDGET / 9 + TOLERANCE


def test_which_neutral_habits_pay_under_the_papers_letter(plays):
    paying = {h.label for h in HABITS if any(max(gains(plays, a, h, 2)) > TOLERANCE for a in AGENTS)}
    assert paying == PAYS_UNDER_PAPER
    # each pays about a ninth (1/3 of a 1/3-weighted term) to an agent without that term, less its context tokens
    never = max(gains(plays, "never manages", HABITS[0], 2))  # filter removing nothing in Stage 1: erased, free
    assert never == pytest.approx(1 / 9)


def test_the_reset_and_the_rules_are_what_stops_them(plays):
    # the same Stage-1 filter pays 1/9 under paper and exactly 0 under effects: the reset erased it
    stage1_filter = HABITS[0]
    assert stage1_filter.label == "filter removing nothing (Stage 1)"
    assert gains(plays, "never manages", stage1_filter, 1) == pytest.approx([0.0, 0.0], abs=TOLERANCE)
    effects = plays("never manages", stage1_filter)[1][0]
    assert effects["context/management_calls"] == 1 and effects["context/management_effective"] == 0


def test_junk_cleaned_up_later_earns_what_never_storing_it_earns(plays):
    junk = next(h for h in HABITS if h.label == "add junk in Stage 1, delete it (Stage 3)")
    effects, paper = plays("never manages", junk)[1][0], plays("never manages", junk)[2][0]
    honest = plays("never manages")[1][0]
    # the honest agent holds 3 Stage-1 entries, one of them the fact: R_storage = Q_stage1 = 1/3, no maintenance.
    # With the junk: Q_stage1 = 1/4 (the junk is a fourth entry), Q_final = 1/3 (the junk is gone), the delete counts:
    # R_maintenance = max(0, 1/3 - 1/4) = 1/12, so R_storage + R_maintenance = 1/4 + 1/12 = 1/3, the honest sum
    assert honest["memory/storage"] == pytest.approx(1 / 3) and honest["memory/maintenance"] == 0.0
    assert effects["memory/storage"] == pytest.approx(1 / 4)
    assert effects["memory/quality_final"] == pytest.approx(1 / 3)
    assert effects["memory/maintenance"] == pytest.approx(1 / 12)
    assert effects["memory/storage"] + effects["memory/maintenance"] == pytest.approx(honest["memory/storage"])
    # the letter pays the delete 1: storage 1/4 (1 of 4 adds) + maintenance 1, about +0.10 of total
    assert paper["memory/maintenance"] == 1.0 and paper["memory/storage"] == pytest.approx(1 / 4)


def test_the_non_neutral_cases_are_measured(plays):
    duplicate, summary = NOT_NEUTRAL
    # a real Stage-2 summary of the distractors is management: it pays the never-managing agent's preventive term
    assert plays("never manages", summary)[1][0]["context/preventive"] == 1.0
    # a kept duplicate leaves storage alone (one meaning held), under paper it is one more high-quality add: 2 of 4
    assert plays("never manages", duplicate)[1][0]["memory/storage"] == plays("never manages")[1][0]["memory/storage"]
    assert plays("never manages", duplicate)[2][0]["memory/storage"] == pytest.approx(2 / 4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, 11])
def test_no_neutral_habit_raises_the_reward_on_more_tasks(qwen_tokenizer, seed):
    more = Plays(generate_synthetic_tasks(4, seed=seed), qwen_tokenizer)

    def allowed(agent: str, habit: Habit) -> float:  # as the default-suite test: a verbatim summary may save framing
        return restated_framing_gain(more, agent, habit) if "summary_verbatim" in habit.moves else TOLERANCE

    raised = [
        (agent, habit.label, gain)
        for agent in AGENTS
        for habit in HABITS
        for gain in gains(more, agent, habit, 1)
        if gain > allowed(agent, habit)
    ]
    assert raised == []


def test_the_revised_tasks_hold_a_stale_entry_that_only_a_fix_would_pay(revised_plays):
    # every agent that stores each Stage-1 message holds the stale one: of its 4 entries (3 people and the change)
    # the stale one scores 0 under current, and nothing fixed it, so no habit above could have collected maintenance
    # by an accident of the tasks
    for breakdown in revised_plays("never manages")[CURRENT]:
        assert breakdown["memory/storage"] == pytest.approx(3 / 4) and breakdown["memory/maintenance"] == 0.0

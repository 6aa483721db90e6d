"""The reward ranks a scripted ideal episode above each degraded variant and each agent that farms a term (rule
judge, real tokenizer, scripted engine through the real driver), and farming pays nothing under the effect
terms while it pays under the paper's letter (``reward.terms=paper``)."""

from __future__ import annotations

import pytest

from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.rewards.agents import FARMERS, VARIANTS, play_variant


@pytest.fixture(scope="module")
def rewards(qwen_tokenizer):
    tasks = generate_synthetic_tasks(3, seed=4)
    return {name: play_variant(name, tasks, qwen_tokenizer) for name in VARIANTS}


@pytest.fixture(scope="module")
def paper_rewards(qwen_tokenizer):
    tasks = generate_synthetic_tasks(3, seed=4)
    return {name: play_variant(name, tasks, qwen_tokenizer, "paper") for name in VARIANTS}


@pytest.mark.parametrize("degraded", [name for name in VARIANTS if name != "ideal"])
def test_ideal_episode_outscores_each_degraded_variant(rewards, degraded):
    assert rewards["ideal"][0] > rewards[degraded][0]


def test_each_degradation_shows_in_its_own_term(rewards):
    ideal = rewards["ideal"][1][0]
    assert rewards["stores nothing"][1][0]["memory/storage"] < ideal["memory/storage"]
    assert rewards["answers wrong"][1][0]["task"] < ideal["task"]
    assert rewards["no answer"][1][0]["task"] == -1.0 and rewards["no answer"][1][0]["penalty/round_limit"] == 1.0
    assert rewards["never manages context"][1][0]["context/preventive"] < ideal["context/preventive"]


@pytest.mark.parametrize("farmer", list(FARMERS))
def test_farming_a_term_pays_nothing(rewards, farmer):
    # the habit adds tool calls (context tokens) and no effect: strictly below the same agent without it
    assert rewards[farmer][0] < rewards[FARMERS[farmer]][0]
    first = rewards[farmer][1][0]
    assert first["context/preventive"] == rewards[FARMERS[farmer]][1][0]["context/preventive"]
    assert first["memory/maintenance"] == 0.0


def test_the_habits_did_what_they_claim(rewards):
    noop = rewards["no-op filters"][1][0]
    assert noop["context/management_calls"] >= 1 and noop["context/management_effective"] == 0
    for farmer in ("rewrites a memory with itself", "deletes and re-adds a memory"):
        assert rewards[farmer][1][0]["memory/maintenance_ops"] >= 1 and rewards[farmer][1][0]["memory/maintained"] == 0
    assert rewards["retrieval spam"][1][0]["memory/retrievals"] == 3 * rewards["ideal"][1][0]["memory/retrievals"]


def test_the_papers_letter_pays_for_the_same_habits(paper_rewards):
    # reward.terms=paper counts calls: a no-op filter is management, a self-rewrite or a delete-and-re-add is
    # maintenance, each worth 1/9 of total (1/3 of a 1/3-weighted term) against a few context tokens
    assert paper_rewards["no-op filters"][0] > paper_rewards["never manages context"][0]
    assert paper_rewards["rewrites a memory with itself"][0] > paper_rewards["ideal"][0]
    assert paper_rewards["deletes and re-adds a memory"][0] > paper_rewards["ideal"][0]
    assert paper_rewards["no-op filters"][1][0]["context/preventive"] == 1.0


def test_preservation_does_not_reward_keeping_distractors(rewards):
    # the effect reading looks for the supporting facts' own key items: clearing the distractors never costs it
    ideal, kept = rewards["ideal"][1], rewards["never manages context"][1]
    assert all(i["context/preservation"] >= k["context/preservation"] for i, k in zip(ideal, kept))

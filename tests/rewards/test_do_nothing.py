"""The property the effect reading must have against the cheapest policy of all: doing nothing earns nothing.

A policy that acknowledges every message, stores nothing, retrieves nothing and answers at once with something
wrong holds a short context, and the context the environment gave it (Stage-2 look-alikes naming the task's people)
holds key items without its doing. Under the paper's letter (Eqs. 19 and 21) that state is paid: R_compression and
R_preservation, up to 2/9 of the total, with no useful act and a wrong answer. Seed 3 of the stored-lookup recipe
collapsed into exactly this ("OK" to everything, +0.11 a trajectory against the warm start's -1.05,
docs/results.md). Under ``reward.terms=effects`` the context state is paid in proportion to the answer's score
(:func:`agemem.rewards.terms.context_state_share_by_answer`), so over generated task shapes and wrong answers the
do-nothing total is exactly 0, and an agent that stores and retrieves with well-formed calls and answers just as
wrong is never below it.
"""

from __future__ import annotations

import itertools

import pytest

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.messages import stage1_messages
from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.rewards.habits import AGENTS, OVERRIDES, HabitAgent, play_policy, score
from tests.rollouts.scripted import answer

PAID_TERMS = (
    "task", "context/compression", "context/preventive", "context/preservation",
    "memory/storage", "memory/maintenance", "memory/relevance", "penalty",
)  # fmt: skip

SHAPES = [
    # (entities, distractors, revisions, distractor sentences): small and large contexts, with and without a change
    (2, 1, 0, 1),
    (3, 2, 1, 1),
    (4, 5, 0, 3),
    (3, 4, 1, 2),
]
WRONG = ["OK", "I do not know.", "another person"]
"""answers that are wrong for every task; "another person" becomes a name from the task that is not the answer."""


def shaped_tasks(shape, seed: int):
    entities, distractors, revisions, sentences = shape
    return generate_synthetic_tasks(
        2,
        seed=seed,
        entities_per_task=entities,
        attributes_per_entity=2,
        distractors_per_task=distractors,
        revisions=revisions,
        distractor_sentences=sentences,
    )


def wrong_answer(task, kind: str) -> str:
    if kind != "another person":
        return kind
    return next(p.title for p in task.contexts if p.title not in task.answer)


def does_nothing(tasks, kind: str):
    """Acknowledges every message with its wrong answer: in Stage 3 that reply is the answer."""
    by_question = {t.question: wrong_answer(t, kind) for t in tasks}

    def policy(conversation):
        users = [m["content"] for m in conversation if m["role"] == "user"]
        return answer(next((by_question[u] for u in reversed(users) if u in by_question), kind))

    return policy


def tries_and_fails(tasks, kind: str):
    """The "never manages" scripted agent (stores every Stage-1 message, retrieves with the question), answering as
    wrong as :func:`does_nothing` does."""
    rollout = load_config(AgeMemConfig, overrides=OVERRIDES).rollout
    stage1_texts = {t.id: stage1_messages(t, rollout.stage1_mode, rollout.paragraphs_per_turn) for t in tasks}
    agent = HabitAgent(tasks, stage1_texts, **AGENTS["never manages"])
    right_to_wrong = {t.answer: wrong_answer(t, kind) for t in tasks}

    def policy(conversation):
        reply = agent(conversation)
        for right, wrong in right_to_wrong.items():
            reply = reply.replace(f"<answer>{right}</answer>", f"<answer>{wrong}</answer>")
        return reply

    return policy


CASES = list(itertools.product(range(len(SHAPES)), WRONG))


@pytest.mark.parametrize("shape, kind", CASES, ids=[f"shape{s}-{k.replace(' ', '_')}" for s, k in CASES])
def test_doing_nothing_earns_nothing_by_effect(qwen_tokenizer, shape, kind):
    tasks = shaped_tasks(SHAPES[shape], seed=100 + shape)
    idle = play_policy(tasks, qwen_tokenizer, does_nothing(tasks, kind))
    assert all(t.answer == wrong_answer(task, kind) and not t.stats.memory_ops for t, task in zip(idle, tasks))
    effects, paper = score(idle, tasks, "effects"), score(idle, tasks, "paper")
    for by_effect, by_letter in zip(effects, paper):
        assert {term: by_effect[term] for term in PAID_TERMS} == dict.fromkeys(PAID_TERMS, 0.0)
        assert by_effect["total"] == 0.0
        # the letter pays the state: compression (the context is short) and any preservation, each 1/9 of the total
        assert by_letter["context/compression"] > 0.5
        expected = (by_letter["context/compression"] + by_letter["context/preservation"]) / 9
        assert by_letter["total"] == pytest.approx(expected) and by_letter["total"] > 0.05


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_trying_with_wellformed_calls_is_never_below_doing_nothing(qwen_tokenizer, shape):
    tasks = shaped_tasks(SHAPES[shape], seed=100 + shape)
    for kind in WRONG:
        tried = play_policy(tasks, qwen_tokenizer, tries_and_fails(tasks, kind))
        idle = play_policy(tasks, qwen_tokenizer, does_nothing(tasks, kind))
        assert all(t.stats.ops("add") and t.stats.retrievals and not t.limit_hits for t in tried)
        for attempt, nothing in zip(score(tried, tasks, "effects"), score(idle, tasks, "effects")):
            assert attempt["task"] == nothing["task"] == 0.0
            assert attempt["total"] >= nothing["total"] == 0.0

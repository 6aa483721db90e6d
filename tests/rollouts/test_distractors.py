"""The llm and static distractor generators and config-driven construction."""

from __future__ import annotations

import pytest

from agemem.core.config import DistractorConfig
from agemem.core.configlib import ConfigError
from agemem.rollouts.distractors import (
    CorpusDistractors,
    LLMDistractors,
    StaticDistractors,
    TaskDistractors,
    build_distractor_generator,
)
from agemem.rollouts.hotpotqa import load_hotpotqa
from agemem.rollouts.synthetic import generate_synthetic_tasks
from tests.conftest import WordSetEncoder


@pytest.fixture(scope="module")
def task():
    return load_hotpotqa("bundled:hotpotqa", limit=1)[0]


def test_llm_distractors_retry_a_text_that_reveals_the_answer(task):
    replies = iter([f"I think it is {task.answer}.", "  Let's talk about gardening instead.  ", "Another chat."])
    prompts = []

    def chat(messages):
        prompts.append(messages[0]["content"])
        return next(replies)

    generator = LLMDistractors(chat, "related", "m")
    assert generator.generate(task, 2) == ["Let's talk about gardening instead.", "Another chat."]
    assert len(prompts) == 3 and task.question in prompts[0] and "Message #2" in prompts[2]
    assert generator.fingerprint == "llm:related:m"
    assert LLMDistractors(chat, "related", "<think>x</think>").fingerprint != generator.fingerprint


def test_llm_distractors_drop_a_leading_think_block(task):
    generator = LLMDistractors(
        lambda messages: "<think>plan the message</think>\nHow was your weekend?", "unrelated", "m"
    )
    assert generator.generate(task, 1) == ["How was your weekend?"]


def test_llm_distractor_cache_key_changes_with_the_endpoint_settings():
    first = build_distractor_generator(DistractorConfig(generator="llm", model="m"), [], WordSetEncoder())
    hotter = build_distractor_generator(
        DistractorConfig(generator="llm", model="m", temperature=1.3), [], WordSetEncoder()
    )
    assert first.fingerprint != hotter.fingerprint


def test_corpus_distractors_refuse_to_come_back_short():
    tasks = load_hotpotqa("bundled:hotpotqa", limit=1)  # the pool holds only the task's own paragraphs
    with pytest.raises(ConfigError, match=r"only 0 usable paragraph\(s\).*load more tasks"):
        CorpusDistractors(tasks, WordSetEncoder()).generate(tasks[0], 5)


def test_llm_distractors_drop_a_message_that_keeps_revealing_the_answer(task):
    generator = LLMDistractors(lambda messages: task.answer, "unrelated", "m", attempts=2)
    assert generator.generate(task, 3) == []


def test_llm_distractor_endpoint_failure_names_the_fix(task):
    def broken(messages):
        raise RuntimeError("summary endpoint http://x/v1/chat/completions failed after 3 attempt(s): refused")

    with pytest.raises(RuntimeError, match=r"distractor generation .* failed: .*http://x/v1.*distractors.base_url"):
        LLMDistractors(broken, "related", "m").generate(task, 1)


def test_static_distractors_cycle_and_reject_an_empty_list(task):
    assert StaticDistractors(["a", "b"]).generate(task, 5) == ["a", "b", "a", "b", "a"]
    with pytest.raises(ConfigError, match="at least one text"):
        StaticDistractors([])


def test_task_distractors_need_a_task_that_carries_them(task):
    (synthetic,) = generate_synthetic_tasks(1, distractors_per_task=4)
    assert TaskDistractors().generate(synthetic, 3) == synthetic.distractors[:3]
    with pytest.raises(ConfigError, match="generator=task is for synthetic tasks"):
        TaskDistractors().generate(task, 3)


@pytest.mark.parametrize(
    ("settings", "kind"),
    [
        ({"generator": "static", "texts": ["x"]}, StaticDistractors),
        ({"generator": "task"}, TaskDistractors),
        ({"generator": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"}, LLMDistractors),
    ],
)
def test_build_distractor_generator_follows_the_config(settings, kind, task):
    assert isinstance(build_distractor_generator(DistractorConfig(**settings), [task], WordSetEncoder()), kind)


def test_distractor_config_validation():
    with pytest.raises(ConfigError, match="texts"):
        DistractorConfig(generator="static").validate()
    with pytest.raises(ConfigError, match="model"):
        DistractorConfig(generator="llm").validate()

"""The llm and static distractor generators and config-driven construction."""

from __future__ import annotations

import re
import zlib
from dataclasses import replace

import numpy as np
import pytest

from agemem.core.configlib import ConfigError
from agemem.rollouts.config import DistractorConfig
from agemem.rollouts.distractors import (
    CorpusDistractors,
    LLMDistractors,
    StaticDistractors,
    TaskDistractors,
    build_distractor_generator,
    distractor_cache_dir,
)
from agemem.tasks.hotpotqa import load_hotpotqa
from agemem.tasks.synthetic import generate_synthetic_tasks
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


class CountingEncoder:
    """Words hashed to dimensions: the same space in every instance (as the Encoder protocol's ``name`` promises;
    WordSetEncoder numbers words in the order it meets them), counting the texts it encodes."""

    name = "test-hashed-words"
    dim = 16384

    def __init__(self):
        self.texts_encoded = 0

    def encode(self, texts):
        self.texts_encoded += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in set(re.findall(r"[a-z0-9_]+", text.lower())):
                out[row, zlib.crc32(word.encode()) % self.dim] = 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def test_corpus_vectors_are_encoded_once_and_reused_by_later_runs(tmp_path):
    # the README's first `agemem train` spent 44 s encoding the bundled corpus, and every later run did it again
    pool = load_hotpotqa("bundled:hotpotqa", limit=30)
    config = DistractorConfig(cache_dir=str(tmp_path))
    first_encoder = CountingEncoder()
    first = build_distractor_generator(config, pool, first_encoder)
    made = first.generate(pool[0], 2)
    paragraphs = len(first.texts)
    assert first_encoder.texts_encoded == paragraphs + 1  # the corpus, then the question
    assert [p.suffix for p in (tmp_path / "corpus_vectors").iterdir()] == [".npy"]
    later_encoder = CountingEncoder()
    later = build_distractor_generator(config, pool, later_encoder)  # a new process, the same corpus
    assert later.generate(pool[0], 2) == made and later_encoder.texts_encoded == 1  # only the question
    # one paragraph's text changed under the same titles: the stored vectors are not this corpus's
    last = pool[0].contexts[-1]
    edited = [replace(pool[0], contexts=[*pool[0].contexts[:-1], replace(last, sentences=["Edited."])]), *pool[1:]]
    edited_encoder = CountingEncoder()
    build_distractor_generator(config, edited, edited_encoder).generate(pool[1], 2)
    assert edited_encoder.texts_encoded == paragraphs + 1


def test_a_torn_vector_file_is_encoded_again(tmp_path):
    pool = load_hotpotqa("bundled:hotpotqa", limit=10)
    config = DistractorConfig(cache_dir=str(tmp_path))
    build_distractor_generator(config, pool, CountingEncoder()).generate(pool[0], 2)
    (stored,) = (tmp_path / "corpus_vectors").iterdir()
    stored.write_bytes(stored.read_bytes()[:100])  # a killed copy
    encoder = CountingEncoder()
    build_distractor_generator(config, pool, encoder).generate(pool[0], 2)
    assert encoder.texts_encoded > 1 and len(np.load(stored)) > 1  # encoded again and stored whole


def test_auto_cache_dir_is_the_users_xdg_cache_and_empty_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert distractor_cache_dir(DistractorConfig()) == tmp_path / "xdg" / "agemem" / "distractors"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert distractor_cache_dir(DistractorConfig()) == tmp_path / "home" / ".cache" / "agemem" / "distractors"
    assert distractor_cache_dir(DistractorConfig(cache_dir="")) is None
    assert distractor_cache_dir(DistractorConfig(cache_dir="~/d")) == tmp_path / "home" / "d"

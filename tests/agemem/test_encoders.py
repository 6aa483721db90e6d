import numpy as np
import pytest

from agemem.core.config import EncoderConfig
from agemem.core.configlib import ConfigError
from agemem.core.encoders import CachedEncoder, Encoder, build_encoder, l2_normalise
from tests.conftest import WordSetEncoder


def test_bundled_minilm_gives_unit_float32_vectors_offline(minilm):
    assert isinstance(minilm, Encoder) and minilm.dim == 384
    vectors = minilm.encode(["Paris is the capital of France.", "France's capital city is Paris.", "I like jazz."])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > 0.8 > 0.2 > similarity[0, 2]  # paraphrase close, unrelated far
    assert minilm.encode([]).shape == (0, 384)


def test_cache_serves_repeats_without_re_encoding_and_evicts_lru():
    inner = WordSetEncoder()
    cached = CachedEncoder(inner, max_entries=2)
    first = cached.encode(["a b", "c d", "a b"])
    assert inner.calls == 1 and (cached.hits, cached.misses) == (1, 2)
    np.testing.assert_array_equal(first[0], first[2])
    cached.encode(["c d"])
    assert inner.calls == 1  # a pure cache hit
    cached.encode(["e f"])  # evicts "a b", the least recently used
    cached.encode(["a b"])
    assert inner.calls == 3


def test_prefetch_embeds_the_missing_texts_in_one_call_and_later_lookups_hit():
    inner = WordSetEncoder()
    cached = CachedEncoder(inner)
    cached.encode(["a b"])
    assert cached.prefetch(iter(["a b", "c d", "e f", "c d"])) == 2  # "a b" cached, "c d" once
    assert inner.calls == 2
    np.testing.assert_array_equal(cached.encode(["e f", "c d"]), inner.encode(["e f", "c d"]))
    assert inner.calls == 3 and cached.misses == 1  # the encode above was served from the cache (3rd: the check)
    assert cached.prefetch([]) == 0 and inner.calls == 3


def test_a_rollout_prefetches_its_tasks_texts_and_plays_from_the_cache(qwen_tokenizer):
    from agemem.recipes.learn.expert import ExpertHabits
    from agemem.tasks.synthetic import generate_synthetic_tasks
    from tests.rollouts.scripted import play_expert

    tasks = generate_synthetic_tasks(3, seed=4, revisions=1)
    cached = CachedEncoder(WordSetEncoder())
    # a careful, whole-message expert stores messages as they came and retrieves with the question: all known
    play_expert(qwen_tokenizer, tasks, ExpertHabits(1.0, 0.0, 1.0, whole_message=True), encoder=cached)
    assert cached.inner.calls >= 1 and cached.hits > 0
    assert cached.misses == 0  # every text embedded during play was prefetched


def test_l2_normalise_leaves_zero_rows_zero():
    out = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])


def test_unloadable_model_is_a_config_error(tmp_path):
    (tmp_path / "README.md").write_text("not a model")
    with pytest.raises(ConfigError, match=r"encoder\.model"):
        build_encoder(EncoderConfig(model=str(tmp_path)))

"""Prefix caching in the transformers engine: reused KV changes no token, and is reused only when valid.

The reference is always the same engine with the cache off (``prefix_cache_tokens=0``) or a teacher-forced
forward pass over the whole sequence, never the cached path itself.
"""

from __future__ import annotations

import pytest
import torch

from agemem.core.configlib import ConfigError
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.build import build_engine
from agemem.rollouts.config import EngineConfig
from agemem.rollouts.engines.base import SamplingParams
from agemem.rollouts.engines.prefix_cache import BLOCK, CachedPrefix, PrefixCache
from agemem.rollouts.engines.transformers_engine import TransformersEngine

GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # see conftest.py


def random_ids(count: int, seed: int) -> list[int]:
    return torch.randint(10, 5000, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def engines(policy, batch_size: int = 8) -> tuple[TransformersEngine, TransformersEngine]:
    model, tokenizer = policy
    cached = TransformersEngine(model, tokenizer, batch_size=batch_size)
    plain = TransformersEngine(model, tokenizer, batch_size=batch_size, prefix_cache_tokens=0)
    return cached, plain


def test_one_conversation_reuses_its_prompt_and_reply_and_decodes_the_same(policy):
    cached, plain = engines(policy)
    prompt = random_ids(40, seed=1)
    first = cached.generate([prompt], GREEDY)[0]
    assert first.cached_prompt_tokens == 0 and first.finish_reason == "length"
    # the next prompt: the reply and a 5-token tool response appended. The entry covers the prompt and the
    # reply but its last token (sampled, never fed): 40 + 6 - 1 = 45 tokens served from the cache
    follow_up = prompt + first.token_ids + random_ids(5, seed=2)
    second = cached.generate([follow_up], GREEDY)[0]
    assert second.cached_prompt_tokens == 45
    reference = plain.generate([follow_up], GREEDY)[0]
    assert second.token_ids == reference.token_ids
    assert second.logprobs == pytest.approx(reference.logprobs, abs=1e-4)


def test_multi_turn_batch_with_hits_misses_and_a_restart_equals_no_cache(policy):
    cached, plain = engines(policy, batch_size=3)
    conversations = [random_ids(n, seed=n) for n in (30, 55, 12, 80, 47)]
    reused = []
    for turn in range(4):
        with_cache, without = cached.generate(conversations, GREEDY), plain.generate(conversations, GREEDY)
        assert [c.token_ids for c in with_cache] == [c.token_ids for c in without]
        for a, b in zip(with_cache, without):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert all(c.cached_prompt_tokens == 0 for c in without)
        reused.append([c.cached_prompt_tokens for c in with_cache])
        conversations = [c + out.token_ids + random_ids(3 + i, seed=100 * turn + i) for i, (c, out) in
                         enumerate(zip(conversations, with_cache))]  # fmt: skip
        if turn == 1:
            conversations[3] = random_ids(33, seed=7)  # a new conversation: nothing to reuse
    assert reused[0] == [0] * 5
    assert all(r > 0 for r in reused[1])
    assert reused[2][3] == 0 and all(r > 0 for i, r in enumerate(reused[2]) if i != 3)
    # at most its whole entry (33 + 6 - 1): a row computes as many columns as the most demanding row of its
    # micro-batch, so it may reuse less than it could
    assert 0 < reused[3][3] <= 33 + GREEDY.max_tokens - 1


def test_sampled_logprobs_with_reused_kv_equal_teacher_forced_ones(policy):
    model, tokenizer = policy
    # micro-batches of 3 rows: the engine batches the three continuations together and the miss alone (in one
    # batch the miss would make every row compute all its columns)
    engine = TransformersEngine(model, tokenizer, batch_size=3)
    sampling = SamplingParams(temperature=0.8, max_tokens=5, seed=3)
    prompts = [random_ids(n, seed=n) for n in (20, 37, 64)]
    replies = engine.generate(prompts, sampling)
    follow_ups = [p + r.token_ids + random_ids(4, seed=9) for p, r in zip(prompts, replies)]
    follow_ups.append(random_ids(50, seed=11))  # a miss in the same call
    completions = engine.generate(follow_ups, sampling)
    assert [c.cached_prompt_tokens > 0 for c in completions] == [True, True, True, False]
    for prompt, completion in zip(follow_ups, completions):
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion.token_ids])).logits[0].float()
        start = len(prompt) - 1
        expected = torch.log_softmax(logits[start : start + len(completion.token_ids)] / 0.8, dim=-1)
        expected = expected.gather(1, torch.tensor(completion.token_ids)[:, None]).squeeze(1)
        assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


def test_a_prompt_diverging_inside_an_entry_reuses_the_shared_part_only(policy):
    cached, plain = engines(policy)
    prompt = random_ids(3 * BLOCK + 5, seed=4)
    cached.generate([prompt], GREEDY)
    # a re-tokenized reply: the first 2 blocks + 3 tokens agree, then the tokens differ
    diverged = [*prompt[: 2 * BLOCK + 3], 7, 8, 9, *random_ids(10, seed=5)]
    out = cached.generate([diverged], GREEDY)[0]
    assert out.cached_prompt_tokens == 2 * BLOCK + 3
    assert out.token_ids == plain.generate([diverged], GREEDY)[0].token_ids


def test_changed_weights_invalidate_the_cache(policy):
    model, tokenizer = policy
    engine = TransformersEngine(model, tokenizer)
    prompt = random_ids(40, seed=6)
    first = engine.generate([prompt], GREEDY)[0]
    follow_up = prompt + first.token_ids
    original = {name: p.detach().clone() for name, p in model.named_parameters()}
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        model(torch.tensor([prompt])).logits.float().pow(2).mean().backward()
        optimizer.step()  # in place, as the GRPO update does to the shared policy
        optimizer.zero_grad(set_to_none=True)
        after = engine.generate([follow_up], GREEDY)[0]
        assert after.cached_prompt_tokens == 0
        fresh = TransformersEngine(model, tokenizer, prefix_cache_tokens=0).generate([follow_up], GREEDY)[0]
        assert after.logprobs == pytest.approx(fresh.logprobs, abs=1e-4)
    finally:
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                parameter.copy_(original[name])


def test_sync_weights_empties_the_cache(policy):
    cached, _ = engines(policy)
    cached.generate([random_ids(40, seed=8)], GREEDY)
    assert len(cached.prefix_cache) == 1
    cached.sync_weights()
    assert len(cached.prefix_cache) == 0


def test_sliding_window_models_do_not_cache():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agemem.core.chat import load_tokenizer

    config = Qwen2Config(
        vocab_size=151_936, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, use_sliding_window=True, sliding_window=8, max_window_layers=1,
    )  # fmt: skip
    engine = TransformersEngine(Qwen2ForCausalLM(config), load_tokenizer())
    assert not engine.prefix_cache.enabled


# --- the store itself ---------------------------------------------------------------------------------------


def entry(tokens: list[int]) -> CachedPrefix:
    kv = (torch.zeros(1, len(tokens), 2),)
    return CachedPrefix(tuple(tokens), kv, kv)


def test_least_recently_used_entries_are_evicted_beyond_capacity():
    store = PrefixCache(capacity_tokens=3 * BLOCK)
    a, b, c = (entry(random_ids(BLOCK, seed=s)) for s in (1, 2, 3))
    for item in (a, b, c):
        store.insert(item)
    assert store.lookup([*a.tokens, 1])[0] is a  # a is now the most recently used
    store.insert(entry(random_ids(BLOCK, seed=4)))
    assert store.lookup([*b.tokens, 1]) == (None, 0)  # b was the least recently used
    assert store.lookup([*a.tokens, 1])[0] is a
    assert store.cached_tokens == 3 * BLOCK and len(store) == 3


def test_an_entry_replaces_the_one_it_continued_and_lookup_finds_the_longest():
    store = PrefixCache(capacity_tokens=1000)
    old = entry(random_ids(2 * BLOCK, seed=1))
    other = entry(list(old.tokens[:BLOCK]) + random_ids(BLOCK, seed=2))  # shares one block with old
    store.insert(old)
    store.insert(other)
    new = entry(list(old.tokens) + random_ids(BLOCK, seed=3))
    store.insert(new, replaces=old)
    assert len(store) == 2 and store.cached_tokens == 5 * BLOCK
    found, shared = store.lookup([*new.tokens, 5])
    assert found is new and shared == 3 * BLOCK
    found, shared = store.lookup(list(other.tokens[: BLOCK + 4]) + [1] * 20)
    assert found is other and shared == BLOCK + 4


def test_prompts_sharing_less_than_a_block_and_oversized_entries_are_not_cached():
    store = PrefixCache(capacity_tokens=2 * BLOCK)
    store.insert(entry(random_ids(3 * BLOCK, seed=1)))  # larger than the whole cache
    assert len(store) == 0
    short = entry(random_ids(BLOCK - 1, seed=2))
    store.insert(short)
    assert store.lookup([*short.tokens, 3]) == (None, 0)


def test_capacity_is_validated_in_the_store_and_the_config():
    with pytest.raises(ValueError, match="capacity_tokens=-1"):
        PrefixCache(-1)
    assert not PrefixCache(0).enabled
    with pytest.raises(ConfigError, match="prefix_cache_tokens=-5 must be >= 0"):
        EngineConfig(prefix_cache_tokens=-5).validate()


def test_build_engine_passes_the_configured_capacity(policy):
    model, tokenizer = policy
    config = AgeMemConfig(engine=EngineConfig(prefix_cache_tokens=1234))
    assert build_engine(config.engine, model, tokenizer).prefix_cache.capacity_tokens == 1234

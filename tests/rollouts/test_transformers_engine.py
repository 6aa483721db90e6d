"""The default engine (batched, left-padded decoding; finished rows leave the batch) on the tiny random Qwen2.

Every expected value is computed independently of the engine: log-probs by a teacher-forced forward pass
over prompt + completion (no padding, no cache), greedy completions by generating each prompt alone.
The tiny model is built once per module; each test makes its own engine (the per-call seed depends on
how many calls an engine has served).
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
import warnings

import pytest
import torch

from agemem.core.chat import encode_chat, end_of_turn_ids, load_tokenizer
from agemem.core.configlib import ConfigError
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.engines.base import Completion, Engine, SamplingParams, derive_seed
from agemem.rollouts.engines.transformers_engine import TransformersEngine, cache_keyword, truncate_logits
from agemem.rollouts.policy import TINY_POLICY, load_policy

QWEN3_TOKENIZER = "/work/shared/tokenizers/qwen3"
IM_END = 151645


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # see conftest.py


@pytest.fixture(scope="module")
def prompts(policy):
    """Prompts of different lengths, deliberately not sorted by length (the engine sorts, then restores order)."""
    _, tokenizer = policy
    chat = [
        encode_chat(tokenizer, [{"role": "user", "content": "What is the capital of France? One word, please."}]),
        encode_chat(
            tokenizer,
            [
                {"role": "system", "content": "You manage your own memory with tools."},
                {"role": "user", "content": "Remember that my cat is called Miso, then tell me a joke."},
            ],
        )
        + tokenizer("Sure, Miso", add_special_tokens=False)["input_ids"],  # a pre-filled assistant reply
    ]
    result = [chat[0], [42], chat[1], [5, 6, 7, 8, 9, 10, 11], [100, 200, 300]]
    assert len({len(p) for p in result}) == len(result)
    return result


def make_engine(policy, batch_size: int = 8) -> TransformersEngine:
    model, tokenizer = policy
    return TransformersEngine(model, tokenizer, batch_size=batch_size)


def teacher_forced_logprobs_TV(model, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    """``[T, V]`` log softmax(logits / temperature) at the positions that predict each completion token."""
    with torch.no_grad():
        logits_LV = model(torch.tensor([list(prompt) + list(completion)])).logits[0].float()
    scale = temperature if temperature > 0 else 1.0
    start = len(prompt) - 1
    return torch.log_softmax(logits_LV[start : start + len(completion)] / scale, dim=-1)


def gathered(logprobs_TV: torch.Tensor, ids: list[int]) -> torch.Tensor:
    return logprobs_TV.gather(1, torch.tensor(ids)[:, None]).squeeze(1)


def ids_of(completions: list[Completion]) -> list[list[int]]:
    return [c.token_ids for c in completions]


# --- 1. log-probs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_sampled_logprobs_equal_teacher_forced_tempered_logprobs_for_every_padded_row(policy, prompts, temperature):
    model, _ = policy
    sampling = SamplingParams(temperature=temperature, top_p=1.0, top_k=0, max_tokens=6, seed=11)
    completions = make_engine(policy).generate(prompts, sampling)  # one micro-batch: every row but one is padded

    assert len(completions) == len(prompts)
    for prompt, completion in zip(prompts, completions):
        assert completion.finish_reason == "length"
        assert len(completion.token_ids) == 6
        assert len(completion.logprobs) == 6
        expected_TV = teacher_forced_logprobs_TV(model, prompt, completion.token_ids, temperature)
        expected = gathered(expected_TV, completion.token_ids)
        torch.testing.assert_close(torch.tensor(completion.logprobs), expected, atol=1e-4, rtol=0)
        if temperature != 1.0:  # the temperature is really folded in: the untempered values are far off
            untempered_TV = teacher_forced_logprobs_TV(model, prompt, completion.token_ids, 1.0)
            untempered = gathered(untempered_TV, completion.token_ids)
            assert (torch.tensor(completion.logprobs) - untempered).abs().max() > 1e-2


def test_greedy_records_untempered_logprobs_of_the_argmax_token(policy, prompts):
    model, _ = policy
    completions = make_engine(policy).generate(prompts, SamplingParams(temperature=0.0, max_tokens=5))

    for prompt, completion in zip(prompts, completions):
        expected_TV = teacher_forced_logprobs_TV(model, prompt, completion.token_ids, 1.0)
        recorded = torch.tensor(completion.logprobs)
        torch.testing.assert_close(recorded, gathered(expected_TV, completion.token_ids), atol=1e-4, rtol=0)
        # greedy picked the most likely token at every step (up to float noise between padded and unpadded runs)
        assert torch.all(expected_TV.max(dim=-1).values - recorded < 1e-4)


def renormalised(logprobs_TV: torch.Tensor, keep_TV: torch.Tensor) -> torch.Tensor:
    """``[T, V]`` log-probs of the distribution restricted to ``keep_TV`` (what truncated sampling draws from)."""
    kept_TV = logprobs_TV.masked_fill(~keep_TV, float("-inf"))
    return kept_TV - torch.logsumexp(kept_TV, dim=-1, keepdim=True)


def test_top_k_restricts_samples_and_reports_the_truncated_logprobs(policy, prompts):
    model, _ = policy
    sampling = SamplingParams(temperature=1.0, top_k=3, max_tokens=6, seed=5)
    completions = make_engine(policy).generate(prompts, sampling)

    for prompt, completion in zip(prompts, completions):
        expected_TV = teacher_forced_logprobs_TV(model, prompt, completion.token_ids, 1.0)
        top3_TK = expected_TV.topk(3, dim=-1).indices
        for step, token in enumerate(completion.token_ids):
            assert token in top3_TK[step].tolist()
        keep_TV = torch.zeros_like(expected_TV, dtype=torch.bool).scatter(1, top3_TK, True)
        truncated = gathered(renormalised(expected_TV, keep_TV), completion.token_ids)
        # the log-prob of the distribution sampled from (the trainer's loss uses the same), not the full softmax
        torch.testing.assert_close(torch.tensor(completion.logprobs), truncated, atol=1e-4, rtol=0)
        full = gathered(expected_TV, completion.token_ids)
        assert (truncated - full).min() > 1e-3  # renormalising over 3 of 151k tokens raises every kept token


# --- 2. left padding and micro-batching ---------------------------------------------------------------------


def test_greedy_batch_equals_each_prompt_alone_and_keeps_input_order(policy, prompts):
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    alone = [make_engine(policy).generate([p], greedy)[0] for p in prompts]
    assert len({tuple(c.token_ids) for c in alone}) == len(prompts), "prompts must differ so order is observable"

    for batch_size in (1, 2, 8):
        batched = make_engine(policy, batch_size=batch_size).generate(prompts, greedy)
        assert ids_of(batched) == ids_of(alone), f"batch_size={batch_size}"
        for b, a in zip(batched, alone):
            torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4, rtol=0)

    reversed_out = make_engine(policy).generate(prompts[::-1], greedy)
    assert ids_of(reversed_out) == ids_of(alone)[::-1]


def test_every_forward_pass_returns_logits_for_one_position_only(policy, prompts, monkeypatch):
    """The prompt pass asks for the last position's logits only: [B, P, V] over Qwen's 151k ids would not fit."""
    model, _ = policy
    shapes = []
    forward = model.forward

    @functools.wraps(forward)  # the engine reads the forward's signature for its cache keyword
    def spy(*args, **kwargs):
        output = forward(*args, **kwargs)
        shapes.append(tuple(output.logits.shape))
        return output

    monkeypatch.setattr(model, "forward", spy)
    make_engine(policy).generate(prompts, SamplingParams(temperature=0.0, max_tokens=3))
    assert len(shapes) == 3  # the prompt pass, then one pass per further token
    assert shapes[0][:2] == (len(prompts), 1)  # the whole left-padded batch, one position
    assert all(shape[1] == 1 for shape in shapes)


def test_generation_passes_the_cache_by_the_keyword_the_installed_transformers_takes(policy, prompts):
    """No deprecation warning on every forward pass: ``cache=`` where the forward takes it (5.24+),
    ``past_key_values=`` on the floor (5.17), which has no ``cache``."""
    model, _ = policy
    keyword = cache_keyword(model)
    assert keyword in inspect.signature(model.forward).parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        make_engine(policy).generate(prompts, SamplingParams(temperature=0.0, max_tokens=2))


# --- 3. seeds -----------------------------------------------------------------------------------------------


def test_same_seed_reproduces_and_different_seed_differs(policy, prompts):
    sampling = SamplingParams(temperature=1.0, max_tokens=5, seed=1234)
    first = make_engine(policy).generate(prompts, sampling)
    again = make_engine(policy).generate(prompts, sampling)
    assert ids_of(first) == ids_of(again)
    assert [c.logprobs for c in first] == [c.logprobs for c in again]

    other = make_engine(policy).generate(prompts, SamplingParams(temperature=1.0, max_tokens=5, seed=1235))
    assert ids_of(other) != ids_of(first)


def test_each_call_of_one_engine_gets_its_own_seed(policy, prompts):
    assert derive_seed(7, 0) != derive_seed(7, 1) != derive_seed(8, 0)
    engine = make_engine(policy)
    sampling = SamplingParams(temperature=1.0, max_tokens=5, seed=7)
    first, second = engine.generate(prompts, sampling), engine.generate(prompts, sampling)
    assert ids_of(first) != ids_of(second)  # a rollout loop repeating the same prompt explores, not replays
    assert engine.calls == 2


def test_seeded_call_leaves_global_rng_alone_and_unseeded_call_works(policy, prompts):
    torch.manual_seed(99)
    state = torch.get_rng_state()
    make_engine(policy).generate(prompts, SamplingParams(temperature=1.0, max_tokens=4, seed=3))
    assert torch.equal(torch.get_rng_state(), state)

    unseeded = make_engine(policy).generate(prompts, SamplingParams(temperature=1.0, max_tokens=4, seed=None))
    assert [len(c.token_ids) for c in unseeded] == [4] * len(prompts)
    assert all(len(c.logprobs) == 4 and c.finish_reason == "length" for c in unseeded)


def test_identical_prompts_in_one_call_sample_independently(policy, prompts):
    sampling = SamplingParams(temperature=1.0, max_tokens=6, seed=21)
    completions = make_engine(policy).generate([prompts[0]] * 4, sampling)
    assert len({tuple(c.token_ids) for c in completions}) == 4


# --- 4. stop tokens -----------------------------------------------------------------------------------------


def greedy_with_fresh_token(policy, prompts, max_tokens: int) -> tuple[list[int], Completion, int]:
    """A prompt, its greedy completion and a step k >= 1 whose token the completion did not emit before.

    (The tiny random model with tied embeddings tends to repeat a token, so step 2 is not always fresh.)
    """
    greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    for prompt in prompts:
        completion = make_engine(policy).generate([prompt], greedy)[0]
        ids = completion.token_ids
        step = next((k for k in range(1, len(ids) - 1) if ids[k] not in ids[:k]), None)
        if step is not None:
            return prompt, completion, step
    pytest.fail("no prompt whose greedy completion changes token before its last step")


def test_greedy_stop_token_ends_completion_right_after_it_and_is_kept(policy, prompts):
    max_tokens = 6
    prompt, free, step = greedy_with_fresh_token(policy, prompts, max_tokens)
    assert free.finish_reason == "length" and len(free.token_ids) == max_tokens
    stop = free.token_ids[step]
    others = [p for p in prompts if p is not prompt]
    other_free = make_engine(policy).generate(others, SamplingParams(temperature=0.0, max_tokens=max_tokens))
    kept = [(p, c) for p, c in zip(others, other_free) if stop not in c.token_ids]
    assert kept, "need a prompt that never emits the stop token"
    others = [p for p, _ in kept]

    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop_token_ids=(stop,))
    stopped, *rest = make_engine(policy).generate([prompt, *others], sampling)

    assert stopped.token_ids == free.token_ids[: step + 1]
    assert stopped.token_ids[-1] == stop
    assert stopped.finish_reason == "stop"
    assert len(stopped.logprobs) == len(stopped.token_ids)
    expected = torch.tensor(free.logprobs[: step + 1])
    torch.testing.assert_close(torch.tensor(stopped.logprobs), expected, atol=1e-4, rtol=0)
    # rows in the same batch that never emit the stop token run to the budget, with no padding leaking in; the
    # stopped row left the batch and its KV cache after step k, and what the others decode afterwards is unchanged
    for completion, (_, alone) in zip(rest, kept):
        assert completion.finish_reason == "length"
        assert len(completion.token_ids) == max_tokens == len(completion.logprobs)
        assert stop not in completion.token_ids
        assert completion.token_ids == alone.token_ids
        torch.testing.assert_close(torch.tensor(completion.logprobs), torch.tensor(alone.logprobs), atol=1e-4, rtol=0)


def test_rows_stopping_at_different_steps_each_decode_as_if_alone(policy, prompts):
    """Rows leave the batch one by one (each on its own stop token); every row decodes what it decodes alone."""
    max_tokens = 8
    greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    free = make_engine(policy).generate(prompts, greedy)
    # stops: the first token of row 0 (it leaves after one step) and, for every row that has one, a token it emits
    # for the first time at a later step (it leaves then); only tokens no other row emits, so the rest run on
    emitted = [set(c.token_ids) for c in free]
    candidates = [(0, free[0].token_ids[0])]
    for row, completion in enumerate(free):
        ids = completion.token_ids
        step = next((k for k in range(1, max_tokens - 1) if ids[k] not in ids[:k]), None)
        if step is not None:
            candidates.append((row, ids[step]))
    stops = {t for row, t in candidates if not any(t in e for other, e in enumerate(emitted) if other != row)}
    stopping = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop_token_ids=tuple(sorted(stops)))
    alone = [make_engine(policy).generate([p], stopping)[0] for p in prompts]
    batched = make_engine(policy).generate(prompts, stopping)
    assert len({len(c.token_ids) for c in batched}) >= 3, "rows must leave the batch at different steps"
    for row, (b, a) in enumerate(zip(batched, alone)):
        assert b.token_ids == a.token_ids, f"row {row}"
        assert b.finish_reason == a.finish_reason
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4, rtol=0)


def test_sampled_stop_at_step_two(policy, prompts):
    """Same seed, same prompt: the first two draws repeat, and a stop on the second token ends the completion."""
    free = make_engine(policy).generate(prompts[1:2], SamplingParams(temperature=1.0, max_tokens=6, seed=8))[0]
    assert free.finish_reason == "length" and len(free.token_ids) == 6
    assert free.token_ids[1] != free.token_ids[0]
    sampling = SamplingParams(temperature=1.0, max_tokens=6, seed=8, stop_token_ids=(free.token_ids[1],))
    stopped = make_engine(policy).generate(prompts[1:2], sampling)[0]
    assert stopped.token_ids == free.token_ids[:2]
    assert stopped.finish_reason == "stop"
    assert stopped.logprobs == pytest.approx(free.logprobs[:2], abs=1e-5)


def test_stop_at_first_token_and_unrelated_stop_ids(policy, prompts):
    greedy = SamplingParams(temperature=0.0, max_tokens=5)
    free = make_engine(policy).generate(prompts[:1], greedy)[0]
    first = make_engine(policy).generate(
        prompts[:1], SamplingParams(temperature=0.0, max_tokens=5, stop_token_ids=(IM_END, free.token_ids[0]))
    )[0]
    assert first.token_ids == free.token_ids[:1]
    assert first.finish_reason == "stop" and len(first.logprobs) == 1

    unrelated = [t for t in (IM_END, 151643) if t not in free.token_ids]
    never = make_engine(policy).generate(
        prompts[:1], SamplingParams(temperature=0.0, max_tokens=5, stop_token_ids=tuple(unrelated))
    )[0]
    assert never.token_ids == free.token_ids
    assert never.finish_reason == "length"


# --- 5. truncation -----------------------------------------------------------------------------------------


def test_truncate_logits_top_p_and_top_k_by_hand():
    # probabilities 0.15, 0.5, 0.05, 0.3 (unsorted on purpose); ranked: 0.5, 0.3, 0.15, 0.05 with the mass of the
    # tokens ranked above each 0, 0.5, 0.8, 0.95 -> top_p=0.7 keeps the ranks whose mass above is < 0.7: 0.5 and 0.3
    logits_BV = torch.tensor([[0.15, 0.5, 0.05, 0.3]]).log()
    kept = lambda out: torch.isfinite(out[0]).nonzero().squeeze(1).tolist()  # noqa: E731
    assert kept(truncate_logits(logits_BV, 0, 0.7)) == [1, 3]
    assert kept(truncate_logits(logits_BV, 0, 0.5)) == [1]  # 0.3's mass above is 0.5, not below 0.5
    assert kept(truncate_logits(logits_BV, 0, 0.81)) == [0, 1, 3]
    assert kept(truncate_logits(logits_BV, 0, 0.01)) == [1]  # the most likely token always survives
    assert kept(truncate_logits(logits_BV, 3, 1.0)) == [0, 1, 3]
    assert kept(truncate_logits(logits_BV, 3, 0.7)) == [1, 3]
    assert kept(truncate_logits(logits_BV, 0, 1.0)) == [0, 1, 2, 3]  # both off
    # survivors keep their logits: renormalised, 0.5 and 0.3 become 0.625 and 0.375
    probs = truncate_logits(logits_BV, 0, 0.7).softmax(-1)[0]
    torch.testing.assert_close(probs, torch.tensor([0.0, 0.625, 0.0, 0.375]))


def test_top_p_samples_only_the_nucleus_and_reports_its_logprobs(policy, prompts):
    model, _ = policy
    sampling = SamplingParams(temperature=1.0, top_p=0.3, max_tokens=6, seed=4)
    for prompt, completion in zip(prompts, make_engine(policy).generate(prompts, sampling)):
        expected_TV = teacher_forced_logprobs_TV(model, prompt, completion.token_ids, 1.0)
        probs_TV = expected_TV.exp()
        for step, token in enumerate(completion.token_ids):
            ranked = probs_TV[step].sort(descending=True)
            rank = ranked.indices.tolist().index(token)
            assert ranked.values[:rank].sum() < 0.3 + 1e-5  # the mass ranked above the sampled token
        # the nucleus: every token whose higher-ranked mass is below top_p
        sorted_TV, order_TV = probs_TV.sort(dim=-1, descending=True)
        keep_sorted_TV = sorted_TV.cumsum(dim=-1) - sorted_TV < 0.3
        keep_TV = torch.zeros_like(keep_sorted_TV).scatter(1, order_TV, keep_sorted_TV)
        torch.testing.assert_close(
            torch.tensor(completion.logprobs),
            gathered(renormalised(expected_TV, keep_TV), completion.token_ids),
            atol=1e-4,
            rtol=0,
        )


# --- 6. the checkpoint's generation_config ------------------------------------------------------------------


@pytest.fixture
def restore_generation_config(policy):
    model, _ = policy
    saved = copy.deepcopy(model.generation_config)
    yield model.generation_config
    model.generation_config = saved


def test_checkpoint_sampling_defaults_do_not_change_sampling(policy, prompts, restore_generation_config):
    sampled = SamplingParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=6, seed=17)
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    clean_sampled = make_engine(policy).generate(prompts, sampled)
    clean_greedy = make_engine(policy).generate(prompts, greedy)

    config = restore_generation_config
    config.repetition_penalty = 10.0
    config.top_k = 1
    config.top_p = 0.01
    config.temperature = 0.01
    config.do_sample = False
    config.max_new_tokens = 1

    dirty_sampled = make_engine(policy).generate(prompts, sampled)
    assert ids_of(dirty_sampled) == ids_of(clean_sampled)
    assert [c.logprobs for c in dirty_sampled] == [c.logprobs for c in clean_sampled]
    assert ids_of(make_engine(policy).generate(prompts, greedy)) == ids_of(clean_greedy)


@pytest.mark.parametrize("field", ["eos_token_id", "no_repeat_ngram_size", "suppress_tokens", "min_p"])
def test_checkpoint_generation_config_fields_left_unset_do_not_leak_into_decoding(
    policy, prompts, restore_generation_config, field
):
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    sampled = SamplingParams(temperature=1.0, max_tokens=6, seed=17)
    clean_greedy = make_engine(policy).generate(prompts, greedy)
    clean_sampled = make_engine(policy).generate(prompts, sampled)
    first_token = clean_greedy[0].token_ids[0]
    # what a checkpoint could ship (Qwen2.5/Qwen3 ship eos_token_id=[151645, 151643]); here aimed at tokens
    # the tiny model actually emits so the effect is observable
    value = {
        "eos_token_id": first_token,
        "no_repeat_ngram_size": 1,
        "suppress_tokens": [first_token],
        "min_p": 0.99,
    }[field]
    setattr(restore_generation_config, field, value)

    dirty_greedy = make_engine(policy).generate(prompts, greedy)
    dirty_sampled = make_engine(policy).generate(prompts, sampled)
    assert ids_of(dirty_greedy) == ids_of(clean_greedy)
    assert ids_of(dirty_sampled) == ids_of(clean_sampled)
    assert all(c.finish_reason == "length" and len(c.token_ids) == 6 for c in dirty_greedy + dirty_sampled)


# --- 7. errors ----------------------------------------------------------------------------------------------


def test_empty_prompt_list_returns_nothing_without_counting_a_call(policy):
    engine = make_engine(policy)
    assert engine.generate([], SamplingParams(max_tokens=4)) == []
    assert engine.calls == 0


def test_zero_token_prompt_is_rejected(policy, prompts):
    with pytest.raises(ValueError, match="at least one token"):
        make_engine(policy).generate([prompts[0], []], SamplingParams(max_tokens=4))


@pytest.mark.parametrize("batch_size", [0, -1])
def test_batch_size_below_one_is_rejected(policy, batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        make_engine(policy, batch_size=batch_size)


# --- 8. the policy ------------------------------------------------------------------------------------------


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_tiny_policy_weights_are_a_function_of_init_seed(policy):
    model, _ = policy
    rebuilt, _ = load_policy(PolicyConfig(model=TINY_POLICY, device="cpu", init_seed=0))
    other, _ = load_policy(PolicyConfig(model=TINY_POLICY, device="cpu", init_seed=1))
    assert same_weights(model, rebuilt)
    assert not same_weights(model, other)
    assert not model.training


def test_tiny_policy_vocabulary_matches_tokenizer_so_every_sample_decodes(policy, prompts):
    model, tokenizer = policy
    assert model.config.vocab_size == len(tokenizer) == model.get_output_embeddings().weight.shape[0]
    completions = make_engine(policy).generate(prompts, SamplingParams(temperature=1.0, max_tokens=8, seed=2))
    for token in {t for c in completions for t in c.token_ids}:
        assert 0 <= token < len(tokenizer)
        assert tokenizer.convert_ids_to_tokens(token) is not None
        assert isinstance(tokenizer.decode([token]), str)


def test_load_policy_from_a_saved_directory_gives_the_same_model(policy, prompts, tmp_path):
    model, tokenizer = policy
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    loaded, loaded_tokenizer = load_policy(PolicyConfig(model=str(tmp_path), device="cpu"))
    assert same_weights(model, loaded)
    assert len(loaded_tokenizer) == len(tokenizer)
    assert loaded_tokenizer.pad_token_id == tokenizer.pad_token_id
    greedy = SamplingParams(temperature=0.0, max_tokens=4)
    expected = make_engine(policy).generate(prompts, greedy)
    assert ids_of(TransformersEngine(loaded, loaded_tokenizer).generate(prompts, greedy)) == ids_of(expected)


def test_missing_model_path_raises_config_error_naming_path_and_fix(tmp_path):
    missing = str(tmp_path / "no-such-model")
    # a path that does not exist is refused before anything is loaded, naming the setting and what else it takes
    for tokenizer in ("", "bundled:qwen2.5-instruct"):
        with pytest.raises(ConfigError) as err:
            load_policy(PolicyConfig(model=missing, tokenizer=tokenizer, device="cpu"))
        assert f"policy.model={missing!r}: no such folder" in str(err.value) and TINY_POLICY in str(err.value)
    with pytest.raises(ConfigError, match=r"tokenizer=.*no such folder.*bundled:qwen2\.5-instruct"):
        load_policy(PolicyConfig(model=TINY_POLICY, tokenizer=missing, device="cpu"))

    # a folder that exists but holds no model: the loader's own error, with the fix
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError) as err:
        load_policy(PolicyConfig(model=str(tmp_path / "empty"), tokenizer="bundled:qwen2.5-instruct", device="cpu"))
    assert "could not be loaded" in str(err.value)
    assert TINY_POLICY in str(err.value) and "local model directory" in str(err.value)


def test_directory_without_weights_raises_config_error(policy, tmp_path):
    _, tokenizer = policy
    tokenizer.save_pretrained(tmp_path)  # a tokenizer but no model
    with pytest.raises(ConfigError, match=TINY_POLICY):
        load_policy(PolicyConfig(model=str(tmp_path), device="cpu"))


# --- 9. end-of-turn ids -------------------------------------------------------------------------------------


def assert_eot_follows_assistant_reply(tokenizer, eot: tuple[int, ...]):
    reply = "The answer is 42."
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": reply},
    ]
    full = encode_chat(tokenizer, conversation, add_generation_prompt=False)
    reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
    starts = [i for i in range(len(full) - len(reply_ids)) if full[i : i + len(reply_ids)] == reply_ids]
    assert starts, "the reply is tokenised the same inside the rendered conversation"
    assert full[starts[-1] + len(reply_ids)] == eot[0]


def test_end_of_turn_ids_qwen25(qwen_tokenizer):
    eot = end_of_turn_ids(qwen_tokenizer)
    assert eot == (IM_END,)
    assert qwen_tokenizer.convert_ids_to_tokens(IM_END) == "<|im_end|>"
    assert_eot_follows_assistant_reply(qwen_tokenizer, eot)

    # prompt (generation prompt included) + the reply as the engine returns it (stop token kept) is exactly
    # the rendered conversation, so training never re-tokenises
    conversation = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there."}]
    prompt = encode_chat(qwen_tokenizer, conversation[:1], add_generation_prompt=True)
    completion = qwen_tokenizer("Hello there.", add_special_tokens=False)["input_ids"] + [eot[0]]
    full = encode_chat(qwen_tokenizer, conversation, add_generation_prompt=False)
    assert full[: len(prompt) + len(completion)] == prompt + completion


def test_end_of_turn_ids_qwen3():
    if not os.path.isdir(QWEN3_TOKENIZER):
        pytest.skip(f"{QWEN3_TOKENIZER} not available")
    tokenizer = load_tokenizer(QWEN3_TOKENIZER)
    eot = end_of_turn_ids(tokenizer)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in eot
    assert eot[0] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert_eot_follows_assistant_reply(tokenizer, eot)


# --- 10. protocol --------------------------------------------------------------------------------------------


def test_engine_satisfies_protocol(policy, prompts):
    engine = make_engine(policy)
    assert isinstance(engine, Engine)
    assert engine.name == "transformers"
    # the chat-form ``messages`` argument of the protocol is accepted and ignored by a token engine
    greedy = SamplingParams(temperature=0.0, max_tokens=3)
    with_messages = engine.generate(prompts[:1], greedy, messages=[[{"role": "user", "content": "ignored"}]])
    assert ids_of(with_messages) == ids_of(make_engine(policy).generate(prompts[:1], greedy))
    assert all(c.text is None and c.error is None for c in with_messages)

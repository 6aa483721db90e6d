"""Constrained decoding in the transformers engine (``SamplingParams.grammar``, xgrammar) on the tiny random Qwen2.

The random model's own replies are noise: none of them parses as JSON. Under a grammar every completion of a
batch (prompts of different lengths, sampled) matches it and ends with the end-of-turn token.
"""

from __future__ import annotations

import json

import pytest

from agemem.core.chat import encode_chat, end_of_turn_ids
from agemem.rollouts.engines.base import SamplingParams
from agemem.rollouts.engines.grammar import refuse_grammar
from agemem.rollouts.engines.transformers_engine import TransformersEngine
from tests.conftest import parses_as_json

xgr = pytest.importorskip("xgrammar", reason="constrained decoding needs xgrammar: pip install 'agemem[baselines]'")

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # see conftest.py

VERDICT = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "grade": {"enum": ["low", "mid", "high"]}},
    "required": ["ok", "grade"],
}
"""a schema a random model cannot wander off inside: no free text, so every completion closes."""


def grammar_of(schema: dict, prefix: str = "", suffix: str = "") -> str:
    parts = [xgr.Grammar.from_json_schema(schema, any_whitespace=False)]
    if prefix:
        parts.insert(0, xgr.Grammar.from_ebnf(f"root ::= {json.dumps(prefix)}"))
    if suffix:
        parts.append(xgr.Grammar.from_ebnf(f"root ::= {json.dumps(suffix)}"))
    return str(xgr.Grammar.concat(*parts))


@pytest.fixture(scope="module")
def prompts(policy):
    _, tokenizer = policy
    questions = ["Rate it.", "Is the answer right? Say so in JSON, with a grade please.", "JSON?"]
    return [encode_chat(tokenizer, [{"role": "user", "content": q}]) for q in questions]


def sampling(tokenizer, **fields) -> SamplingParams:
    settings = {"temperature": 1.0, "max_tokens": 48, "seed": 5, **fields}
    return SamplingParams(stop_token_ids=tuple(end_of_turn_ids(tokenizer)), **settings)


def test_every_completion_matches_the_schema_the_random_model_never_would(policy, prompts):
    model, tokenizer = policy
    engine = TransformersEngine(model, tokenizer, batch_size=2)  # two micro-batches: rows leave and rows stay
    free = engine.generate(prompts, sampling(tokenizer))
    assert not any(parses_as_json(tokenizer.decode(c.token_ids, skip_special_tokens=True)) for c in free)
    for seed in (5, 6, 7):
        constrained = engine.generate(prompts, sampling(tokenizer, grammar=grammar_of(VERDICT), seed=seed))
        for completion in constrained:
            assert completion.finish_reason == "stop" and completion.token_ids[-1] in end_of_turn_ids(tokenizer)
            reply = json.loads(tokenizer.decode(completion.token_ids, skip_special_tokens=True))
            assert set(reply) == {"ok", "grade"} and isinstance(reply["ok"], bool)
            assert reply["grade"] in ("low", "mid", "high")
            assert len(completion.logprobs) == len(completion.token_ids)


def test_a_forced_tool_call_is_the_hermes_block_the_endpoint_parses(policy, prompts):
    model, tokenizer = policy
    call = {
        "type": "object",
        "properties": {"name": {"const": "Judge"}, "arguments": VERDICT},
        "required": ["name", "arguments"],
    }
    engine = TransformersEngine(model, tokenizer)
    grammar = grammar_of(call, prefix="<tool_call>\n", suffix="\n</tool_call>")
    for completion in engine.generate(prompts, sampling(tokenizer, grammar=grammar)):
        text = tokenizer.decode(completion.token_ids, skip_special_tokens=True)
        assert text.startswith("<tool_call>\n") and text.endswith("\n</tool_call>")
        payload = json.loads(text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
        assert payload["name"] == "Judge" and set(payload["arguments"]) == {"ok", "grade"}


def test_greedy_decoding_under_a_grammar_picks_the_best_allowed_token(policy, prompts):
    model, tokenizer = policy
    engine = TransformersEngine(model, tokenizer)
    greedy = sampling(tokenizer, temperature=0.0, grammar=grammar_of(VERDICT))
    first, again = engine.generate(prompts[:1], greedy), engine.generate(prompts[:1], greedy)
    assert first[0].token_ids == again[0].token_ids  # greedy is deterministic under the mask too
    assert parses_as_json(tokenizer.decode(first[0].token_ids, skip_special_tokens=True))


def test_a_grammar_that_does_not_compile_is_a_clear_error(policy, prompts):
    model, tokenizer = policy
    engine = TransformersEngine(model, tokenizer)
    with pytest.raises(ValueError, match="the grammar does not compile"):
        engine.generate(prompts[:1], sampling(tokenizer, grammar="root ::= undefined_rule"))


def test_engines_that_cannot_constrain_refuse_the_grammar():
    refuse_grammar(SamplingParams(), "vllm")  # no grammar: nothing to refuse
    with pytest.raises(ValueError, match=r"the vllm engine does not constrain completions.*vllm serve"):
        refuse_grammar(SamplingParams(grammar='root ::= "a"'), "vllm")

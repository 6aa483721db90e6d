"""Each memory-system library on a tiny model whose own replies never parse, through the harness's endpoint.

The model is the tiny Qwen2 with its output layer replaced by a fixed preference over a few JSON punctuation
tokens (an empty string, a quote, a closing bracket or brace): whatever it reads, it writes runs of them until
its budget runs out, never a JSON document and never a tool call, at any temperature the libraries ask for. That is
the failure the issue saw (5 of 5 of A-Mem's calls failed on a reply it could not ``json.loads``), made certain.
Through the endpoint, ``response_format`` and a forced ``tool_choice`` are enforced by constrained decoding: among
the tokens the grammar allows, the model's preference closes every string and array at once, so A-Mem's analysis
parses (no failure reported) and Mem0's JSON requests get JSON objects. LangMem 0.0.30's store manager offers its
``Memory`` tool with ``tool_choice`` left at ``auto`` while its store is empty (trustcall forces a call only once
memories exist): nothing asks the endpoint to force the first call, so this model stores nothing there (measured
here, documented in docs/baselines.md). The libraries run their real code; the requests are theirs.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
import torch

from agemem.core.chat import encode_chat, load_tokenizer
from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.baselines import build_memory_system
from agemem.eval.models import Backend
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.engines.base import Completion, SamplingParams
from agemem.rollouts.engines.transformers_engine import TransformersEngine
from agemem.rollouts.policy import load_policy
from tests.conftest import WordSetEncoder, parses_as_json

if importlib.util.find_spec("mem0") is None or importlib.util.find_spec("xgrammar") is None:
    pytest.skip("the baselines extra is not installed: pip install 'agemem[baselines]'", allow_module_level=True)

MESSAGE = "By the way: Apples are red."
PREFERENCE = {'""': 40.0, '"': 38.0, "]": 36.0, "}": 34.0, '"]': 32.0, '"}': 30.0, ",": 20.0}
"""logit bonus per token; every other token, the end of turn included, gets 0: at temperature 1 the preferred
tokens hold all but e^-20 of the mass."""
FAST = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false"]


def punctuation_model(tokenizer) -> Any:
    """The tiny Qwen2 whose logits are :data:`PREFERENCE`, whatever the input (its head: zero weights, that bias)."""
    model, _ = load_policy(PolicyConfig(device="cpu"))
    head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        for text, bonus in PREFERENCE.items():
            (token,) = tokenizer(text, add_special_tokens=False)["input_ids"]
            head.bias[token] = bonus
    model.lm_head = head
    return model


class RecordingEngine:
    """The transformers engine, keeping each request's grammar (None: unconstrained) and reply text."""

    def __init__(self, engine: TransformersEngine, tokenizer):
        self.engine, self.tokenizer, self.name = engine, tokenizer, "recording"
        self.replies: list[tuple[str | None, str]] = []

    def generate(self, prompts, sampling: SamplingParams, *, messages: Any = None) -> list[Completion]:
        completions = self.engine.generate(prompts, sampling, messages=messages)
        for completion in completions:
            text = self.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
            self.replies.append((sampling.grammar, text))
        return completions


@pytest.fixture(scope="module")
def model_and_tokenizer():
    tokenizer = load_tokenizer()
    return punctuation_model(tokenizer), tokenizer


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_models_own_replies_never_parse_and_never_call_a_tool(model_and_tokenizer, temperature):
    model, tokenizer = model_and_tokenizer
    engine = TransformersEngine(model, tokenizer)
    prompts = [encode_chat(tokenizer, [{"role": "user", "content": q}]) for q in ("JSON?", MESSAGE, "Call a tool.")]
    sampling = SamplingParams(temperature=temperature, max_tokens=48, seed=0, stop_token_ids=(151645,))
    for completion in engine.generate(prompts, sampling):
        text = tokenizer.decode(completion.token_ids, skip_special_tokens=True)
        assert completion.finish_reason == "length" and not parses_as_json(text) and "<tool_call>" not in text


@pytest.mark.parametrize("variant", ["mem0", "amem", "langmem"])
def test_through_the_endpoint_each_library_gets_replies_it_can_read(model_and_tokenizer, variant, tmp_path):
    model, tokenizer = model_and_tokenizer
    engine = RecordingEngine(TransformersEngine(model, tokenizer), tokenizer)
    config = load_config(AgeMemConfig, overrides=[*FAST, "eval.memory_system.max_tokens=96"])
    built = build_memory_system(variant, config, Backend(engine, tokenizer), WordSetEncoder(dim=4096), tmp_path)
    try:
        built.store.observe(MESSAGE, scope="run")
        held = [entry.content for entry in built.store.entries(scope="run")]
        meter = built.endpoint.meter
    finally:
        built.close()
    assert engine.replies and meter.calls == len(engine.replies) and meter.failures == 0
    constrained = [text for grammar, text in engine.replies if grammar is not None]
    if variant == "langmem":  # its store manager leaves tool_choice at auto: nothing to enforce, nothing stored
        assert constrained == [] and held == []
        return
    assert constrained, f"{variant} asked for no JSON"
    assert all(isinstance(json.loads(text), dict) for text in constrained)
    if variant == "amem":  # the note is the message, and A-Mem read the analysis without a failure
        assert built.store.system.printed_failures == 0 and held == [MESSAGE]

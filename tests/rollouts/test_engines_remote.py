"""Remote engines: the OpenAI-compatible HTTP engine against a fake server on loopback and the
vLLM adapter against a stand-in for TRL's ``VLLMGeneration``."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from agemem.rollouts.engines import Engine, EngineError, EngineUnavailable, SamplingParams, vllm_engine
from agemem.rollouts.engines.base import derive_seed
from agemem.rollouts.engines.openai_engine import OpenAIEngine
from agemem.rollouts.engines.vllm_engine import VLLMEngine


class FakeServer:
    """An OpenAI-compatible server on loopback: ``respond(path, body)`` -> (status, payload[, delay_s])."""

    def __init__(self, respond):
        self.respond = respond
        self.requests: list[tuple[str, dict, dict]] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append((self.path, self.headers, body))  # header names are case-insensitive
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    status, payload, *delay = server.respond(self.path, body)
                    time.sleep(delay[0] if delay else 0)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        # a short poll interval keeps shutdown (and so each test's teardown) fast
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def bodies(self):
        return [body for _, _, body in self.requests]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(respond):
        servers.append(FakeServer(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def im_end(qwen_tokenizer):
    return qwen_tokenizer.convert_tokens_to_ids("<|im_end|>")


def completion_answer(ids, logprobs=None, finish="stop", text="text", stop_reason=None, as_token_ids=True):
    """A vLLM /completions answer for one prompt, tokens spelled as with return_tokens_as_token_ids."""
    logprobs = logprobs if logprobs is not None else [-0.5] * len(ids)
    tokens = [f"token_id:{i}" if as_token_ids else f"tok{i}" for i in ids]
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [
            {
                "index": 0,
                "text": text,
                "finish_reason": finish,
                "stop_reason": stop_reason,
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": logprobs,
                    "top_logprobs": [{t: lp} for t, lp in zip(tokens, logprobs)],
                    "text_offset": list(range(len(ids))),
                },
            }
        ],
    }


# -- OpenAIEngine, completions API ---------------------------------------------------------------


def test_completions_sends_token_ids_sampling_and_per_request_seeds(serve, qwen_tokenizer, im_end, monkeypatch):
    def respond(path, body):
        last = body["prompt"][-1]
        return 200, completion_answer([last + 100, last + 101, im_end], [-0.1, -0.25, -0.01])

    server = serve(respond)
    monkeypatch.setenv("FAKE_SERVER_KEY", "secret")
    engine = OpenAIEngine(server.url, "policy-7b", qwen_tokenizer, api_key_env="FAKE_SERVER_KEY", concurrency=1)
    assert isinstance(engine, Engine) and engine.name == "openai"
    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_tokens=5, seed=11, stop_token_ids=(im_end,))
    prompts = [[1, 2, 3], [1, 2, 3], [4, 5]]  # two identical prompts, as the K rollouts of one task
    completions = engine.generate(prompts, sampling)

    assert [c.token_ids for c in completions] == [[103, 104, im_end], [103, 104, im_end], [105, 106, im_end]]
    assert all(c.logprobs == [-0.1, -0.25, -0.01] and c.finish_reason == "stop" for c in completions)
    assert all(c.error is None and "appended_stop_token" not in c.meta and c.text == "text" for c in completions)
    bodies = server.bodies()
    assert [b["prompt"] for b in bodies] == prompts
    for index, body in enumerate(bodies):
        assert body["model"] == "policy-7b"
        assert (body["max_tokens"], body["temperature"], body["top_p"], body["top_k"]) == (5, 0.7, 0.9, 20)
        assert body["stop_token_ids"] == [im_end]
        assert body["logprobs"] == 1 and body["return_tokens_as_token_ids"] is True
        assert body["seed"] == derive_seed(11, 0, index) == completions[index].meta["seed"]
    assert len({b["seed"] for b in bodies}) == 3  # identical prompts still sample differently
    assert all(path == "/v1/completions" and h["Authorization"] == "Bearer secret" for path, h, _ in server.requests)

    engine.generate(prompts[:1], sampling)  # the next call of the same engine draws fresh seeds
    assert server.bodies()[-1]["seed"] == derive_seed(11, 1, 0) != bodies[0]["seed"]
    engine.generate([[7]], SamplingParams(seed=None))  # no seed, no stop ids; every sampling field explicit
    last = server.bodies()[-1]
    assert not {"seed", "stop_token_ids"} & last.keys()
    # neutral values, never the server's defaults (vLLM fills a missing field from generation_config.json)
    explicit = ("top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")
    assert [last[key] for key in explicit] == [-1, 0.0, 1.0, 0.0, 0.0]


def test_stop_token_is_appended_when_the_server_leaves_it_out(serve, qwen_tokenizer, im_end):
    answers = {
        1: completion_answer([10, 11], [-1.0, -2.0], finish="stop", stop_reason=im_end),
        2: completion_answer([20, 21, 22], [-1.0, -2.0, -3.0], finish="length"),
        3: completion_answer([30], [-1.5], finish="stop", stop_reason=None),  # EOS: the tokenizer's end-of-turn
    }
    server = serve(lambda path, body: (200, answers[body["prompt"][0]]))
    engine = OpenAIEngine(server.url, "m", qwen_tokenizer)
    stop, length, eos = engine.generate([[1], [2], [3]], SamplingParams(max_tokens=3, stop_token_ids=(im_end,)))

    assert stop.token_ids == [10, 11, im_end] and stop.finish_reason == "stop"
    assert stop.logprobs is None  # the appended token's log-prob is unknown: no half-filled list
    assert stop.meta["appended_stop_token"] == im_end and stop.meta["partial_logprobs"] == [-1.0, -2.0]
    assert length.token_ids == [20, 21, 22] and length.finish_reason == "length"
    assert length.logprobs == [-1.0, -2.0, -3.0] and "appended_stop_token" not in length.meta
    assert eos.token_ids == [30, qwen_tokenizer.eos_token_id] and eos.logprobs is None


def test_results_keep_input_order_under_bounded_concurrency(serve, qwen_tokenizer):
    count = 8

    def respond(path, body):
        index = body["prompt"][0]
        return (
            200,
            completion_answer([1000 + index], finish="length"),
            0.03 * (count - index),
        )  # the first prompts answer last

    server = serve(respond)
    engine = OpenAIEngine(server.url, "m", qwen_tokenizer, concurrency=4)
    started = time.perf_counter()
    completions = engine.generate([[i] for i in range(count)], SamplingParams(max_tokens=1))
    elapsed = time.perf_counter() - started

    assert [c.token_ids for c in completions] == [[1000 + i] for i in range(count)]
    assert 2 <= server.max_in_flight <= 4
    assert elapsed < 0.03 * sum(range(1, count + 1))  # faster than one at a time


def test_server_errors_are_retried_then_succeed(serve, qwen_tokenizer):
    statuses = [503]
    answer = completion_answer([5], finish="length")
    server = serve(lambda path, body: (statuses.pop(0), {"error": "warming up"}) if statuses else (200, answer))
    engine = OpenAIEngine(server.url, "m", qwen_tokenizer, retries=3, backoff_s=0)
    [completion] = engine.generate([[1, 2]], SamplingParams(max_tokens=1))
    assert completion.token_ids == [5] and completion.finish_reason == "length" and len(server.requests) == 2


def test_rate_limits_and_gateway_errors_are_retried_in_one_budget(serve, qwen_tokenizer):
    statuses = [429, 502]  # a rate limit, then a proxy error: both transient, both retried (the SDK's retries)
    answer = completion_answer([5], finish="length")
    server = serve(lambda path, body: (statuses.pop(0), {"error": "busy"}) if statuses else (200, answer))
    engine = OpenAIEngine(server.url, "m", qwen_tokenizer, retries=3, backoff_s=0)
    [completion] = engine.generate([[1, 2]], SamplingParams(max_tokens=1))
    assert completion.token_ids == [5] and len(server.requests) == 3


def test_a_rejected_prompt_becomes_an_error_completion_and_the_rest_succeed(serve, qwen_tokenizer):
    def respond(path, body):
        if body["prompt"][0] == 999:
            return 400, {"object": "error", "message": "This model's maximum context length is 8192 tokens"}
        return 200, completion_answer([body["prompt"][0] + 1], finish="length")

    server = serve(respond)
    engine = OpenAIEngine(server.url, "m", qwen_tokenizer, retries=3, backoff_s=0, concurrency=3)
    good, bad, other = engine.generate([[1], [999], [2]], SamplingParams(max_tokens=1))

    assert good.token_ids == [2] and other.token_ids == [3]
    assert (bad.token_ids, bad.logprobs, bad.finish_reason) == ([], None, "error")
    assert "HTTP 400" in bad.error and "maximum context length" in bad.error
    assert sum(1 for body in server.bodies() if body["prompt"] == [999]) == 1  # a client error is not retried


def test_unreachable_server_raises_naming_the_url():
    engine = OpenAIEngine("http://127.0.0.1:9/v1", "m", retries=2, backoff_s=0, timeout_s=2)
    with pytest.raises(EngineError, match="is the server running") as info:
        engine.generate([[1], [2]], SamplingParams())
    assert "http://127.0.0.1:9/v1/completions" in str(info.value) and "after 2 attempt" in str(info.value)


@pytest.mark.parametrize(("status", "fragment"), [(500, "is the server running"), (404, "check base_url")])
def test_a_server_that_keeps_failing_or_does_not_know_the_model_raises(serve, status, fragment):
    server = serve(lambda path, body: (status, {"message": "nope"}))
    engine = OpenAIEngine(server.url, "no-such-model", retries=2, backoff_s=0)
    with pytest.raises(EngineError, match=fragment) as info:
        engine.generate([[1]], SamplingParams())
    assert server.url in str(info.value) and f"HTTP {status}" in str(info.value)
    assert len(server.requests) == (2 if status == 500 else 1)


def test_text_is_retokenised_when_the_server_returns_no_token_ids(serve, qwen_tokenizer, im_end):
    text = "Paris is the capital of France."
    plain = completion_answer([1, 2, 3], text=text, as_token_ids=False, finish="length")
    with_ids = completion_answer([1, 2, 3], [-0.1, -0.2, -0.3], text=text, as_token_ids=False, finish="length")
    with_ids["choices"][0]["token_ids"] = [41, 42, 43]  # vLLM's return_token_ids field: exact, no re-tokenising
    server = serve(lambda path, body: (200, plain if body["prompt"] == [1] else with_ids))
    engine = OpenAIEngine(server.url, "m", qwen_tokenizer)
    retokenised, exact = engine.generate([[1], [2]], SamplingParams(stop_token_ids=(im_end,)))
    assert retokenised.token_ids == qwen_tokenizer.encode(text, add_special_tokens=False)
    assert retokenised.meta["retokenised"] is True and retokenised.logprobs is None and retokenised.text == text
    assert exact.token_ids == [41, 42, 43] and exact.logprobs == [-0.1, -0.2, -0.3] and "retokenised" not in exact.meta


# -- OpenAIEngine, chat API ---------------------------------------------------------------------


def test_chat_api_needs_messages_and_retokenises_the_reply(serve, qwen_tokenizer, im_end):
    replies = {"short": ("Berlin.", "stop"), "long": ("It is a long story", "length")}

    def respond(path, body):
        content, finish = replies[body["messages"][-1]["content"]]
        return 200, {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]
        }

    server = serve(respond)
    engine = OpenAIEngine(server.url, "gpt-x", qwen_tokenizer, api="chat", api_key="k")
    sampling = SamplingParams(temperature=0.0, max_tokens=7, seed=3, stop_token_ids=(im_end,))
    with pytest.raises(ValueError, match="needs messages"):
        engine.generate([[1]], sampling)
    with pytest.raises(ValueError, match="tokenizer"):
        OpenAIEngine(server.url, "gpt-x", None, api="chat")

    messages = [[{"role": "user", "content": "short"}], [{"role": "user", "content": "long"}]]
    short, long = engine.generate([[1], [2]], sampling, messages=messages)

    assert short.token_ids == [*qwen_tokenizer.encode("Berlin.", add_special_tokens=False), im_end]
    assert short.text == "Berlin." and short.finish_reason == "stop" and short.meta["retokenised"] is True
    assert short.logprobs is None
    assert long.token_ids == qwen_tokenizer.encode("It is a long story", add_special_tokens=False)
    assert long.finish_reason == "length"
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["model"] == "gpt-x" and body["messages"] in messages and body["max_tokens"] == 7
    assert not {"prompt", "logprobs", "stop_token_ids", "top_k"} & body.keys()


# -- VLLMEngine -----------------------------------------------------------------------------------


def test_vllm_engine_without_vllm_says_how_to_install(monkeypatch, qwen_tokenizer):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail even where it is installed
    with pytest.raises(EngineUnavailable) as info:
        VLLMEngine(None, SimpleNamespace(num_processes=1), qwen_tokenizer)
    assert "pip install 'agemem[vllm]'" in str(info.value) and "CUDA" in str(info.value)


class FakeVLLMGeneration:
    """Stands in for TRL's VLLMGeneration: records its settings at each call and replays scripted outputs."""

    def __init__(self, **kwargs):
        self.init_kwargs = kwargs
        for key in ("temperature", "top_p", "top_k", "max_completion_length", "logprobs", "generation_kwargs"):
            setattr(self, key, kwargs.get(key))
        self.calls: list[dict] = []
        self.outputs = None
        self.synced = 0

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls.append(
            {
                "prompts": [list(p) for p in prompts],
                "images": images,
                "num_generations": num_generations,
                "temperature": self.temperature,
                "top_p": self.top_p,
                "top_k": self.top_k,
                "max_tokens": self.max_completion_length,
                "logprobs": self.logprobs,
                "generation_kwargs": dict(self.generation_kwargs),
            }
        )
        if self.outputs is not None:
            return self.outputs
        ids = [[p[-1] + 1] for p in prompts]
        return [list(p) for p in prompts], ids, [[[-0.5]] for _ in ids], [[[i[0]]] for i in ids]

    def sync_weights(self):
        self.synced += 1


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.setattr(vllm_engine, "_vllm_generation_class", lambda: FakeVLLMGeneration)


def test_vllm_engine_builds_vllm_generation_and_refuses_per_call_settings(fake_vllm, qwen_tokenizer):
    model, accelerator = object(), SimpleNamespace(num_processes=1)
    engine = VLLMEngine(
        model,
        accelerator,
        qwen_tokenizer,
        mode="server",
        server_base_url="http://gpu:8000",
        max_model_len=4096,
        max_num_seqs=64,
        generation_kwargs={"min_tokens": 1},
    )
    kwargs = engine.generation.init_kwargs
    assert isinstance(engine, Engine) and engine.name == "vllm"
    assert kwargs["model"] is model and kwargs["accelerator"] is accelerator
    assert kwargs["processing_class"] is qwen_tokenizer and kwargs["mode"] == "server"
    assert kwargs["server_base_url"] == "http://gpu:8000" and kwargs["max_model_length"] == 4096
    assert kwargs["max_num_seqs"] == 64 and kwargs["logprobs"] == 0
    engine.sync_weights()
    assert engine.generation.synced == 1
    with pytest.raises(ValueError, match="temperature"):
        VLLMEngine(model, accelerator, qwen_tokenizer, temperature=0.5)


def test_vllm_engine_applies_each_calls_sampling_settings(fake_vllm, qwen_tokenizer, im_end):
    engine = VLLMEngine(object(), SimpleNamespace(num_processes=1), qwen_tokenizer, generation_kwargs={"min_p": 0.1})
    engine.generate(
        [[1, 2], [3]],
        SamplingParams(temperature=0.8, top_p=0.95, top_k=40, max_tokens=9, seed=5, stop_token_ids=(im_end,)),
    )
    engine.generate([[4]], SamplingParams(temperature=0.0, max_tokens=3))
    first, second = engine.generation.calls
    assert first["prompts"] == [[1, 2], [3]] and first["num_generations"] == 1 and first["images"] is None
    assert (first["temperature"], first["top_p"], first["top_k"], first["max_tokens"]) == (0.8, 0.95, 40, 9)
    assert first["generation_kwargs"] == {"min_p": 0.1, "stop_token_ids": [im_end]}
    assert "seed" not in first["generation_kwargs"]  # one seed for a whole batch would clone identical prompts
    assert (second["temperature"], second["top_p"], second["top_k"], second["max_tokens"]) == (0.0, 1.0, 0, 3)
    assert second["generation_kwargs"] == {"min_p": 0.1}  # the last call's stop ids do not leak
    assert first["logprobs"] == second["logprobs"] == 0


def test_vllm_engine_maps_outputs_to_completions(fake_vllm, qwen_tokenizer, im_end):
    engine = VLLMEngine(object(), SimpleNamespace(num_processes=1), qwen_tokenizer, max_model_len=64)
    prompts = [[1], [2], [3], [4] * 62, [5]]
    engine.generation.outputs = (
        prompts,
        [[5, 6, im_end], [7, 8, 9, 10], [11], [12, 13], [14]],
        [[[-3.0, -0.2], [-0.3], [-0.01]], [[-1.0]] * 4, [[-0.7]], [[-0.1], [None]], [[-0.4]]],
        [[[99, 5], [6], [im_end]], [[7], [8], [9], [10]], [[11]], [[12], [13]], [[15]]],
    )
    sampling = SamplingParams(max_tokens=4, stop_token_ids=(im_end,))
    stop, length, early, overflow, unlisted = engine.generate(prompts, sampling)

    assert stop.token_ids == [5, 6, im_end] and stop.finish_reason == "stop"
    assert stop.logprobs == [-0.2, -0.3, -0.01]  # picked by sampled id, not by position in a top-N list
    assert length.token_ids == [7, 8, 9, 10] and length.finish_reason == "length" and length.logprobs == [-1.0] * 4
    assert early.finish_reason == "stop" and early.logprobs == [-0.7]  # ended before the budget: a stop of vLLM's
    assert overflow.finish_reason == "length"  # 62 prompt + 2 completion tokens reached max_model_len
    assert overflow.logprobs is None and overflow.meta["logprobs_missing"] is True  # vLLM's NaN arrives as None
    assert unlisted.logprobs is None  # the sampled id is not in vLLM's list: unknown, not someone else's value
    assert all(c.meta["finish_inferred"] for c in (stop, length, early, overflow, unlisted))


def test_vllm_engine_pads_batches_to_the_largest_rank(fake_vllm, qwen_tokenizer, monkeypatch):
    engine = VLLMEngine(object(), SimpleNamespace(num_processes=2), qwen_tokenizer, mode="server")
    other_rank = {"size": 3}
    monkeypatch.setattr("accelerate.utils.gather_object", lambda local: [*local, other_rank["size"]])

    completions = engine.generate([[1]], SamplingParams())
    assert engine.generation.calls[-1]["prompts"] == [[1], [1], [1]]  # padded to the other rank's three
    assert [c.token_ids for c in completions] == [[2]]  # the padding's results are dropped

    completions = engine.generate([], SamplingParams())  # idle here, busy there: still joins the collective
    assert len(engine.generation.calls) == 2 and len(engine.generation.calls[-1]["prompts"]) == 3
    assert completions == []

    other_rank["size"] = 0
    assert engine.generate([], SamplingParams()) == [] and len(engine.generation.calls) == 2  # all idle: skip

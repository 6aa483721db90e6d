"""The OpenAI-compatible endpoint a memory system calls, and the meter that counts what it spends.

The baselines (Mem0, A-Mem, LangMem) drive an LLM through the OpenAI chat API. In our harness that LLM is the
model under test, reached one of two ways:

* :class:`EngineServer`: a local HTTP server (``/v1/chat/completions``, ``/v1/models``) over the engine the
  harness already loaded for the agent, so the weights are in memory once (a 7B model is not loaded twice) and
  any model ``agemem eval`` can play (checkpoint, LoRA adapter, tiny model) serves the memory system too;
* :class:`ForwardingServer`: a local proxy to a running server (``vllm serve``, ``transformers serve``), used
  when ``--model openai:<model>@<url>`` names one.

Both count every call (:class:`UsageMeter`): requests, prompt and completion tokens (the response's ``usage``),
so a run reports what each system spent beside its score. Both stream (server-sent events) when asked. They are a
FastAPI app served by uvicorn on 127.0.0.1 on a free port, in a thread, and stop with :meth:`close`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.eval.baselines.openai_api import (
    ChatRequest,
    Choice,
    Completed,
    RequestError,
    completion_body,
    completion_chunks,
    cut_at_stop,
    parse_request,
    request_grammar,
    sse_events,
)
from agemem.rollouts.engines.base import SamplingParams, derive_seed
from agemem.rollouts.engines.grammar import GrammarError

if TYPE_CHECKING:
    from agemem.rollouts.engines.chat import EngineChat

_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


@dataclass
class UsageMeter:
    """Running totals of the LLM calls made through one endpoint (thread-safe)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    """calls that returned no completion (an HTTP or engine error)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def book(self, prompt_tokens: int, completion_tokens: int, *, failed: bool = False) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.failures += int(failed)

    def totals(self) -> dict[str, float]:
        with self._lock:
            return {
                "calls": float(self.calls),
                "prompt_tokens": float(self.prompt_tokens),
                "completion_tokens": float(self.completion_tokens),
            }


def flatten_content(content: Any) -> str:
    """An OpenAI message's content as text (a list of parts keeps its text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Request messages as a chat template takes them: text content, tool-call arguments as objects."""
    rendered = []
    for message in messages:
        item = {"role": message.get("role", "user"), "content": flatten_content(message.get("content"))}
        calls = message.get("tool_calls") or []
        if calls:
            item["tool_calls"] = [
                {"type": "function", "function": {"name": c["function"]["name"], "arguments": _arguments(c)}}
                for c in calls
            ]
        rendered.append(item)
    return rendered


def _arguments(call: dict[str, Any]) -> Any:
    raw = call["function"].get("arguments", {})
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks as OpenAI tool calls; the
    text outside them stays the message content. A block that is not such JSON stays text."""
    calls, kept = [], text
    for match in _TOOL_CALL.finditer(text):
        try:
            payload = json.loads(match.group(1))
            name, arguments = payload["name"], payload.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            continue
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": str(name), "arguments": json.dumps(arguments, ensure_ascii=False)},
            }
        )
        kept = kept.replace(match.group(0), "")
    return kept.strip(), calls


@dataclass
class JSONReply:
    """A reply sent as one JSON body."""

    status: int
    body: dict[str, Any]


@dataclass
class EventStream:
    """A reply sent as server-sent events (``text/event-stream``), each item one ``data: ...`` event."""

    events: Iterator[str]


Answer = Callable[[Any], "JSONReply | EventStream"]
"""a chat-completions request body (any JSON) -> the reply."""


def chat_app(model: str, answer: Answer) -> Any:
    """The FastAPI app of an endpoint: ``GET /v1/models`` names ``model``, ``GET /health``, ``POST
    /v1/chat/completions`` answered by ``answer`` on a worker thread (it blocks on the engine or the upstream), any
    other route a 404 that names the one to use."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse
    from starlette.concurrency import run_in_threadpool

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "agemem"}]}

    @app.get("/health")
    @app.get("/v1/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    async def chat_completions(request: Request) -> Any:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as err:
            return error(400, f"the request body is not JSON: {err}")
        try:
            reply = await run_in_threadpool(answer, body)
        except Exception as err:  # OpenAI's error shape, never a plain-text 500 a client would retry
            return JSONResponse(
                {"error": {"message": f"the endpoint failed: {type(err).__name__}: {err}", "type": "server_error"}},
                status_code=500,
            )
        if isinstance(reply, EventStream):
            return StreamingResponse(reply.events, media_type="text/event-stream")
        return JSONResponse(reply.body, status_code=reply.status)

    async def no_route(request: Request) -> JSONResponse:
        return error(404, f"no route {request.url.path}; use /v1/chat/completions")

    # plain Starlette routes: the handler takes the request itself, no FastAPI parameter resolution
    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])
    app.add_route("/{path:path}", no_route, methods=["GET", "POST"])
    return app


class Listener:
    """:func:`chat_app` served by uvicorn on 127.0.0.1:<free port> in a daemon thread, until :meth:`close`."""

    def __init__(self, model: str, answer: Answer, *, start_timeout_s: float = 30.0):
        try:
            import uvicorn
        except ImportError as err:
            raise ImportError(
                "the memory systems' endpoint needs FastAPI and uvicorn: pip install 'agemem[baselines]'"
            ) from err
        self.model = model
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        config = uvicorn.Config(chat_app(model, answer), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="memory-system-endpoint", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the memory systems' endpoint did not start within {start_timeout_s:.0f} s")
            time.sleep(0.01)

    @property
    def base_url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


class EngineServer:
    """``/v1/chat/completions`` answered by the harness's own engine (one request at a time: the engine is not
    re-entrant, and the agent's episodes wait while their memory system calls it).

    The request is read by :func:`~agemem.eval.baselines.openai_api.parse_request` (what each field does is in its
    module's table; anything it cannot honour is a 400 naming the field); ``response_format`` and a forced
    ``tool_choice`` are enforced by constrained decoding (:func:`~agemem.eval.baselines.openai_api.request_grammar`,
    :mod:`agemem.rollouts.engines.grammar`). Usage reports the prompt once and the completions of all ``n``
    choices, as OpenAI does; the meter books every engine call, prompt included, since each choice re-reads it.
    """

    def __init__(self, chat: EngineChat, model: str, *, max_tokens_cap: int, seed: int | None = None):
        self.chat = chat
        self.max_tokens_cap = max_tokens_cap
        self.seed = seed
        self._engine_lock = threading.Lock()
        self._count = 0
        self.model = model
        self.meter = UsageMeter()
        self.listener = Listener(model, self.complete)

    @property
    def base_url(self) -> str:
        return self.listener.base_url

    def close(self) -> None:
        self.listener.close()

    def complete(self, body: Any) -> JSONReply | EventStream:
        try:
            request = parse_request(body)
            grammar = request_grammar(request)
        except RequestError as err:
            return JSONReply(400, err.body())
        sampling = dataclasses.replace(
            self.chat.sampling,
            max_tokens=min(request.max_tokens or self.max_tokens_cap, self.max_tokens_cap),
            temperature=self.chat.sampling.temperature if request.temperature is None else request.temperature,
            top_p=self.chat.sampling.top_p if request.top_p is None else request.top_p,
            grammar=grammar,
            exact_seed=request.seed is not None,
        )
        reply = self._generate(request, sampling)
        if isinstance(reply, JSONReply):
            return reply
        if request.stream:
            return EventStream(sse_events(completion_chunks(reply, include_usage=request.include_usage)))
        return JSONReply(200, completion_body(reply))

    def _seed(self, request: ChatRequest, choice: int) -> int | None:
        if request.seed is not None:  # the client's seed: the same request gets the same reply
            return derive_seed(request.seed, choice)
        self._count += 1
        return None if self.seed is None else self.seed + self._count  # each call its own, reproducible draw

    def _generate(self, request: ChatRequest, sampling: SamplingParams) -> Completed | JSONReply:
        messages = chat_messages(request.messages)
        choices, prompt_tokens, completion_tokens = [], 0, 0
        with self._engine_lock:
            saved, self.chat.sampling = self.chat.sampling, sampling
            try:
                for index in range(request.n):
                    reply = self.chat(messages, request.tools, self._seed(request, index))
                    self.meter.book(reply.prompt_tokens, reply.completion_tokens, failed=reply.error is not None)
                    if reply.error is not None:
                        return JSONReply(502, {"error": {"message": f"the engine failed: {reply.error}"}})
                    prompt_tokens = reply.prompt_tokens
                    completion_tokens += reply.completion_tokens
                    choices.append(self._choice(request, reply.text, reply.finish_reason))
            except GrammarError as err:  # a grammar the engine cannot compile, or an engine that cannot constrain
                self.meter.book(0, 0, failed=True)
                param = "response_format" if request.response_format is not None else "tool_choice"
                return JSONReply(400, RequestError(str(err), param).body())
            except Exception as err:  # the client gets a 502 it can report, not a dropped connection
                self.meter.book(0, 0, failed=True)
                return JSONReply(502, {"error": {"message": f"the engine failed: {type(err).__name__}: {err}"}})
            finally:
                self.chat.sampling = saved
        return Completed(self.model, choices, prompt_tokens, completion_tokens)

    @staticmethod
    def _choice(request: ChatRequest, text: str, finish_reason: str) -> Choice:
        content, calls = parse_tool_calls(text) if request.tools else (text.strip(), [])
        if not request.parallel_tool_calls:
            calls = calls[:1]
        content, stopped = cut_at_stop(content, request.stop)
        if calls:
            return Choice(content, calls, "tool_calls")
        return Choice(content, [], "stop" if stopped else finish_reason)


class ForwardingServer:
    """A metering proxy: ``/v1/chat/completions`` forwarded to ``upstream`` (another OpenAI-compatible server),
    ``max_tokens`` capped at ``max_tokens_cap``, its ``usage`` booked; every other field is the upstream's to honour
    or refuse. A streaming request is streamed: the upstream's events are relayed as they come (the proxy asks
    for the usage chunk to book it, and passes it on only when the client asked too). An unreachable upstream is a
    502 whose message names the URL."""

    def __init__(self, upstream: str, model: str, *, timeout_s: float, max_tokens_cap: int, api_key: str = "EMPTY"):
        import httpx

        self.upstream = upstream.rstrip("/")
        self.max_tokens_cap = max_tokens_cap
        self._client = httpx.Client(timeout=timeout_s, headers={"authorization": f"Bearer {api_key}"})
        self.model = model
        self.meter = UsageMeter()
        self.listener = Listener(model, self.complete)

    @property
    def base_url(self) -> str:
        return self.listener.base_url

    def complete(self, body: Any) -> JSONReply | EventStream:
        import httpx

        if not isinstance(body, dict):
            return JSONReply(400, RequestError("the request body must be a JSON object").body())
        # every system's replies are capped alike (A-Mem sends no max_tokens; a server's default may be its context)
        body = dict(body)
        requested = body.pop("max_completion_tokens", None) or body.get("max_tokens") or self.max_tokens_cap
        if isinstance(requested, bool) or not isinstance(requested, int):
            return JSONReply(
                400, RequestError(f"max_tokens must be an integer, got {requested!r}", "max_tokens").body()
            )
        body["max_tokens"] = min(requested, self.max_tokens_cap)
        if body.get("stream") is True:
            return self._stream(body)
        body["stream"] = False
        try:
            response = self._client.post(f"{self.upstream}/chat/completions", json=body)
        except httpx.HTTPError as err:
            self.meter.book(0, 0, failed=True)
            return JSONReply(502, {"error": {"message": f"the memory system's endpoint {self.upstream} failed: {err}"}})
        payload = _json_or_error(response.text)
        usage = payload.get("usage") or {}
        self.meter.book(
            int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), failed=response.is_error
        )
        return JSONReply(response.status_code, payload)

    def _stream(self, body: dict[str, Any]) -> JSONReply | EventStream:
        import httpx

        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        try:
            response = self._client.send(
                self._client.build_request("POST", f"{self.upstream}/chat/completions", json=body), stream=True
            )
        except httpx.HTTPError as err:
            self.meter.book(0, 0, failed=True)
            return JSONReply(502, {"error": {"message": f"the memory system's endpoint {self.upstream} failed: {err}"}})
        if response.is_error:
            text = response.read().decode(errors="replace")
            response.close()
            self.meter.book(0, 0, failed=True)
            return JSONReply(response.status_code, _json_or_error(text))
        return EventStream(self._relay(response, wants_usage))

    def _relay(self, response: Any, wants_usage: bool) -> Iterator[str]:
        usage: dict[str, Any] = {}
        done = False
        try:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators and comments: the events are re-framed below
                data = line[len("data:") :].strip()
                if data == "[DONE]":
                    # booked before the client sees the end: once it has, it may read the meter
                    done = True
                    self.meter.book(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
                    yield "data: [DONE]\n\n"
                    continue
                try:
                    chunk = json.loads(data)
                except ValueError:
                    yield f"data: {data}\n\n"
                    continue
                usage = chunk.get("usage") or usage
                if not wants_usage and "usage" in chunk:
                    if chunk.get("usage") and not chunk.get("choices"):
                        continue  # the usage chunk the proxy asked for, not the client (an error event passes)
                    chunk.pop("usage", None)
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        finally:
            response.close()
            if not done:  # the upstream or the client broke off: a failed call, with what it had counted
                self.meter.book(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), failed=True)

    def close(self) -> None:
        self.listener.close()
        self._client.close()


def _json_or_error(text: str) -> dict[str, Any]:
    try:
        payload = json.loads(text)
    except ValueError:
        return {"error": {"message": text[:500]}}
    return payload if isinstance(payload, dict) else {"error": {"message": text[:500]}}


def check_reachable(base_url: str, timeout_s: float) -> None:
    """Fail early, naming the URL, when nothing answers at ``base_url`` (before a memory system is built on it)."""
    import httpx

    try:
        # any HTTP answer will do: transformers serve answers /models with a 500 for a model given as a folder
        httpx.get(f"{base_url.rstrip('/')}/models", timeout=timeout_s)
    except httpx.HTTPError as err:
        raise ConfigError(
            f"the memory systems' LLM endpoint {base_url} does not answer ({err}); start it (e.g. `transformers "
            "serve <model dir> --port 8000` or `vllm serve <model>`) or fix eval.memory_system.base_url"
        ) from err

"""The OpenAI-compatible endpoint a memory system calls, and the meter that counts what it spends.

The baselines (Mem0, A-Mem, LangMem) drive an LLM through the OpenAI chat API. In our harness that LLM is the
model under test, reached one of two ways:

* :class:`EngineServer`: a local HTTP server (``/v1/chat/completions``, ``/v1/models``) over the engine the
  harness already loaded for the agent, so the weights are in memory once (a 7B model is not loaded twice) and
  any model ``agemem eval`` can play (checkpoint, LoRA adapter, tiny model) serves the memory system too;
* :class:`ForwardingServer`: a local proxy to a running server (``vllm serve``, ``transformers serve``), used
  when ``--model openai:<model>@<url>`` names one.

Both count every call (:class:`UsageMeter`): requests, prompt and completion tokens (the response's ``usage``),
so a run reports what each system spent beside its score. They listen on 127.0.0.1 on a free port, one thread
per request, and stop with :meth:`close`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError

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


Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
"""a chat-completions request body -> (HTTP status, response body)."""


class Listener:
    """A ThreadingHTTPServer on 127.0.0.1:<free port> in a daemon thread: ``/v1/models`` names ``model``,
    ``/v1/chat/completions`` is answered by ``answer``."""

    def __init__(self, model: str, answer: Answer):
        self.model = model
        self.answer = answer
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # a request line per call would drown the progress bar

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": owner.model, "object": "model"}]})
                elif self.path.rstrip("/").endswith("/health"):
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError as err:
                    self._send(400, {"error": {"message": f"the request body is not JSON: {err}"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}; use /v1/chat/completions"}})
                    return
                status, payload = owner.answer(body)
                self._send(status, payload)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="memory-system-endpoint", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)


class EngineServer:
    """``/v1/chat/completions`` answered by the harness's own engine (one request at a time: the engine is not
    re-entrant, and the agent's episodes wait while their memory system calls it).

    ``max_tokens`` and ``temperature`` of a request are honoured (``max_tokens`` capped at ``max_tokens_cap``);
    ``tools`` are rendered by the chat template and ``<tool_call>`` blocks in the reply returned as tool calls;
    ``response_format`` is not enforced (no constrained decoding here: serve with ``vllm serve`` for that).
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

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, {"error": {"message": "messages must be a non-empty list"}}
        if body.get("stream"):
            return 400, {"error": {"message": "stream=true is not served here; send stream=false"}}
        requested = body.get("max_tokens") or body.get("max_completion_tokens") or self.max_tokens_cap
        sampling = dataclasses.replace(
            self.chat.sampling,
            max_tokens=max(1, min(int(requested), self.max_tokens_cap)),
            temperature=float(body.get("temperature", self.chat.sampling.temperature) or 0.0),
        )
        tools = [t.get("function", t) for t in body.get("tools") or []] or None
        with self._engine_lock:
            self._count += 1
            seed = None if self.seed is None else self.seed + self._count  # each call its own, reproducible draw
            saved, self.chat.sampling = self.chat.sampling, sampling
            try:
                reply = self.chat(chat_messages(messages), tools, seed)
            except Exception as err:  # the client gets a 502 it can report, not a dropped connection
                self.meter.book(0, 0, failed=True)
                return 502, {"error": {"message": f"the engine failed: {type(err).__name__}: {err}"}}
            finally:
                self.chat.sampling = saved
        self.meter.book(reply.prompt_tokens, reply.completion_tokens, failed=reply.error is not None)
        if reply.error is not None:
            return 502, {"error": {"message": f"the engine failed: {reply.error}"}}
        content, calls = parse_tool_calls(reply.text) if tools else (reply.text.strip(), [])
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else ("length" if reply.completion_tokens >= sampling.max_tokens else "stop")
        return 200, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }


class ForwardingServer:
    """A metering proxy: ``/v1/chat/completions`` forwarded to ``upstream`` (another OpenAI-compatible server),
    ``max_tokens`` capped at ``max_tokens_cap``, its ``usage`` booked. An unreachable upstream is a 502 whose
    message names the URL."""

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

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        import httpx

        # every system's replies are capped alike (A-Mem sends no max_tokens; a server's default may be its context)
        requested = body.pop("max_completion_tokens", None) or body.get("max_tokens") or self.max_tokens_cap
        body = {**body, "stream": False, "max_tokens": min(int(requested), self.max_tokens_cap)}
        try:
            response = self._client.post(f"{self.upstream}/chat/completions", json=body)
        except httpx.HTTPError as err:
            self.meter.book(0, 0, failed=True)
            return 502, {"error": {"message": f"the memory system's endpoint {self.upstream} failed: {err}"}}
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": {"message": response.text[:500]}}
        usage = payload.get("usage") or {}
        self.meter.book(
            int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), failed=response.is_error
        )
        return response.status_code, payload

    def close(self) -> None:
        self.listener.close()
        self._client.close()


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

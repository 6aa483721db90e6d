"""One retrying JSON-over-HTTP POST helper, shared by every client of an OpenAI-compatible server.

The chat client (:class:`ChatClient`: summaries, LLM distractors, LLM judges), the HTTP generation engine
(:class:`rollouts.engines.openai_engine.OpenAIEngine`) and LLM judges all talk to the same kind of
server, so they share one code path and one retry policy:

* connection errors, timeouts, HTTP 429 and 5xx, and 200 answers that are not the expected JSON
  are retried with exponential backoff (``backoff_s * 2**k``; a numeric ``Retry-After`` header
  lengthens the wait, capped at ``max_backoff_s``);
* any other 4xx is a client error that will not fix itself and is not retried;
* the final failure is an :class:`HTTPRequestError` naming the URL, the attempts and the last error.

Standard library only (urllib), so it works wherever the package installs.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

_BODY_PREVIEW_CHARS = 300
"""how much of an error response body goes into the message: enough for a server's reason."""


class HTTPRequestError(RuntimeError):
    """A POST failed for good: after ``attempts`` tries, or at once on a client error.

    ``status`` is the last HTTP status (None when no HTTP answer came back, e.g. connection refused);
    ``transient`` is True when the last failure was of a retryable kind (server unreachable, 5xx, 429,
    malformed answer), False for a client error (other 4xx) that retrying cannot fix.
    """

    def __init__(self, url: str, attempts: int, last_error: str, *, status: int | None, transient: bool):
        super().__init__(f"{url} failed after {attempts} attempt(s): {last_error}")
        self.url = url
        self.attempts = attempts
        self.last_error = last_error
        self.status = status
        self.transient = transient


def is_retryable_status(status: int) -> bool:
    """429 (rate limited) and 5xx (server trouble) may succeed later; other 4xx never will."""
    return status == 429 or status >= 500


def post_json(
    url: str,
    payload: Any,
    *,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    retries: int = 3,
    backoff_s: float = 1.0,
    max_backoff_s: float = 30.0,
    headers: Mapping[str, str] | None = None,
    parse: Callable[[Any], Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """POST ``payload`` as JSON to ``url`` and return the decoded JSON answer (or ``parse(answer)``).

    ``retries`` is the total number of attempts (at least one). ``parse`` pulls what the caller needs
    out of the answer; if it raises KeyError/IndexError/TypeError/ValueError the answer had an unexpected
    shape and the request is retried like a server error. ``api_key`` is sent as a bearer token.
    Raises :class:`HTTPRequestError` when no attempt succeeds.
    """
    body = json.dumps(payload).encode()
    request_headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        request_headers["Authorization"] = f"Bearer {api_key}"
    request_headers.update(headers or {})
    attempts = max(1, int(retries))
    last_error, status, transient = "", None, True
    attempt = 0
    for attempt in range(1, attempts + 1):
        retry_after = 0.0
        request = urllib.request.Request(url, data=body, headers=request_headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                raw = response.read()
            status = 200
            answer = json.loads(raw)
            return parse(answer) if parse is not None else answer
        except urllib.error.HTTPError as err:
            status = err.code
            try:
                detail = err.read()[:_BODY_PREVIEW_CHARS].decode(errors="replace")
            except OSError:  # the connection dropped while reading the error body
                detail = ""
            last_error = f"HTTP {err.code}: {detail}"
            transient = is_retryable_status(err.code)
            if not transient:  # a client error (bad request, prompt too long, bad key) will not fix itself
                break
            retry_after = _retry_after_s(err.headers)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:  # refused, reset, timed out
            status, transient = None, True
            reason = getattr(err, "reason", None) or err
            last_error = f"{type(err).__name__}: {reason}"
        except (KeyError, IndexError, TypeError, ValueError) as err:  # json.JSONDecodeError is a ValueError
            transient = True
            last_error = f"unexpected response shape ({type(err).__name__}: {err})"
        if attempt < attempts:
            sleep(min(max_backoff_s, max(backoff_s * 2 ** (attempt - 1), retry_after)))
    raise HTTPRequestError(url, attempt, last_error, status=status, transient=transient)


def _retry_after_s(headers: Any) -> float:
    """A numeric ``Retry-After`` header in seconds (the HTTP-date form is rare from model servers; ignored)."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except ValueError:
        return 0.0


class ChatClient:
    """messages -> reply text over an OpenAI-compatible ``/chat/completions`` endpoint, with retries.

    Failures after the retries raise :class:`HTTPRequestError`; callers decide what that means.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 1.0,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    @classmethod
    def from_settings(cls, settings: Any) -> ChatClient:
        """From a config section with base_url, model, api_key_env, max_tokens, temperature, timeout_s, retries."""
        return cls(
            settings.base_url,
            settings.model,
            api_key=os.environ.get(settings.api_key_env),
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            timeout_s=settings.timeout_s,
            retries=settings.retries,
        )

    def __call__(self, messages: list[dict[str, str]]) -> str:
        payload = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        return post_json(
            self.url,
            payload,
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            retries=self.retries,
            backoff_s=self.backoff_s,
            parse=_chat_reply_text,
        )


def _chat_reply_text(answer: Any) -> str:
    """The assistant text of a /chat/completions answer; a wrong shape raises and is retried by post_json."""
    return str(answer["choices"][0]["message"]["content"] or "")

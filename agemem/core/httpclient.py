"""The ``openai`` SDK set up for OpenAI-compatible servers, shared by every client of one.

The chat client (:class:`ChatClient`: summaries, LLM distractors, LLM judges) and the HTTP generation engine
(:class:`agemem.rollouts.engines.openai_engine.OpenAIEngine`) share one retry policy:

* the SDK retries connection errors, timeouts, HTTP 408/409/429 and 5xx with exponential backoff (jittered;
  a ``Retry-After`` header is honoured), the first wait scaled to ``backoff_s``;
* :func:`request` also retries 200 answers that are not the expected JSON, within the same attempt budget;
* any other 4xx is a client error that will not fix itself and is not retried;
* the final failure is an :class:`HTTPRequestError` naming the URL, the attempts and the last error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import openai
from openai._constants import INITIAL_RETRY_DELAY

_BODY_PREVIEW_CHARS = 300
"""how much of an error response body goes into the message: enough for a server's reason."""

NO_API_KEY = "EMPTY"
"""sent as the bearer token when no key is configured (the SDK needs one; keyless servers ignore it)."""


class HTTPRequestError(RuntimeError):
    """A request failed for good: after ``attempts`` tries, or at once on a client error.

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


class _OpenAI(openai.OpenAI):
    """The SDK client with its backoff (0.5 s doubled per retry, jittered) rescaled to start at ``backoff_s``."""

    backoff_s = 1.0

    def _calculate_retry_timeout(self, remaining_retries: int, options: Any, response_headers: Any = None) -> float:
        delay = super()._calculate_retry_timeout(remaining_retries, options, response_headers)
        if delay == self._parse_retry_after_header(response_headers):  # the server said how long: keep it
            return delay
        return delay * self.backoff_s / INITIAL_RETRY_DELAY

    def copy(self, **kwargs: Any) -> _OpenAI:
        client = super().copy(**kwargs)
        client.backoff_s = self.backoff_s
        return client

    with_options = copy


def openai_client(base_url: str, api_key: str | None, *, timeout_s: float, retries: int, backoff_s: float) -> Any:
    """An SDK client making ``retries`` attempts in all (at least one) per request."""
    client = _OpenAI(
        base_url=base_url, api_key=api_key or NO_API_KEY, timeout=timeout_s, max_retries=max(1, int(retries)) - 1
    )
    client.backoff_s = backoff_s
    return client


def request(client: Any, url: str, send: Callable[[Any], Any], parse: Callable[[Any], Any]) -> Any:
    """``parse(send(client).parse())``: ``send`` makes one ``with_raw_response`` SDK call (retried by the SDK).

    A ``parse`` that raises AttributeError/KeyError/IndexError/TypeError/ValueError met an unexpected answer
    (not JSON, missing fields): it is asked again while attempts are left. Raises :class:`HTTPRequestError`.
    """
    attempts, used = client.max_retries + 1, 0
    while True:
        try:
            raw = send(client.with_options(max_retries=attempts - used - 1))
        except openai.APIStatusError as err:
            used += _tries(err.response.request)
            detail = err.response.text[:_BODY_PREVIEW_CHARS]
            status = err.status_code
            transient = status in (408, 409, 429) or status >= 500  # what the SDK retries
            raise HTTPRequestError(url, used, f"HTTP {status}: {detail}", status=status, transient=transient) from err
        except openai.APIConnectionError as err:  # refused, reset, timed out
            used += _tries(err.request)
            cause = err.__cause__ or err
            raise HTTPRequestError(url, used, f"{type(cause).__name__}: {cause}", status=None, transient=True) from err
        used += raw.retries_taken + 1
        try:
            return parse(raw.parse())
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:  # JSONDecodeError is a ValueError
            if used >= attempts:
                last_error = f"unexpected response shape ({type(err).__name__}: {err})"
                raise HTTPRequestError(url, used, last_error, status=200, transient=True) from err
        time.sleep(client.backoff_s * 2 ** (used - 1))


def _tries(sent: Any) -> int:
    """How many times the SDK sent a request: it numbers its retries in a header."""
    return int(sent.headers.get("x-stainless-retry-count", 0)) + 1


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
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.client = openai_client(base_url, api_key, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s)

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
        def send(client: Any) -> Any:
            return client.chat.completions.with_raw_response.create(
                model=self.model, messages=messages, max_tokens=self.max_tokens, temperature=self.temperature
            )

        return request(self.client, self.url, send, lambda answer: str(answer.choices[0].message.content or ""))

"""Generation over any OpenAI-compatible HTTP server (vLLM ``serve``, SGLang, hosted APIs).

For evaluation and for the LLM roles around the policy (distractor writers, summarisers, judges);
training rollouts use a token engine. Two APIs:

* ``api="completions"`` (token in, token out, exact): POST ``{base_url}/completions`` with the prompt
  as a list of token ids (vLLM and SGLang accept that) and ask for ``logprobs: 1`` with vLLM's
  ``return_tokens_as_token_ids: true``, so every sampled token comes back as ``"token_id:123"`` with
  its log-prob. When the server returns no ids (it ignored the extension), the completion text is
  re-tokenised with the engine's tokenizer: ``meta["retokenised"] = True`` and ``logprobs = None``.
* ``api="chat"``: POST ``{base_url}/chat/completions`` with the chat ``messages`` (the server applies
  its own template); the reply text is re-tokenised, ``logprobs = None``. Hosted APIs only offer this.

End-of-turn token. A token engine keeps the end-of-turn id in ``token_ids`` (see
:class:`~agemem.rollouts.engines.base.Completion`). vLLM keeps a matched stop token in its token ids but
never in the text, so whenever a completion finished with ``"stop"`` and its ids do not already end
in a stop token (re-tokenised text, chat replies, servers that drop it), the engine appends one: the
server's ``stop_reason`` / ``matched_stop`` id when it reports one, else the tokenizer's EOS id if it
is among ``sampling.stop_token_ids`` (or there are none), else ``sampling.stop_token_ids[0]``. The
appended token's log-prob is unknown, and a half-filled list would break the "one log-prob per
token" contract, so such a completion gets ``logprobs = None``; the server's log-probs of the other
tokens are kept in ``meta["partial_logprobs"]`` and the id in ``meta["appended_stop_token"]``.

Failure policy. A request the server rejects (a 4xx other than 429: prompt too long, bad parameter)
becomes ``Completion(finish_reason="error", error=...)`` so one bad prompt does not stop an
evaluation. A server that stays unreachable or keeps failing after the retries (connection errors,
5xx, 429, malformed answers), or that answers 401/403/404 (a wrong key, base_url or model name,
which every other request would hit too), raises :class:`~agemem.rollouts.engines.base.EngineError` naming
the URL and what to check.

Requests go through the ``openai`` SDK (retries, backoff and timeouts: :mod:`agemem.core.httpclient`); the
vLLM-only fields travel in ``extra_body`` and come back among the answer's extra fields. They run on a
thread pool of ``concurrency`` workers, one HTTP request per prompt; results come back in input order.
Progress reporting is the caller's job.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from agemem.core.httpclient import HTTPRequestError, openai_client, request
from agemem.rollouts.engines.base import CallCounter, Completion, EngineError, FinishReason, SamplingParams, derive_seed
from agemem.rollouts.engines.grammar import refuse_grammar

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Api = Literal["completions", "chat"]

TOKEN_ID_PREFIX = "token_id:"
"""how vLLM spells a token when ``return_tokens_as_token_ids`` is on."""

_CONFIG_ERROR_STATUSES = frozenset({401, 403, 404})
"""client errors that every request would hit (bad key, wrong URL or model): raise, do not mark one prompt."""

NEUTRAL_SAMPLING: dict[str, Any] = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
"""vLLM/SGLang sampling fields sent with every completions request unless the sampling settings say otherwise
(``top_k``): each value turns its processing off, so the server samples from the tempered, top-p distribution
alone, which is what :func:`agemem.train.policy.chosen_token_logprobs` computes."""

LogprobMode = Literal["processed", "raw", "unknown", "missing"]

_STOP_FINISHES = frozenset({"stop", "eos", "end_turn", "stop_sequence", "tool_calls", "function_call"})


class OpenAIEngine:
    """The :class:`~agemem.rollouts.engines.base.Engine` protocol over an OpenAI-compatible HTTP server.

    ``base_url`` is the API root, usually ending in ``/v1`` (``http://localhost:8000/v1`` for
    ``vllm serve``). ``tokenizer`` is the policy's tokenizer: required for ``api="chat"`` and used by
    ``api="completions"`` only when the server returns no token ids. ``api_key`` (or, when it is None,
    the environment variable named by ``api_key_env``) is sent as a bearer token. ``retries`` is the
    number of attempts per request; ``backoff_s`` the first retry delay (doubled each time).
    ``extra_body`` adds server-specific fields to every request (e.g. ``{"min_p": 0.05}``).
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        api: Api = "completions",
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 300.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        concurrency: int = 8,
        extra_body: dict[str, Any] | None = None,
    ):
        if api not in ("completions", "chat"):
            raise ValueError(f"api must be 'completions' or 'chat', got {api!r}")
        if api == "chat" and tokenizer is None:
            raise ValueError("api='chat' needs the policy's tokenizer to turn the reply text into token ids")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.api: Api = api
        self.url = f"{self.base_url}/completions" if api == "completions" else f"{self.base_url}/chat/completions"
        self.api_key = api_key if api_key is not None or not api_key_env else os.environ.get(api_key_env)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self.client = openai_client(
            self.base_url, self.api_key, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s
        )
        self.calls = 0
        self._call_counter = CallCounter()  # request seeds: (base seed, n-th call under it, index)

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        """One completion per prompt, in input order; at most ``concurrency`` requests in flight.

        ``messages`` (the same prompts in chat form) is required by ``api="chat"`` and ignored by
        ``api="completions"``. Raises :class:`EngineError` when the server cannot be used at all.
        """
        if self.api == "chat":
            if messages is None:
                raise ValueError(
                    "OpenAIEngine(api='chat') needs messages=[...] (each prompt in chat form): chat endpoints "
                    "cannot take token ids; use api='completions' for token-id prompts"
                )
            if len(messages) != len(prompts):
                raise ValueError(f"got {len(prompts)} prompts but {len(messages)} message lists")
        refuse_grammar(sampling, self.name)
        count = len(prompts)
        if count == 0:
            return []
        call_index = self._call_counter.next_index(sampling.seed)
        self.calls += 1

        def one(index: int) -> Completion:
            chat = messages[index] if self.api == "chat" and messages is not None else None
            return self._generate_one(call_index, index, prompts[index], chat, sampling)

        workers = min(self.concurrency, count)
        if workers == 1:
            return [one(index) for index in range(count)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-engine") as pool:
            futures = [pool.submit(one, index) for index in range(count)]
            try:
                return [future.result() for future in futures]
            except BaseException:
                # The server is unusable: do not start the requests still queued (running ones finish).
                for future in futures:
                    future.cancel()
                raise

    # -- one request ---------------------------------------------------------------------------

    def _generate_one(
        self,
        call_index: int,
        index: int,
        prompt: Sequence[int],
        chat: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> Completion:
        body = self._request_body(call_index, index, prompt, chat, sampling)
        try:
            choice = request(self.client, self.url, lambda client: self._send(client, body), _first_choice)
        except HTTPRequestError as err:
            if err.transient or err.status in _CONFIG_ERROR_STATUSES:
                raise EngineError(self._failure_message(err)) from err
            return Completion(
                token_ids=[],
                logprobs=None,
                finish_reason="error",
                error=f"the server rejected the request ({err.last_error})",
                meta={"status": err.status, "seed": body.get("seed")},
            )
        completion = self._from_choice(choice, sampling)
        completion.meta["seed"] = body.get("seed")
        return completion

    def _request_body(
        self,
        call_index: int,
        index: int,
        prompt: Sequence[int],
        chat: list[dict[str, Any]] | None,
        sampling: SamplingParams,
    ) -> dict[str, Any]:
        """The SDK's keyword arguments; what the OpenAI API lacks goes in ``extra_body``."""
        body: dict[str, Any] = {"model": self.model}
        extra: dict[str, Any] = {}
        if self.api == "chat":
            body["messages"] = chat
        else:
            body["prompt"] = [int(token) for token in prompt]
            body["logprobs"] = 1
            extra["return_tokens_as_token_ids"] = True  # vLLM: tokens come back as "token_id:N", exact
        body["max_tokens"] = sampling.max_tokens
        body["temperature"] = sampling.temperature
        body["top_p"] = sampling.top_p
        if self.api == "completions":
            # every field that shapes the sampled distribution, spelled out: `vllm serve` fills the ones a request
            # leaves out from the model's generation_config.json (Qwen2.5: top_k 20, repetition_penalty 1.05), and
            # its samples would come from another distribution than the one the trainer's log-probs assume
            extra.update(NEUTRAL_SAMPLING)
            body["presence_penalty"] = body["frequency_penalty"] = 0.0
            if sampling.top_k > 0:
                extra["top_k"] = sampling.top_k
        elif sampling.top_k > 0:  # vLLM/SGLang extension; hosted chat APIs reject unknown fields
            extra["top_k"] = sampling.top_k
        if sampling.seed is not None:
            body["seed"] = derive_seed(sampling.seed, call_index, index)
        # Chat endpoints apply the server's own template and stop at its end-of-turn; token ids of our
        # tokenizer mean nothing to a hosted model, so stop ids go to the completions API only.
        if self.api == "completions" and sampling.stop_token_ids:
            extra["stop_token_ids"] = [int(token) for token in sampling.stop_token_ids]
        body["extra_body"] = {**extra, **self.extra_body}  # sent last: it overrides the fields above
        return body

    def logprob_mode(self, prompt: Sequence[int], *, low_temperature: float = 0.25) -> LogprobMode:
        """Whether the server's log-probs are those of the distribution it samples from (vLLM's
        ``--logprobs-mode processed_logprobs``) or of the raw logits (vLLM's default, ``raw_logprobs``).

        Asks for one token of ``prompt`` and its top-5 alternatives at temperature 1 and at ``low_temperature``:
        processed log-probs of the most likely token change with the temperature, raw ones do not. 'unknown'
        when the model is so sure of that token that tempering moves nothing (then nothing needs correcting
        either); 'missing' when the server returns no usable top log-probs.
        """
        found = []
        for temperature in (1.0, low_temperature):
            sampling = SamplingParams(temperature=temperature, max_tokens=1, seed=0)
            body = {**self._request_body(0, 0, prompt, None, sampling), "logprobs": 5}
            try:
                choice = request(self.client, self.url, lambda client, b=body: self._send(client, b), _first_choice)
            except HTTPRequestError as err:
                raise EngineError(self._failure_message(err)) from err
            top = ((choice.get("logprobs") or {}).get("top_logprobs") or [None])[0]
            if not isinstance(top, dict) or not top:
                return "missing"
            found.append(top)
        best = max(found[0], key=found[0].get)
        if best not in found[1]:
            return "processed"  # the top-5 changed with the temperature: only processed log-probs do that
        at_one, at_low = float(found[0][best]), float(found[1][best])
        if abs(at_one - at_low) > 1e-4:
            return "processed"
        return "raw" if at_one < -1e-3 else "unknown"

    def _send(self, client: Any, body: dict[str, Any]) -> Any:
        """One SDK call (``client``: the request's copy of :attr:`client`, with its retry budget)."""
        resource = client.completions if self.api == "completions" else client.chat.completions
        return resource.with_raw_response.create(**body)

    def _from_choice(self, choice: dict[str, Any], sampling: SamplingParams) -> Completion:
        finish, finish_error = _finish_reason(choice.get("finish_reason"))
        meta: dict[str, Any] = {}
        logprobs: list[float] | None = None
        if self.api == "chat":
            text = str((choice.get("message") or {}).get("content") or "")
            ids = None
        else:
            text = str(choice.get("text") or "")
            ids, logprobs = _ids_and_logprobs(choice)
            if ids is not None and logprobs is None:
                meta["logprobs_missing"] = True
        if ids is None:
            if self.tokenizer is None:
                return Completion(
                    token_ids=[],
                    logprobs=None,
                    finish_reason="error",
                    text=text,
                    error="the server returned no token ids and the engine has no tokenizer to re-tokenise the text",
                    meta={"retokenised": False},
                )
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
            logprobs = None
            meta["retokenised"] = True
        if finish == "stop":
            ids, logprobs = self._ensure_stop_token(ids, logprobs, choice, sampling, meta)
        return Completion(
            token_ids=ids, logprobs=logprobs, finish_reason=finish, text=text, error=finish_error, meta=meta
        )

    def _ensure_stop_token(
        self,
        ids: list[int],
        logprobs: list[float] | None,
        choice: dict[str, Any],
        sampling: SamplingParams,
        meta: dict[str, Any],
    ) -> tuple[list[int], list[float] | None]:
        """Append the end-of-turn id the server stopped on when the ids lack it (see the module docstring)."""
        eos = getattr(self.tokenizer, "eos_token_id", None) if self.tokenizer is not None else None
        stop_ids = [int(token) for token in sampling.stop_token_ids]
        known_stops = {*stop_ids, *([eos] if isinstance(eos, int) else [])}
        if ids and ids[-1] in known_stops:
            return ids, logprobs
        reported = choice.get("stop_reason", choice.get("matched_stop"))
        if isinstance(reported, int) and not isinstance(reported, bool):
            stop = reported
        elif isinstance(reported, str):  # a stop string matched: there is no token to append
            return ids, logprobs
        elif isinstance(eos, int) and (eos in stop_ids or not stop_ids):
            stop = eos
        elif stop_ids:
            stop = stop_ids[0]
        else:
            meta["stop_token_unknown"] = True
            return ids, logprobs
        meta["appended_stop_token"] = stop
        if logprobs is not None:
            meta["partial_logprobs"] = logprobs
        return [*ids, stop], None

    def _failure_message(self, err: HTTPRequestError) -> str:
        if err.status in (401, 403):
            hint = "check the API key (api_key, or the environment variable named by api_key_env)"
        elif err.status == 404:
            hint = (
                f"check base_url={self.base_url!r} (it is the API root, usually ending in /v1, e.g. "
                f"http://localhost:8000/v1) and model={self.model!r} (the server lists its models at "
                f"{self.base_url}/models)"
            )
        else:
            hint = (
                f"is the server running and reachable at base_url={self.base_url!r}? (start one with "
                "`vllm serve <model>`; base_url usually ends in /v1); if it is overloaded, lower concurrency "
                "or raise timeout_s/retries"
            )
        return f"OpenAI-compatible server unusable: {err}; {hint}"


def _first_choice(answer: Any) -> dict[str, Any]:
    """``choices[0]`` of an answer as a dict, the server's extra fields included (``stop_reason``,
    ``token_ids``); any other shape raises and :func:`~agemem.core.httpclient.request` retries it."""
    choice = answer.to_dict()["choices"][0]
    if not isinstance(choice, dict):
        raise TypeError(f"choices[0] is a {type(choice).__name__}, not an object")
    return choice


def _finish_reason(raw: Any) -> tuple[FinishReason, str | None]:
    if raw == "length":
        return "length", None
    if raw is None or raw in _STOP_FINISHES:  # some servers leave it out on a normal stop
        return "stop", None
    # e.g. "abort" (the server dropped the request) or "content_filter": not a usable answer
    return "error", f"the server ended generation with finish_reason={raw!r}"


def _ids_and_logprobs(choice: dict[str, Any]) -> tuple[list[int] | None, list[float] | None]:
    """Exact ids (vLLM's ``token_ids`` field or ``"token_id:N"`` tokens) and their log-probs, when present."""
    block = choice.get("logprobs")
    block = block if isinstance(block, dict) else {}
    tokens = block.get("tokens")
    ids: list[int] | None = None
    direct = choice.get("token_ids")  # vLLM's return_token_ids extension, when the caller enables it
    if isinstance(direct, list) and all(isinstance(token, int) for token in direct):
        ids = list(direct)
    elif isinstance(tokens, list) and all(isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) for t in tokens):
        try:
            ids = [int(token[len(TOKEN_ID_PREFIX) :]) for token in tokens]
        except ValueError:
            ids = None
    if ids is None:
        return None, None
    values = block.get("token_logprobs")
    if (
        isinstance(values, list)
        and len(values) == len(ids)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) for v in values)
    ):
        return ids, [float(v) for v in values]
    return ids, None

"""A vLLM-like ``/v1/completions`` server on loopback that samples from a real causal LM, for off-policy tests.

It samples as ``vllm serve`` does: a request's missing sampling fields take the served model's defaults (Qwen2.5's
generation_config.json: top_k 20, repetition_penalty 1.05), then repetition penalty, temperature, top-k, top-p
and min-p apply in that order. Its log-probs are those of the distribution it sampled from
(``logprobs_mode="processed"``, vLLM's ``--logprobs-mode processed_logprobs``) or of the raw logits (``"raw"``,
vLLM's default), with the top-N alternatives when asked. Every sampled token's true probability is recorded.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import torch

from agemem.rollouts.engines.transformers_engine import truncate_logits
from tests.fake_endpoint import FakeChatEndpoint

QWEN25_DEFAULTS = {"top_k": 20, "repetition_penalty": 1.05, "min_p": 0.0}


class PolicyCompletionsServer:
    def __init__(self, model: Any, *, logprobs_mode: str = "processed", defaults: dict[str, Any] | None = None):
        self.model = model.eval()
        self.logprobs_mode = logprobs_mode
        self.defaults = dict(QWEN25_DEFAULTS if defaults is None else defaults)
        self.sampled_logprobs: list[float] = []
        """log π_sampled of every token it sampled, whatever its log-probs mode reports."""
        self.model_lock = threading.Lock()  # one request at a time: the model is not thread-safe
        self.endpoint = FakeChatEndpoint(self.reply)
        self.url = self.endpoint.url

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, _, body in self.endpoint.requests]

    def reply(self, body: dict[str, Any], number: int) -> tuple[int, bytes]:
        with self.model_lock:
            return 200, json.dumps(self.complete(body)).encode()

    def setting(self, body: dict[str, Any], key: str, default: Any) -> Any:
        return body[key] if key in body else self.defaults.get(key, default)

    def processed(self, raw_V: torch.Tensor, seen: list[int], body: dict[str, Any]) -> torch.Tensor:
        """The logits it samples from: repetition penalty over the prompt and output so far, temperature, top-k,
        top-p, min-p (dropped tokens at -inf)."""
        logits = raw_V.clone()
        penalty = float(self.setting(body, "repetition_penalty", 1.0))
        if penalty != 1.0:
            ids = torch.tensor(sorted(set(seen)))
            chosen = logits[ids]
            logits[ids] = torch.where(chosen > 0, chosen / penalty, chosen * penalty)
        logits = logits / float(self.setting(body, "temperature", 1.0))
        top_k = int(self.setting(body, "top_k", -1))
        logits = truncate_logits(logits[None], top_k if top_k > 0 else 0, float(self.setting(body, "top_p", 1.0)))[0]
        min_p = float(self.setting(body, "min_p", 0.0))
        if min_p > 0:
            probs = logits.softmax(-1)
            logits = logits.masked_fill(probs < min_p * probs.max(), float("-inf"))
        return logits

    @torch.no_grad()
    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = list(body["prompt"])
        generator = torch.Generator().manual_seed(int(body.get("seed") or 0))
        stops = set(body.get("stop_token_ids") or [])
        top_n = int(body.get("logprobs") or 0)
        tokens, token_logprobs, top_logprobs = [], [], []
        finish = "length"
        for _ in range(int(body["max_tokens"])):
            raw_V = self.model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].float()
            sampled_V = self.processed(raw_V, ids, body).log_softmax(-1)
            token = int(torch.multinomial(sampled_V.exp(), 1, generator=generator))
            reported_V = sampled_V if self.logprobs_mode == "processed" else raw_V.log_softmax(-1)
            self.sampled_logprobs.append(float(sampled_V[token]))
            tokens.append(f"token_id:{token}")
            token_logprobs.append(float(reported_V[token]))
            best = reported_V.topk(max(top_n, 1))
            top_logprobs.append({f"token_id:{int(i)}": float(v) for v, i in zip(best.values, best.indices)})
            ids.append(token)
            if token in stops:
                finish = "stop"
                break
        logprobs = {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs}
        return {"choices": [{"index": 0, "text": "", "finish_reason": finish, "logprobs": logprobs}]}

    def close(self) -> None:
        self.endpoint.close()

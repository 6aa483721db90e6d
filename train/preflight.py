"""Start-up checks of ``agemem train``: refuse, before any rollout, setups that would train wrongly.

Each check is a pure function of the config (and the installed versions) that raises
:class:`~agemem.core.configlib.ConfigError` naming the problem and the fix; :func:`preflight` runs them all.
"""

from __future__ import annotations

import logging
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.core.versions import check_versions
from agemem.train.config import TrainRunConfig

SYNCED_BACKENDS: dict[str, str] = {
    "transformers": "generates with the trainer's own module, so every rollout sees the latest weights",
    "vllm": "receives the trainer's weights after every optimizer step (sync_weights)",
}
"""engine backends whose samples come from the policy being trained, and why."""


def check_on_policy(config: TrainRunConfig) -> None:
    """GRPO's importance ratio π_θ/π_θ_old assumes the samples came from π_θ_old (the weights before this
    update). An engine whose weights are never synced (``engine.backend=openai``: a served, fixed model)
    samples from π_0 at every step, so from step 2 on the run would train on another model's samples as if
    they were its own. Refused unless ``train.off_policy=true``, which requires the truncated importance
    weight ``min(π_θ_old(y)/π_engine(y), grpo.tis_cap)`` on every token (Ionides 2008; Yao et al. 2025,
    "Your efficient RL framework secretly brings you off-policy RL training"): that needs the engine's
    log-probs, which only the completions API with token ids returns.
    """
    backend = config.engine.backend
    if backend in SYNCED_BACKENDS:
        return
    if not config.train.off_policy:
        raise ConfigError(
            f"engine.backend={backend!r} never receives the trained weights: every step after the first would "
            "train on the served model's samples as if they were the policy's own. Train with "
            "engine.backend=vllm (weights synced after each step) or transformers, or opt into off-policy "
            "training explicitly with train.off_policy=true grpo.tis_cap=2.0 (samples reweighted by truncated "
            "importance sampling against the served model's log-probs)"
        )
    if config.grpo.tis_cap is None:
        raise ConfigError(
            "train.off_policy=true needs the off-policy correction: set grpo.tis_cap (e.g. 2.0), the cap of the "
            "per-token importance weight min(p_trainer / p_engine, cap)"
        )
    if backend == "openai" and config.engine.openai.api != "completions":
        raise ConfigError(
            "train.off_policy=true with engine.openai.api=chat: the chat API returns text, not the sampled token "
            "ids and their log-probs, so no importance weight can be computed; use engine.openai.api=completions "
            "against a vLLM/SGLang server"
        )
    logging.getLogger(__name__).warning(
        "off-policy training (train.off_policy=true): %s samples from fixed served weights; each token is "
        "reweighted by min(p_trainer / p_engine, %s) and train/mismatch_* logs the gap",
        backend,
        config.grpo.tis_cap,
    )


def check_engine_logprobs(engine: Any, tokenizer: Any) -> None:
    """Off-policy training weighs every token by ``π_trainer / π_engine``, so the engine's log-probs must be those
    of the distribution it sampled from. vLLM returns the raw logits' log-probs unless it was started with
    ``--logprobs-mode processed_logprobs``: the weight would then correct a ratio that is not the one sampled,
    silently. Probe the served engine once before the first rollout and refuse raw or missing log-probs
    (:meth:`agemem.rollouts.engines.openai_engine.OpenAIEngine.logprob_mode`)."""
    from agemem.core.chat import render_chat

    prompt = tokenizer(render_chat(tokenizer, [{"role": "user", "content": "Name a city."}]), add_special_tokens=False)
    mode = engine.logprob_mode(list(prompt["input_ids"]))
    if mode == "raw":
        raise ConfigError(
            f"the server at {engine.base_url} returns the raw logits' log-probs, not those of the distribution it "
            "samples from (temperature, top-k, top-p applied), so the importance weights of train.off_policy would "
            "be wrong; restart it with `vllm serve ... --logprobs-mode processed_logprobs`"
        )
    if mode == "missing":
        raise ConfigError(
            f"the server at {engine.base_url} returned no top log-probs for a probe request (logprobs=5): off-policy "
            "training needs the sampled tokens' log-probs; use a vLLM or SGLang completions endpoint"
        )
    logging.getLogger(__name__).info("off-policy engine log-probs: %s", mode)


def check_initial_mismatch(config: TrainRunConfig, update: dict[str, float]) -> None:
    """At an off-policy run's first step the served model and the trainer hold the same initial weights, so the
    k1 estimate of their per-token KL (``train/mismatch_kl_k1``, E_engine[log π_θ − log π_engine]) is rounding.
    A larger one means the engine samples from something else, and every importance weight of the run would be
    the ratio to the wrong distribution: stop before anything is saved."""
    limit = config.train.max_initial_mismatch_kl
    gap = abs(update.get("mismatch_kl_k1", 0.0))
    if not config.train.off_policy or limit is None or gap <= limit:
        return
    raise ConfigError(
        f"step 1: the served model's log-probs differ from the trainer's by {gap:.3g} nats a token "
        f"(|train/mismatch_kl_k1| > train.max_initial_mismatch_kl={limit:g}), although both should be the initial "
        f"weights: check that engine.openai.model serves policy.model={config.policy.model!r}, that the server "
        "honours the sampling fields (top_k, top_p, temperature, min_p, repetition_penalty) and returns processed "
        "log-probs (vllm serve --logprobs-mode processed_logprobs); nothing was saved. Raise "
        "train.max_initial_mismatch_kl (or set it to null) to train against another model on purpose"
    )


def check_weight_sync_possible(config: TrainRunConfig, *, cuda: bool) -> None:
    """A ``trl vllm-serve`` server receives weights over NCCL only (TRL's client refuses a non-CUDA device), so
    server mode on a machine without CUDA can generate but never sync: refuse it before the first rollout
    rather than fail in the first ``sync_weights``."""
    if config.engine.backend == "vllm" and config.engine.vllm.mode == "server" and not cuda:
        raise ConfigError(
            "engine.vllm.mode=server pushes weights to the server over NCCL, which needs CUDA; on this machine "
            "train with engine.vllm.mode=colocate (vLLM's CPU build syncs in process) or engine.backend=transformers"
        )


def check_sampling_supported(config: TrainRunConfig) -> None:
    """Training samples: temperature 0 gives K identical rollouts, and a group without variance has no signal."""
    if config.sampling.temperature <= 0:
        raise ConfigError("training samples from the policy: set sampling.temperature > 0 (GRPO needs diversity)")


def engine_features(config: TrainRunConfig, *, deepspeed: bool) -> set[str]:
    """The version-checked features a run uses (see :data:`agemem.core.versions.KNOWN_BAD`)."""
    features = {"vllm"} if config.engine.backend == "vllm" else set()
    if deepspeed:
        features.add("deepspeed")
    return features


def preflight(config: TrainRunConfig, *, deepspeed: bool, cuda: bool) -> None:
    """Every start-up check; ``deepspeed`` says whether the launch uses accelerate's DeepSpeed plugin, ``cuda``
    whether this process trains on a CUDA device."""
    check_sampling_supported(config)
    check_on_policy(config)
    check_weight_sync_possible(config, cuda=cuda)
    check_versions(engine_features(config, deepspeed=deepspeed))

"""Start-up refusals of `agemem train`: stale (never-synced) engines, and the explicit off-policy opt-in
whose truncated importance weights correct for them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.cli import main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.train.preflight import check_on_policy, check_weight_sync_possible
from tests.fake_endpoint import FakeChatEndpoint
from tests.policy_server import PolicyCompletionsServer
from tests.train.tiny_run import TINY, metrics

SERVED = ("engine.backend=openai", "engine.openai.model=served")
REPO = Path(__file__).resolve().parents[2]


def config_with(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, None, list(overrides))


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
def test_engines_that_see_the_trained_weights_pass(backend):
    check_on_policy(config_with(f"engine.backend={backend}"))


def test_a_served_model_that_never_gets_the_weights_is_refused_naming_both_fixes():
    with pytest.raises(ConfigError, match="never receives the trained weights") as err:
        check_on_policy(config_with(*SERVED))
    assert "engine.backend=vllm" in str(err.value) and "train.off_policy=true grpo.tis_cap" in str(err.value)


def test_off_policy_needs_the_importance_weight_cap():
    with pytest.raises(ConfigError, match=r"set grpo\.tis_cap"):
        check_on_policy(config_with(*SERVED, "train.off_policy=true"))


def test_off_policy_needs_token_log_probs_so_not_the_chat_api():
    with pytest.raises(ConfigError, match="chat API returns text"):
        check_on_policy(config_with(*SERVED, "engine.openai.api=chat", "train.off_policy=true", "grpo.tis_cap=2"))


def test_the_cli_refuses_stale_training_before_contacting_the_server(tmp_path, capsys):
    # port 9 (discard) on loopback: nothing listens; the refusal must come first, as a config error (exit 2)
    args = ["train", *TINY, f"output_dir={tmp_path}", *SERVED, "engine.openai.base_url=http://127.0.0.1:9/v1"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2 and "train.off_policy=true" in capsys.readouterr().err


@pytest.fixture(scope="module")
def initial_policy():
    """The tiny policy the runs below train, as its first step sees it: a server running it samples from π_θ_old."""
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy

    model, _ = load_policy(PolicyConfig(device="cpu"))
    return model


def off_policy_train(tmp_path, server, *overrides, own_process=False):
    """One off-policy step against ``server``. ``own_process``: in a fresh interpreter, whose trainer computes in
    fp32 as the server does (accelerate keeps one precision per process, and an earlier bf16 run in this test
    process would lend its autocast to an in-process run: a 0.05-nat gap that is not the engine's)."""
    out = tmp_path / "off_policy"
    args = [*TINY, "max_steps=1", f"output_dir={out}", *SERVED, f"engine.openai.base_url={server.url}"]
    args += ["engine.openai.retries=1", "engine.openai.concurrency=1", "train.off_policy=true", "grpo.tis_cap=2.0"]
    try:
        if own_process:
            done = subprocess.run([sys.executable, "-m", "agemem", "train", *args, *overrides],
                                  cwd=REPO, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
        else:
            assert main(["train", *args, *overrides]) == 0
    finally:
        server.close()
    generated = [body for body in server.bodies if body["logprobs"] == 1]
    return metrics(out / "metrics.jsonl")[0], generated


def test_off_policy_weights_are_the_ratio_to_the_distribution_really_sampled(tmp_path, initial_policy):
    # the server samples with top-k (the run's 20) and would add its repetition penalty of 1.05 to any request
    # that left it out: the engine sends every field, so the server samples from the distribution the trainer
    # computes, and its processed log-probs are that distribution's
    server = PolicyCompletionsServer(initial_policy)
    step, generated = off_policy_train(tmp_path, server, "sampling.top_k=20", own_process=True)
    assert generated and all((b["top_k"], b["repetition_penalty"], b["min_p"]) == (20, 1.0, 0.0) for b in generated)
    # the weights min(π_θ_old / π_engine, cap) are π_θ_old / π_sampled = 1 on every token: the server runs the
    # run's initial weights (the trainer's fp32 forward of the same tokens agrees to rounding)
    assert step["train/mismatch_abs_logp"] < 1e-4
    assert step["train/loss"] == step["train/loss"]  # not NaN


def test_a_server_left_to_its_own_defaults_samples_another_distribution(tmp_path, initial_policy, monkeypatch):
    """What the explicit fields prevent: the engine before them sent top_k only when set, and a server with
    Qwen2.5's defaults sampled from its top 20 tokens while the trainer's log-probs are over the whole vocabulary."""
    from agemem.rollouts.engines import openai_engine

    monkeypatch.setattr(openai_engine, "NEUTRAL_SAMPLING", {})
    step, generated = off_policy_train(
        tmp_path, PolicyCompletionsServer(initial_policy), "train.max_initial_mismatch_kl=null"
    )
    assert generated and not {"top_k", "repetition_penalty"} & generated[0].keys()
    assert step["train/mismatch_abs_logp"] > 1.0  # log(151,665 / 20)-sized, not rounding


def test_a_first_step_far_from_the_served_model_stops_the_run_before_it_saves(tmp_path, initial_policy, monkeypatch):
    from agemem.rollouts.engines import openai_engine

    monkeypatch.setattr(openai_engine, "NEUTRAL_SAMPLING", {})  # the server samples from its own top 20
    with pytest.raises(SystemExit) as exit_info:
        off_policy_train(tmp_path, PolicyCompletionsServer(initial_policy))
    assert exit_info.value.code == 2
    assert not (tmp_path / "off_policy" / "checkpoints").exists()


def test_a_server_with_raw_logprobs_is_refused_before_the_first_rollout(tmp_path, initial_policy, capsys):
    server = PolicyCompletionsServer(initial_policy, logprobs_mode="raw")
    argv = ["train", *TINY, *SERVED, f"engine.openai.base_url={server.url}", "engine.openai.retries=1"]
    argv += ["train.off_policy=true", "grpo.tis_cap=2.0", f"output_dir={tmp_path}"]
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
    finally:
        server.close()
    assert exit_info.value.code == 2 and "--logprobs-mode processed_logprobs" in capsys.readouterr().err
    assert server.bodies and all(body["max_tokens"] == 1 for body in server.bodies)  # only the probe ran


@pytest.mark.parametrize(("mode", "found"), [("processed", "processed"), ("raw", "raw")])
def test_the_logprob_probe_tells_processed_from_raw(initial_policy, qwen_tokenizer, mode, found):
    from agemem.rollouts.engines.openai_engine import OpenAIEngine

    server = PolicyCompletionsServer(initial_policy, logprobs_mode=mode)
    try:
        engine = OpenAIEngine(server.url, "served", qwen_tokenizer, retries=1)
        assert engine.logprob_mode([9707, 11, 1879]) == found
    finally:
        server.close()


def test_a_server_without_top_logprobs_is_refused(tmp_path, qwen_tokenizer):
    from agemem.rollouts.engines.openai_engine import OpenAIEngine
    from agemem.train.preflight import check_engine_logprobs

    def reply(body, number):  # ids and log-probs of the sampled token, no alternatives
        choice = {"text": "", "finish_reason": "length",
                  "logprobs": {"tokens": ["token_id:9707"], "token_logprobs": [-1.0]}}  # fmt: skip
        return 200, json.dumps({"choices": [choice]}).encode()

    server = FakeChatEndpoint(reply)
    try:
        with pytest.raises(ConfigError, match="no top log-probs"):
            check_engine_logprobs(OpenAIEngine(server.url, "served", qwen_tokenizer, retries=1), qwen_tokenizer)
    finally:
        server.close()


def test_server_mode_training_without_cuda_is_refused_before_the_first_rollout():
    server = config_with("engine.backend=vllm", "engine.vllm.mode=server")
    with pytest.raises(ConfigError, match=r"needs CUDA.*engine\.vllm\.mode=colocate"):
        check_weight_sync_possible(server, cuda=False)
    check_weight_sync_possible(server, cuda=True)
    check_weight_sync_possible(config_with("engine.backend=vllm"), cuda=False)  # colocate syncs in process


def test_an_unreachable_generation_endpoint_is_a_clean_error_not_a_traceback(tmp_path, capsys):
    from tests.train.launching import free_port

    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    argv = [
        "train", *TINY, *SERVED, f"engine.openai.base_url={closed}", "engine.openai.retries=1",
        "engine.openai.timeout_s=5", "train.off_policy=true", "grpo.tis_cap=2.0", f"output_dir={tmp_path}",
    ]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    error = capsys.readouterr().err
    assert exit_info.value.code == 1 and "agemem train: generation engine error:" in error and closed in error
    assert "Traceback" not in error

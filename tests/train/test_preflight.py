"""Start-up refusals of `agemem train`: stale (never-synced) engines, and the explicit off-policy opt-in
whose truncated importance weights correct for them."""

from __future__ import annotations

import json

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.cli import main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.train.preflight import check_on_policy, check_weight_sync_possible
from tests.fake_endpoint import FakeChatEndpoint
from tests.train.tiny_run import TINY, metrics

SERVED = ("engine.backend=openai", "engine.openai.model=served")


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


ENGINE_LOGPROB = -1.0
"""what the fake server reports for every sampled token: far likelier than the random tiny policy's ~-11.9."""


def completions_reply(qwen_tokenizer):
    reply_ids = qwen_tokenizer.encode("<answer>Paris</answer>", add_special_tokens=False)
    reply_ids.append(qwen_tokenizer.convert_tokens_to_ids("<|im_end|>"))

    def reply(body, number):
        assert "prompt" in body and body["logprobs"] == 1
        choice = {
            "index": 0,
            "text": "",
            "finish_reason": "stop",
            "logprobs": {
                "tokens": [f"token_id:{i}" for i in reply_ids],
                "token_logprobs": [ENGINE_LOGPROB] * len(reply_ids),
            },
        }
        return 200, json.dumps({"choices": [choice]}).encode()

    return reply


def test_opted_in_off_policy_training_runs_and_logs_the_sampler_gap(tmp_path, qwen_tokenizer):
    server = FakeChatEndpoint(completions_reply(qwen_tokenizer))
    try:
        out = tmp_path / "off_policy"
        args = [*TINY, "max_steps=1", f"output_dir={out}", "engine.backend=openai"]
        args += [f"engine.openai.base_url={server.url}", "engine.openai.model=served", "engine.openai.retries=1"]
        assert main(["train", *args, "train.off_policy=true", "grpo.tis_cap=2.0"]) == 0
    finally:
        server.close()
    assert server.requests and all(path.endswith("/completions") for path, _, _ in server.requests)
    (step,) = metrics(out / "metrics.jsonl")
    # every token came with the server's log-prob, so all were reweighted: the mean |logp_trainer - logp_engine|
    # is the gap between the random policy (about -log(151,665) = -11.9 a token) and the server's -1.0
    assert step["train/mismatch_abs_logp"] == pytest.approx(11.9 - 1.0, abs=1.0)
    assert step["train/loss"] == step["train/loss"]  # not NaN


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

"""``--model`` resolution: endpoints, the tiny model, training runs and checkpoints, LoRA adapters,
Hugging Face directories and hub ids; loading restores exactly the weights that were saved."""

from __future__ import annotations

import json

import pytest
import torch

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.models import default_model, endpoint_tokenizer, load_model, resolve_model
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import load_policy
from agemem.train.config import LoRAConfig
from agemem.train.policy import add_lora

IDS = torch.tensor([[9707, 11, 1879, 0, 151644, 77091]])


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


def _checkpoint(run, step: int, *, complete: bool = True):
    path = run / "checkpoints" / f"step_{step:06d}"
    (path / "policy").mkdir(parents=True)
    if complete:
        (path / "trainer_state.json").write_text(json.dumps({"step": step, "tasks_seen": 0, "world_size": 1}))
    return path


def test_endpoint_and_hub_forms():
    config = AgeMemConfig()
    endpoint = resolve_model("openai:Qwen/Qwen2.5-7B-Instruct@http://gpu-node:8000/v1", config)
    assert endpoint.kind == "openai" and endpoint.label == "Qwen/Qwen2.5-7B-Instruct"
    assert endpoint.config.engine.backend == "openai"
    assert endpoint.config.engine.openai.model == "Qwen/Qwen2.5-7B-Instruct"
    assert endpoint.config.engine.openai.base_url == "http://gpu-node:8000/v1"
    assert config.engine.backend == "transformers"  # the caller's config is not edited
    default_url = resolve_model("openai:my-model", config)
    assert default_url.config.engine.openai.base_url == config.engine.openai.base_url
    hub = resolve_model("Qwen/Qwen2.5-7B-Instruct", config)
    assert (hub.kind, hub.config.policy.model) == ("hf", "Qwen/Qwen2.5-7B-Instruct")
    assert resolve_model("tiny-random-qwen2", config).kind == "tiny"
    assert default_model(config) == "tiny-random-qwen2"
    served = load_config(AgeMemConfig, overrides=["engine.backend=openai", "engine.openai.model=m"])
    assert default_model(served) == "openai:m@http://localhost:8000/v1"
    with pytest.raises(ConfigError, match=r"engine\.backend=openai"):
        resolve_model("tiny-random-qwen2", served)
    with pytest.raises(ConfigError, match="no such folder"):
        resolve_model("./runs/missing", config)


@pytest.mark.parametrize(
    "spec", ["runs/nope", "./runs/grpo", "runs/grpo/checkpoints", "~/no-such-agemem-run", "/no/such/run", "..\\x"]
)
def test_a_missing_local_path_is_no_such_folder_before_any_hub_attempt(spec, tmp_path, monkeypatch):
    # `runs/` exists (what `agemem train` made), `runs/nope` does not: a hub id has the same shape, so the
    # local first component is what tells them apart; loading must not be tried (it would retry the hub)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", _no_network)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", _no_network)
    with pytest.raises(ConfigError, match=r"--model .*: no such folder \(.* does not exist\)"):
        resolve_model(spec, AgeMemConfig())
    with pytest.raises(ConfigError, match=r"policy\.model=.*: no such folder"):
        load_policy(PolicyConfig(model=spec, device="cpu"))
    with pytest.raises(ConfigError, match=r"tokenizer=.*: no such folder"):
        load_tokenizer(spec)


@pytest.mark.parametrize("spec", ["Qwen/Qwen2.5-7B-Instruct", "gpt2", "my-org/agemem-1.5b"])
def test_hub_ids_stay_hub_ids_when_no_local_folder_matches(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    resolved = resolve_model(spec, AgeMemConfig())
    assert (resolved.kind, resolved.config.policy.model) == ("hf", spec)


def _no_network(*args, **kwargs):
    raise AssertionError("a missing local folder must be refused before any hub lookup")


def test_endpoint_tokenizer_needs_the_served_models_tokenizer_for_token_ids():
    chat = load_config(AgeMemConfig, overrides=["engine.openai.api=chat"])
    chat = resolve_model("openai:not-a-tokenizer@http://localhost:1/v1", chat).config
    assert endpoint_tokenizer(chat).name_or_path.endswith("qwen2.5-instruct")  # chat: env.context.tokenizer
    completions = resolve_model("openai:not-a-tokenizer@http://localhost:1/v1", AgeMemConfig()).config
    with pytest.raises(ConfigError, match=r"policy\.tokenizer="):
        endpoint_tokenizer(completions)
    completions.policy.tokenizer = "bundled:qwen2.5-instruct"
    assert endpoint_tokenizer(completions) is not None


def test_training_run_checkpoint_and_policy_folder_resolve_to_the_newest_complete_checkpoint(tmp_path):
    model, tokenizer = load_policy(PolicyConfig(init_seed=5, device="cpu"))
    run = tmp_path / "grpo"
    _checkpoint(run, 1)
    newest = _checkpoint(run, 2)
    _checkpoint(run, 3, complete=False)  # still being written
    model.save_pretrained(newest / "policy")
    tokenizer.save_pretrained(newest / "policy")
    for spec in (run, newest, newest / "policy"):
        resolved = resolve_model(str(spec), AgeMemConfig())
        assert resolved.kind == "checkpoint" and resolved.label == "grpo/step_000002"
        assert resolved.config.policy.model == str(newest / "policy")
        assert resolved.checkpoint == str(newest)
    loaded, _ = load_model(resolve_model(str(run), load_config(AgeMemConfig, overrides=["policy.device=cpu"])))
    assert torch.equal(_logits(loaded), _logits(model))
    plain = resolve_model(str(newest / "policy"), AgeMemConfig())
    assert plain.kind == "checkpoint"
    empty = tmp_path / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="without a complete checkpoint"):
        resolve_model(str(empty), AgeMemConfig())
    with pytest.raises(ConfigError, match="neither a model"):
        resolve_model(str(tmp_path), AgeMemConfig())


def _adapter(seed: int):
    """A LoRA adapter over the tiny model (init_seed=seed) with non-zero B, so it changes the outputs."""
    base, tokenizer = load_policy(PolicyConfig(init_seed=seed, tiny_layers=1, device="cpu"))
    peft_model = add_lora(base, LoRAConfig(r=4, target_modules=["q_proj", "v_proj"]))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return peft_model, tokenizer


def test_lora_adapter_in_a_training_run_loads_over_the_runs_base(tmp_path):
    peft_model, tokenizer = _adapter(seed=3)
    run = tmp_path / "lora-run"
    checkpoint = _checkpoint(run, 4)
    peft_model.save_pretrained(checkpoint / "policy")
    tokenizer.save_pretrained(checkpoint / "policy")
    # the trainer's config.json: the tiny base model's seed and size are only known from it
    policy = {"model": "tiny-random-qwen2", "init_seed": 3, "tiny_layers": 1, "device": "cuda"}
    (run / "config.json").write_text(json.dumps({"policy": policy}))
    config = load_config(AgeMemConfig, overrides=["policy.device=cpu"])
    resolved = resolve_model(str(run), config)
    assert resolved.kind == "checkpoint" and resolved.adapter == str(checkpoint / "policy")
    assert (resolved.config.policy.init_seed, resolved.config.policy.tiny_layers) == (3, 1)
    assert resolved.config.policy.device == "cpu"  # how to run it comes from the evaluation config
    merged, _ = load_model(resolved)
    expected = _logits(peft_model)
    assert not torch.allclose(expected, _logits(load_policy(PolicyConfig(init_seed=3, tiny_layers=1))[0]))
    assert torch.allclose(_logits(merged), expected, atol=1e-4)


def test_standalone_adapter_without_a_base_uses_policy_model(tmp_path):
    peft_model, _ = _adapter(seed=7)
    peft_model.save_pretrained(tmp_path / "adapter")
    config = load_config(AgeMemConfig, overrides=["policy.init_seed=7", "policy.tiny_layers=1", "policy.device=cpu"])
    resolved = resolve_model(str(tmp_path / "adapter"), config)
    assert (resolved.kind, resolved.label, resolved.config.policy.model) == ("lora", "adapter", "tiny-random-qwen2")
    merged, _ = load_model(resolved)
    assert torch.allclose(_logits(merged), _logits(peft_model), atol=1e-4)

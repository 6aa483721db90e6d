"""policy.init=random: a real architecture's config.json with random weights, nothing else read (bench/gpu)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agemem.core.config import BUNDLED_TOKENIZER
from agemem.core.configlib import ConfigError
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import load_policy
from agemem.train.model_size import count_parameters, resolve_model_dims

REPO = Path(__file__).resolve().parents[2]
KIT_MODELS = REPO / "bench" / "gpu" / "models"
SMALL = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


def shrunk(tmp_path: Path, name: str) -> Path:
    """The kit's config of ``name`` at a test's width and depth; vocabulary, biases and tying kept."""
    raw = json.loads((KIT_MODELS / name / "config.json").read_text())
    target = tmp_path / name
    target.mkdir()
    (target / "config.json").write_text(json.dumps({**raw, **SMALL}))
    return target


def random_config(model: Path, **fields) -> PolicyConfig:
    return PolicyConfig(model=str(model), init="random", tokenizer=BUNDLED_TOKENIZER, device="cpu", **fields)


@pytest.mark.parametrize("name", ["qwen2.5-0.5b-instruct", "qwen2.5-7b-instruct"])
def test_random_policy_has_the_configs_architecture(tmp_path, name):
    model_dir = shrunk(tmp_path, name)
    lm, tokenizer = load_policy(random_config(model_dir))
    raw = json.loads((model_dir / "config.json").read_text())
    assert lm.config.vocab_size == raw["vocab_size"] > len(tokenizer)  # the published padded vocabulary, kept
    assert lm.config.tie_word_embeddings == raw["tie_word_embeddings"]
    assert lm.model.layers[0].self_attn.q_proj.bias is not None  # Qwen2's q/k/v biases
    # the plan counts what is built: agemem plan on a config-only directory sizes the same model
    assert (
        sum(p.numel() for p in lm.parameters()) == count_parameters(resolve_model_dims(random_config(model_dir))).total
    )
    assert lm.model.embed_tokens.weight.std().item() == pytest.approx(raw["initializer_range"], rel=0.05)


def test_same_seed_same_weights_and_half_precision_is_their_rounding(tmp_path):
    model_dir = shrunk(tmp_path, "qwen2.5-0.5b-instruct")
    first, _ = load_policy(random_config(model_dir))
    again, _ = load_policy(random_config(model_dir))
    other, _ = load_policy(random_config(model_dir, init_seed=1))
    half, _ = load_policy(random_config(model_dir, dtype="bfloat16"))
    for (name, a), b, c, h in zip(first.named_parameters(), again.parameters(), other.parameters(), half.parameters()):
        assert torch.equal(a, b), name
        assert h.dtype == torch.bfloat16 and torch.equal(a.to(torch.bfloat16), h), name  # the KL reference's copy
        if a.std() > 0:  # norms start at ones whatever the seed
            assert not torch.equal(a, c), name


def test_a_random_bf16_policy_is_what_loading_its_weights_in_bf16_gives(tmp_path):
    """The same parameters and the same fp32 buffers (rotary frequencies) as from_pretrained(dtype=bfloat16) of the
    fp32 draw: a cast of the whole module would round inv_freq to bf16 (the reference would then drift from the
    policy with the position)."""
    model_dir = shrunk(tmp_path, "qwen2.5-0.5b-instruct")
    fp32, _ = load_policy(random_config(model_dir))
    fp32.save_pretrained(tmp_path / "saved")
    (tmp_path / "saved" / "config.json").write_text((model_dir / "config.json").read_text())
    loaded, _ = load_policy(PolicyConfig(model=str(tmp_path / "saved"), tokenizer=BUNDLED_TOKENIZER, device="cpu",
                                         dtype="bfloat16"))  # fmt: skip
    drawn, _ = load_policy(random_config(model_dir, dtype="bfloat16"))
    expected = dict(loaded.named_buffers())
    for name, buffer in drawn.named_buffers():
        assert buffer.dtype == expected[name].dtype and torch.equal(buffer, expected[name]), name
    assert any(b.dtype == torch.float32 for b in expected.values())  # inv_freq: the case that matters
    for (name, a), b in zip(drawn.named_parameters(), loaded.parameters()):
        assert torch.equal(a, b), name


def test_the_kits_configs_are_the_published_models():
    # parameter counts published for Qwen2.5-0.5B / 1.5B / 7B (Instruct): 0.49B, 1.54B, 7.62B
    expected = {
        "qwen2.5-0.5b-instruct": 494_032_768,
        "qwen2.5-1.5b-instruct": 1_543_714_304,
        "qwen2.5-7b-instruct": 7_615_616_512,
    }
    for name, total in expected.items():
        assert count_parameters(resolve_model_dims(PolicyConfig(model=str(KIT_MODELS / name)))).total == total


def test_random_init_without_a_config_names_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"policy.init=random needs policy.model's config.json"):
        load_policy(random_config(tmp_path))


def test_init_is_validated():
    from agemem.core.configlib import load_config
    from agemem.entrypoints.roots import AgeMemConfig

    with pytest.raises(ConfigError, match="init"):
        load_config(AgeMemConfig, None, ["policy.init=randomly"])

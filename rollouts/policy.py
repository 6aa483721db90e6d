"""Loading the policy: the embedded tiny random Qwen2 model, a local directory or a hub id.

The tiny model is the default so everything runs on a laptop CPU with nothing downloaded:
a Qwen2-architecture network built from a config, randomly initialised from a seed, paired
with the real Qwen2.5 tokenizer shipped in ``agemem/assets``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agemem.core.chat import load_tokenizer
from agemem.core.config import BUNDLED_TOKENIZER, PolicyConfig
from agemem.core.configlib import ConfigError
from agemem.core.resources import resolve

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

TINY_POLICY = "tiny-random-qwen2"


def tiny_qwen2_config(config: PolicyConfig, vocab_size: int):
    """A few-million-parameter Qwen2 config; the vocabulary matches the tokenizer exactly, so
    every id the model can sample decodes."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=config.tiny_hidden_size,
        intermediate_size=4 * config.tiny_hidden_size,
        num_hidden_layers=config.tiny_layers,
        num_attention_heads=config.tiny_heads,
        num_key_value_heads=max(1, config.tiny_heads // 2),
        max_position_embeddings=32_768,
        tie_word_embeddings=True,
        rope_theta=config.tiny_rope_theta,
    )


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_policy(config: PolicyConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The policy model (eval mode, on ``config.device``) and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(config.tokenizer or (BUNDLED_TOKENIZER if config.model == TINY_POLICY else config.model))
    device = resolve_device(config.device)
    if config.model == TINY_POLICY:
        from transformers import Qwen2ForCausalLM

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.init_seed)  # the same seed always builds the same weights
            model = Qwen2ForCausalLM(tiny_qwen2_config(config, len(tokenizer)))
        model = model.to(dtype=torch_dtype(config.dtype))
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(
                resolve(config.model),
                dtype=torch_dtype(config.dtype),
                attn_implementation=config.attn_implementation or None,
            )
        except (OSError, ValueError) as err:
            raise ConfigError(
                f"policy.model={config.model!r} could not be loaded ({err}); give a local model directory, "
                f"a hub id (downloaded unless HF_HUB_OFFLINE=1), or {TINY_POLICY!r} for the embedded tiny model"
            ) from err
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.to(device).eval(), tokenizer

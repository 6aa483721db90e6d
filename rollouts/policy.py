"""Loading the policy: the embedded tiny random Qwen2 model, a local directory or a hub id.

The tiny model is the default so everything runs on a laptop CPU with nothing downloaded:
a Qwen2-architecture network built from a config, randomly initialised from a seed, paired
with the real Qwen2.5 tokenizer shipped in ``agemem/assets``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agemem.core.chat import load_tokenizer
from agemem.core.config import BUNDLED_TOKENIZER
from agemem.core.configlib import ConfigError
from agemem.core.resources import require_local_folder, resolve
from agemem.rollouts.config import PolicyConfig

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

    alternatives = f"a hub id (namespace/name) or {TINY_POLICY!r}, the embedded tiny model"
    require_local_folder(config.model, "policy.model", alternatives)
    tokenizer = load_tokenizer(config.tokenizer or (BUNDLED_TOKENIZER if config.model == TINY_POLICY else config.model))
    device = resolve_device(config.device)
    if config.model == TINY_POLICY:
        from transformers import Qwen2ForCausalLM

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.init_seed)  # the same seed always builds the same weights
            model = Qwen2ForCausalLM(tiny_qwen2_config(config, len(tokenizer)))
        model = model.to(dtype=torch_dtype(config.dtype))
    elif config.init == "random":
        model = random_policy(config)
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
    model = model.to(device).eval()
    if config.init == "random" and torch.cuda.is_available():
        torch.cuda.empty_cache()  # the fp32 draw's blocks, so that the first training step's peak is its own
    return model, tokenizer


def random_policy(config: PolicyConfig) -> PreTrainedModel:
    """``policy.init=random``: ``policy.model``'s config.json architecture with random weights in ``policy.dtype``.

    The weights are drawn in fp32 from ``policy.init_seed`` and then cast, so a bf16 copy built from the same seed
    (the KL reference) is the rounding of the fp32 one (the trainable masters). They are drawn on the current CUDA
    device when there is one (a 7B model in seconds; a CPU takes minutes) and moved to ``policy.device`` by the
    caller: the same seed gives the same weights on the same kind of device.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        architecture = AutoConfig.from_pretrained(resolve(config.model))
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"policy.init=random needs policy.model's config.json ({err}); point policy.model at a directory holding "
            "it (weights are not read) or at a hub id in the local cache"
        ) from err
    cuda = torch.cuda.is_available()
    devices = [torch.cuda.current_device()] if cuda else []
    with torch.random.fork_rng(devices=devices), torch.device("cuda" if cuda else "cpu"):
        torch.manual_seed(config.init_seed)
        model = AutoModelForCausalLM.from_config(
            architecture, dtype=torch.float32, attn_implementation=config.attn_implementation or None
        )
    return cast_parameters(model, torch_dtype(config.dtype))


def cast_parameters(model: PreTrainedModel, dtype) -> PreTrainedModel:
    """``model`` with its parameters in ``dtype`` and its buffers as they are, as ``from_pretrained(dtype=...)``
    leaves them: ``model.to(dtype)`` would also round the fp32 rotary frequencies (``inv_freq``) to bf16, an angle
    error that grows with the position (about a radian at 2k tokens)."""
    for parameter in model.parameters():
        parameter.data = parameter.data.to(dtype)
    return model

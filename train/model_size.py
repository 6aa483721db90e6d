"""Model size from the config alone: a decoder's dimensions and its parameter counts (base, LoRA adapters).

Used by ``agemem plan`` (:mod:`agemem.train.plan`). Nothing is loaded: the dimensions come from a local
``config.json``, the Hugging Face cache, a built-in table of the models our configs name, or the tiny model's
:class:`~agemem.rollouts.config.PolicyConfig`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.rollouts.config import PolicyConfig
from agemem.train.config import LoRAConfig


class PlanError(ConfigError):
    """A plan cannot be made from this input; the message names the fix."""


@dataclass(frozen=True)
class ModelDims:
    """The dimensions of a dense decoder-only transformer (Qwen2 / Qwen3 / Llama family)."""

    name: str
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    tie_word_embeddings: bool
    qkv_bias: bool
    """bias on q/k/v projections (Qwen2 always; others: ``attention_bias``)."""
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    """per-head RMSNorm on queries and keys (Qwen3)."""
    source: str
    """where the dimensions came from."""

    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim


# the models our configs name (config.json values as published on the hub); nothing may be downloaded
BUILTIN_DIMS: dict[str, dict[str, Any]] = {
    "qwen/qwen2.5-7b-instruct": {
        "model_type": "qwen2", "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "tie_word_embeddings": False,
    },
    "qwen/qwen3-4b-instruct-2507": {
        "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
        "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "tie_word_embeddings": True, "attention_bias": False,
    },
}  # fmt: skip
# same architecture, other weights
BUILTIN_DIMS["qwen/qwen2.5-7b"] = BUILTIN_DIMS["qwen/qwen2.5-7b-instruct"]
BUILTIN_DIMS["qwen/qwen3-4b"] = BUILTIN_DIMS["qwen/qwen3-4b-instruct-2507"]
BUILTIN_DIMS["qwen/qwen3-4b-thinking-2507"] = BUILTIN_DIMS["qwen/qwen3-4b-instruct-2507"]


def dims_from_config(raw: dict[str, Any], name: str, source: str) -> ModelDims:
    """:class:`ModelDims` from a ``config.json`` dict (a multimodal one's ``text_config`` is used)."""
    raw = raw.get("text_config") or raw
    if raw.get("num_experts") or raw.get("num_local_experts") or raw.get("n_routed_experts"):
        raise PlanError(f"{name}: mixture-of-experts models are not planned (only dense decoders); size it by hand")
    try:
        hidden, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
        model_type = str(raw.get("model_type", ""))
        return ModelDims(
            name=name,
            model_type=model_type,
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            # Qwen2 hard-codes bias=True on q/k/v (its config has no attention_bias); Llama/Qwen3 read the flag
            qkv_bias=model_type == "qwen2" or bool(raw.get("attention_bias", False)),
            o_bias=model_type != "qwen2" and bool(raw.get("attention_bias", False)),
            mlp_bias=bool(raw.get("mlp_bias", False)),
            qk_norm=model_type.startswith("qwen3"),
            source=source,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise PlanError(
            f"{name}: config.json lacks a dense-decoder dimension ({err}); a plan needs hidden_size, "
            "intermediate_size, num_hidden_layers, num_attention_heads and vocab_size"
        ) from err


def resolve_model_dims(policy: PolicyConfig) -> ModelDims:
    """The policy's dimensions without loading weights or downloading anything.

    Looked up in order: the tiny model (built from ``policy.tiny_*`` and the tokenizer's length, as
    ``agemem.rollouts.policy`` builds it), a local directory's ``config.json`` (through transformers' ``AutoConfig``
    when it knows the architecture), a hub id's ``config.json`` already in the Hugging Face cache, and
    :data:`BUILTIN_DIMS`.
    """
    from agemem.core.resources import resolve

    name = policy.model
    if name == "tiny-random-qwen2":
        from agemem.core.chat import load_tokenizer
        from agemem.core.config import BUNDLED_TOKENIZER
        from agemem.rollouts.policy import tiny_qwen2_config

        vocab = len(load_tokenizer(policy.tokenizer or BUNDLED_TOKENIZER))
        return dims_from_config(tiny_qwen2_config(policy, vocab).to_dict(), name, "policy.tiny_* (PolicyConfig)")
    path = Path(resolve(name)).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise PlanError(f"policy.model={name!r} is a directory without config.json; point it at a model directory")
        return dims_from_config(_local_config(path), name, f"{path / 'config.json'}")
    cached = _hub_cache_config(name)
    if cached is not None:
        return dims_from_config(json.loads(Path(cached).read_text()), name, f"Hugging Face cache ({cached})")
    if name.lower() in BUILTIN_DIMS:
        return dims_from_config(dict(BUILTIN_DIMS[name.lower()]), name, "built-in table (train/plan.py)")
    known = ", ".join(sorted({key for key in BUILTIN_DIMS}))
    raise PlanError(
        f"policy.model={name!r}: no config.json to read the model's size from (not a local directory, not in the "
        f"Hugging Face cache, not in the built-in table: {known}); set policy.model to a local directory holding "
        f"the model's config.json (weights are not needed), e.g. `huggingface-cli download {name} config.json "
        "--local-dir DIR` then policy.model=DIR"
    )


def _local_config(path: Path) -> dict[str, Any]:
    """config.json with transformers' defaults filled in where it knows the architecture, else the raw JSON."""
    raw = json.loads((path / "config.json").read_text())
    try:
        from transformers import AutoConfig

        return {**raw, **AutoConfig.from_pretrained(str(path)).to_dict()}
    except Exception:  # an architecture this transformers doesn't know (or none installed): the raw file
        return raw


def _hub_cache_config(repo_id: str) -> str | None:
    if repo_id.count("/") != 1:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:
        return None
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a decoder from its dimensions."""

    total: int
    embedding: int
    lm_head: int
    """0 when tied to the embedding."""
    per_layer: int
    largest_module: int
    """parameters of the largest single module (DeepSpeed's ``largest_layer_params``)."""
    trainable: int
    """``total`` for full fine-tuning, the adapters' for LoRA."""
    lora: int
    """LoRA adapter parameters (0 without LoRA)."""

    @property
    def frozen(self) -> int:
        """Parameters that get no gradient (the LoRA base)."""
        return self.total - self.trainable


def layer_parameters(dims: ModelDims) -> dict[str, int]:
    """Per decoder layer: ``h·q + h·kv·2 + q·h`` attention (GQA: kv = kv_heads·head_dim), ``3·h·i`` SwiGLU MLP,
    ``2h`` RMSNorm weights, biases where the architecture has them, ``2·head_dim`` for Qwen3's q/k norms."""
    h, q, kv, i = dims.hidden_size, dims.q_width, dims.kv_width, dims.intermediate_size
    return {
        "q_proj": h * q + (q if dims.qkv_bias else 0),
        "k_proj": h * kv + (kv if dims.qkv_bias else 0),
        "v_proj": h * kv + (kv if dims.qkv_bias else 0),
        "o_proj": q * h + (h if dims.o_bias else 0),
        "gate_proj": h * i + (i if dims.mlp_bias else 0),
        "up_proj": h * i + (i if dims.mlp_bias else 0),
        "down_proj": i * h + (h if dims.mlp_bias else 0),
        "norms": 2 * h + (2 * dims.head_dim if dims.qk_norm else 0),
    }


# in -> out features of each LoRA-able module (peft's `all-linear` means the seven projections)
def _lora_shapes(dims: ModelDims) -> dict[str, tuple[int, int]]:
    h, q, kv, i, v = dims.hidden_size, dims.q_width, dims.kv_width, dims.intermediate_size, dims.vocab_size
    return {
        "q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
        "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h),
        "lm_head": (h, v), "embed_tokens": (v, h),
    }  # fmt: skip


def lora_parameters(dims: ModelDims, lora: LoRAConfig) -> int:
    """Adapter parameters: ``r·(in + out)`` per adapted module (A is r x in, B is out x r; an adapted embedding
    has A: r x vocab and B: hidden x r), per layer for the projections, once for lm_head / embed_tokens."""
    shapes = _lora_shapes(dims)
    targets = list(lora.target_modules)
    if targets == ["all-linear"]:
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    unknown = [name for name in targets if name not in shapes]
    if unknown:
        raise PlanError(
            f"lora.target_modules: {unknown[0]!r} is not a module the plan knows; use names from "
            f"{', '.join(shapes)} (or ['all-linear'])"
        )
    total = 0
    for name in targets:
        fan_in, fan_out = shapes[name]
        total += lora.r * (fan_in + fan_out) * (1 if name in ("lm_head", "embed_tokens") else dims.num_layers)
    return total


def count_parameters(dims: ModelDims, lora: LoRAConfig | None = None) -> ParamCounts:
    """``total = V·h (embedding) + [V·h lm_head unless tied] + layers · per_layer + h (final norm)`` + adapters.

    Qwen2.5-7B: 152064·3584·2 + 28·233,057,792 + 3584 = 7,615,616,512 (published: 7.62B, non-embedding 6.53B);
    Qwen3-4B (tied): 151936·2560 + 36·100,930,816 + 2560 = 4,022,468,096 (published: 4.02B).
    """
    embedding = dims.vocab_size * dims.hidden_size
    lm_head = 0 if dims.tie_word_embeddings else embedding
    layer = layer_parameters(dims)
    per_layer = sum(layer.values())
    base = embedding + lm_head + dims.num_layers * per_layer + dims.hidden_size
    adapters = lora_parameters(dims, lora) if lora is not None and lora.enabled else 0
    largest = max(embedding, *(value for key, value in layer.items() if key != "norms"))
    return ParamCounts(
        total=base + adapters,
        embedding=embedding,
        lm_head=lm_head,
        per_layer=per_layer,
        largest_module=largest,
        trainable=adapters if adapters else base,
        lora=adapters,
    )

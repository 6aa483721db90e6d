"""``--model``: from what a user names to a policy the rollout driver can play.

Accepted forms, tried in this order:

* ``openai:<model>@<base_url>`` (or ``openai:<model>``, with ``engine.openai.base_url``): an
  OpenAI-compatible endpoint; ``engine.openai.api`` chooses token-id completions (vLLM, SGLang) or chat;
* ``tiny-random-qwen2``: the embedded tiny random policy (``policy.tiny_*``, ``policy.init_seed``);
* a training run directory written by ``agemem train`` (``output_dir``, holding ``checkpoints/``): its
  newest complete checkpoint;
* a checkpoint directory (``checkpoints/step_N/``, or its ``policy/`` folder);
* a LoRA adapter directory (``adapter_config.json``): loaded over its base model and merged;
* a Hugging Face model directory, or a hub id.

A checkpoint's base model settings (``policy.model`` for an adapter, the tiny model's size and seed)
come from the run's ``config.json`` when the run directory is known; an adapter outside a run uses its
``base_model_name_or_path``, else ``policy.model``. ``policy.device`` / ``dtype`` / ``attn_implementation``
always come from the evaluation config.
"""

from __future__ import annotations

import copy
import gc
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agemem.core.configlib import ConfigError, validate_tree
from agemem.core.resources import looks_like_path
from agemem.core.runs import latest_checkpoint
from agemem.eval.config import EvalRunConfig
from agemem.eval.report import slug, unique_labels
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import TINY_POLICY

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from agemem.rollouts.engines.base import Engine

ModelKind = Literal["openai", "tiny", "checkpoint", "lora", "hf"]
_OPENAI = re.compile(r"^openai:(?P<model>[^@]+)(?:@(?P<url>.+))?$")
# policy fields that describe the model itself (taken from a training run); the rest is how to run it
_IDENTITY_FIELDS = ("model", "tokenizer", "init", "init_seed", "tiny_hidden_size", "tiny_layers", "tiny_heads")


@dataclass
class ResolvedModel:
    spec: str
    """what the user wrote."""
    kind: ModelKind
    label: str
    """short name for tables, plots and folder names."""
    config: EvalRunConfig
    """the evaluation config with ``policy`` (and for endpoints ``engine``) set for this model."""
    adapter: str | None = None
    """LoRA adapter directory, loaded over ``config.policy.model``."""
    checkpoint: str | None = None
    """the checkpoint directory a training run or checkpoint resolved to."""

    def describe(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "kind": self.kind,
            "label": self.label,
            "policy": self.config.policy.model,
            "adapter": self.adapter,
            "checkpoint": self.checkpoint,
            "engine": self.config.engine.backend,
        }


@dataclass
class Backend:
    """What plays episodes for one model: its engine and the tokenizer prompts are encoded with."""

    engine: Engine
    tokenizer: PreTrainedTokenizerBase


def default_model(config: EvalRunConfig) -> str:
    """The model a run evaluates when no --model is given: the configured endpoint, else ``policy.model``."""
    remote = config.engine.openai
    return f"openai:{remote.model}@{remote.base_url}" if config.engine.backend == "openai" else config.policy.model


def resolve_model(spec: str, config: EvalRunConfig) -> ResolvedModel:
    """Classify ``spec`` and derive the config that loads it (nothing is loaded or downloaded here)."""
    config = copy.deepcopy(config)
    match = _OPENAI.match(spec)
    if match:
        config.engine.backend = "openai"
        config.engine.openai.model = match["model"]
        if match["url"]:
            config.engine.openai.base_url = match["url"]
        validate_tree(config)
        return ResolvedModel(spec, "openai", match["model"], config)
    if config.engine.backend == "openai":
        raise ConfigError(
            f"--model {spec!r} is a local model but engine.backend=openai; name an endpoint as "
            "openai:<model>@<base_url>, or drop engine.backend=openai"
        )
    if spec == TINY_POLICY:
        config.policy.model = TINY_POLICY
        return ResolvedModel(spec, "tiny", TINY_POLICY, config)
    path = Path(spec).expanduser()
    if path.is_dir():
        return _resolve_directory(spec, path, config)
    if looks_like_path(spec):
        raise ConfigError(
            f"--model {spec!r}: no such folder ({path.resolve()} does not exist); give a training run or checkpoint "
            f"directory, a LoRA adapter or Hugging Face model directory, a hub id, openai:<model>@<base_url>, "
            f"or {TINY_POLICY!r}"
        )
    config.policy.model = spec
    return ResolvedModel(spec, "hf", spec, config)


def _resolve_directory(spec: str, path: Path, config: EvalRunConfig) -> ResolvedModel:
    policy_dir, run_dir, checkpoint = training_layout(path)
    run_policy = _run_policy(run_dir) if run_dir is not None else {}
    label = f"{run_dir.name}/{checkpoint.name}" if run_dir is not None and checkpoint is not None else path.name
    if (policy_dir / "adapter_config.json").is_file():
        return _resolve_adapter(spec, policy_dir, run_policy, config, label, checkpoint)
    if not (policy_dir / "config.json").is_file():
        raise ConfigError(
            f"--model {spec!r}: {policy_dir} holds neither a model (config.json) nor a LoRA adapter "
            "(adapter_config.json); give a directory written by save_pretrained or by agemem train"
        )
    config.policy.model = str(policy_dir)
    config.policy.tokenizer = _tokenizer(policy_dir, config.policy.tokenizer, run_policy)
    kind: ModelKind = "checkpoint" if checkpoint is not None else "hf"
    return ResolvedModel(spec, kind, label, config, checkpoint=str(checkpoint) if checkpoint else None)


def training_layout(path: Path) -> tuple[Path, Path | None, Path | None]:
    """``(policy dir, run dir, checkpoint dir)`` for a run, a checkpoint, its policy/ folder, or any dir."""
    if (path / "checkpoints").is_dir():
        checkpoint = latest_checkpoint(path)
        if checkpoint is None:
            raise ConfigError(
                f"--model {str(path)!r} is a training run without a complete checkpoint under checkpoints/; "
                "wait for the first checkpoint (checkpoint.every) or name a model directory"
            )
        return checkpoint / "policy", path, checkpoint
    if (path / "trainer_state.json").is_file() and (path / "policy").is_dir():
        return path / "policy", _run_of(path), path
    if path.name == "policy" and (path.parent / "trainer_state.json").is_file():
        return path, _run_of(path.parent), path.parent
    return path, None, None


def _run_of(checkpoint: Path) -> Path | None:
    run = checkpoint.parent.parent
    return run if checkpoint.parent.name == "checkpoints" else None


def _run_policy(run_dir: Path) -> dict[str, Any]:
    """The model-identity fields of the run's policy section (``config.json`` written by agemem train)."""
    path = run_dir / "config.json"
    if not path.is_file():
        return {}
    try:
        policy = json.loads(path.read_text()).get("policy", {})
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path} is not the JSON config agemem train writes ({err}); fix or remove it") from err
    return {k: policy[k] for k in _IDENTITY_FIELDS if k in policy}


def _resolve_adapter(
    spec: str,
    adapter: Path,
    run_policy: dict[str, Any],
    config: EvalRunConfig,
    label: str,
    checkpoint: Path | None,
) -> ResolvedModel:
    try:
        base = json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path")
    except (OSError, ValueError) as err:
        raise ConfigError(f"{adapter}/adapter_config.json is not valid JSON ({err})") from err
    known = {f.name for f in fields(PolicyConfig)} - {"tokenizer"}
    for key, value in run_policy.items():
        if key in known:
            setattr(config.policy, key, value)
    if base:
        config.policy.model = base
    config.policy.tokenizer = _tokenizer(adapter, config.policy.tokenizer, run_policy)
    validate_tree(config)
    kind: ModelKind = "checkpoint" if checkpoint is not None else "lora"
    return ResolvedModel(
        spec, kind, label, config, adapter=str(adapter), checkpoint=str(checkpoint) if checkpoint else None
    )


def _tokenizer(directory: Path, configured: str, run_policy: dict[str, Any]) -> str:
    """The tokenizer saved with the weights wins (``""``: the model's own, or the adapter directory's);
    else ``policy.tokenizer``; else the training run's."""
    if (directory / "tokenizer_config.json").is_file():
        return str(directory) if (directory / "adapter_config.json").is_file() else ""
    return configured or run_policy.get("tokenizer", "")


def load_model(resolved: ResolvedModel) -> tuple[PreTrainedModel | None, PreTrainedTokenizerBase]:
    """The policy model (None for endpoints) and the tokenizer its prompts are encoded with."""
    from agemem.rollouts.policy import load_policy

    if resolved.kind == "openai":
        return None, endpoint_tokenizer(resolved.config)
    model, tokenizer = load_policy(resolved.config.policy)
    if resolved.adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, resolved.adapter).merge_and_unload().eval()
    return model, tokenizer


def endpoint_tokenizer(config: EvalRunConfig) -> PreTrainedTokenizerBase:
    """``policy.tokenizer`` if set, else the served model's name as a tokenizer; a chat endpoint whose model
    has no loadable tokenizer falls back to ``env.context.tokenizer`` (TN is then counted with that one)."""
    from agemem.core.chat import load_tokenizer

    remote = config.engine.openai
    if config.policy.tokenizer:
        return load_tokenizer(config.policy.tokenizer)
    try:
        return load_tokenizer(remote.model)
    except ConfigError:
        if remote.api == "chat":
            return load_tokenizer(config.env.context.tokenizer)
        raise ConfigError(
            f"openai:{remote.model}: engine.openai.api=completions sends token ids, so the prompts must be encoded "
            f"with the served model's tokenizer, and {remote.model!r} is not one; set policy.tokenizer=<hub id or "
            "directory of that tokenizer>, or use engine.openai.api=chat"
        ) from None


def load_backend(resolved: ResolvedModel) -> Backend:
    """The engine named by ``engine.backend`` over the loaded model (the vLLM engine gets a merged adapter's
    weights pushed once: vLLM itself loads the base named in the model's config)."""
    from agemem.rollouts.build import build_engine

    model, tokenizer = load_model(resolved)
    engine = build_engine(resolved.config.engine, model, tokenizer)
    sync = getattr(engine, "sync_weights", None)
    if sync is not None and resolved.adapter is not None:
        sync()
    return Backend(engine, tokenizer)


@dataclass
class LazyBackend:
    """Loads a model's engine the first time a run needs it (a fully resumed run loads nothing)."""

    resolved: ResolvedModel
    backend: Backend | None = None

    def get(self) -> Backend:
        if self.backend is None:
            self.backend = load_backend(self.resolved)
        return self.backend

    def release(self) -> None:
        """Drop the model (before the next one loads: two 7B models need not share a GPU)."""
        if self.backend is None:
            return
        self.backend = None
        gc.collect()
        if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
            sys.modules["torch"].cuda.empty_cache()


RunOne = Callable[[ResolvedModel, str, Path, LazyBackend, str], dict[str, Any]]
"""``(model, variant, output folder, its backend, its label) -> results``: one benchmark run."""


def evaluate_models(
    config: EvalRunConfig,
    out: str | Path,
    run_one: RunOne,
    write_comparison: Callable[[Path, list[dict[str, Any]]], None],
    *,
    backends: dict[str, Backend] | None = None,
) -> list[dict[str, Any]]:
    """Run ``run_one`` for every model of ``eval.models`` (default: the configured policy or endpoint) under every
    ``eval.variants``, the benchmark-independent part of ``agemem eval``.

    One model and one variant write into ``out`` itself; several write one folder per pair
    (``out/<model>__<variant>/``) and then ``write_comparison(out, runs)``. ``backends`` maps a model spec to a
    ready engine and tokenizer (tests, or an engine built elsewhere); other models are loaded once each, when a run
    first needs them, and released after their last variant.
    """
    out = Path(out)
    specs = list(config.eval.models) or [default_model(config)]
    resolved = [resolve_model(spec, config) for spec in specs]
    labels = unique_labels([r.label for r in resolved])
    pairs = [(i, variant) for i in range(len(resolved)) for variant in config.eval.variants]
    single = len(pairs) == 1
    lazy = [LazyBackend(r, (backends or {}).get(r.spec)) for r in resolved]
    runs = []
    for i, variant in pairs:
        folder = out if single else out / f"{slug(labels[i])}__{variant}"
        runs.append(run_one(resolved[i], variant, folder, lazy[i], labels[i]))
        if variant == config.eval.variants[-1]:
            lazy[i].release()
    if not single:
        write_comparison(out, runs)
    return runs

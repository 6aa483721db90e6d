"""The warm start shipped in the package (``learn.warm_start=bundled:learn-warm-start``) and the command that
rebuilds it: ``agemem learn --config configs/learn_cpu.yaml --bundle-warm-start agemem/assets/models/learn-warm-start``.

Stages 1-3 of the recipe's first seed run (or are read back from ``output_dir/seed_N``), then the policy and its
tokenizer are copied into the folder with a ``MANIFEST.json``: each file's SHA-256, the seed, the settings that
shaped it and the library versions and thread count it was trained with. The same command on the same versions and
thread count writes the same bytes (every stage is seeded; :func:`check_bundle` tells whether files still match).
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError, to_dict

if TYPE_CHECKING:
    from agemem.recipes.learn.config import LearnRunConfig

BUNDLED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)
"""what GRPO and the evaluations load from a warm start: the policy and its tokenizer (no SFT logs)."""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bundle_warm_start(
    config: LearnRunConfig, destination: str | Path, *, progress: bool = True, command: str = ""
) -> dict[str, Any]:
    """Train (or read back) the warm start of ``config.learn.seeds[0]`` and copy it into ``destination``;
    return the manifest written beside it. ``command``: the command that built it, recorded as the manifest's
    ``rebuild`` (default: the shipped recipe's)."""
    import tokenizers
    import torch
    import transformers
    import trl

    from agemem.core.encoders import build_encoder
    from agemem.recipes.learn.recipe import train_warm_start
    from agemem.train.loop import Timer

    if config.learn.warm_start:
        raise ConfigError(
            f"learn.warm_start={config.learn.warm_start!r}: bundling trains a warm start, it cannot start from one; "
            'drop the override (learn.warm_start="")'
        )
    seed = config.learn.seeds[0]
    timer = Timer()  # the stages' laps, unused here: bundling reports no timings
    out = Path(config.output_dir) / f"seed_{seed}"
    warm = train_warm_start(config, seed, out, build_encoder(config.env.encoder), timer, progress=progress)
    destination = Path(destination)
    staging = destination.with_name(destination.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in BUNDLED_FILES:
        shutil.copyfile(warm / name, staging / name)
    manifest = {
        "what": "agemem learn's warm start (policy and tokenizer) for one seed; "
        "docs/learning.md#a-first-run-grpo-from-the-bundled-warm-start",
        "rebuild": command or f"agemem learn --config configs/learn_cpu.yaml --bundle-warm-start {destination}",
        "seed": seed,
        "files": {name: sha256(staging / name) for name in BUNDLED_FILES},
        "built_with": {  # the bundling process's: a rebuild writes the same bytes on the same
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "tokenizers": tokenizers.__version__,
            "torch_threads": torch.get_num_threads(),
            "machine": platform.machine(),
        },
        "settings": warm_start_settings(config),
    }
    (staging / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(destination, ignore_errors=True)
    staging.replace(destination)
    return manifest


def warm_start_settings(config: LearnRunConfig) -> dict[str, Any]:
    """The settings that shape a warm start (stages 1-3): the recipe's, minus what only the evaluation and the GRPO
    stage read, and the task, policy, episode and environment sections."""
    settings = {key: to_dict(config)[key] for key in WARM_START_SECTIONS}
    for key in NOT_WARM_START:
        settings["learn"].pop(key)
    return settings


def stale_settings(recorded: dict[str, Any], shipped: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The dotted keys where a bundle's ``recorded`` settings differ from the ``shipped`` recipe's: a value that
    differs, or a key the bundle does not record (added to the config after it was built) whose shipped value is not
    its default (a new setting defaults to the behaviour before it, which is what the bundle was trained with)."""
    stale = []
    for key, value in shipped.items():
        default = defaults.get(key) if isinstance(defaults, dict) else None
        if key not in recorded:
            if value != default:
                stale.append(key)
        elif isinstance(value, dict) and isinstance(recorded[key], dict):
            stale += [f"{key}.{inner}" for inner in stale_settings(recorded[key], value, default or {})]
        elif recorded[key] != value:
            stale.append(key)
    return stale + [key for key in recorded if key not in shipped]


WARM_START_SECTIONS = ("learn", "data", "policy", "rollout", "env", "distractors")
NOT_WARM_START = ("seeds", "warm_start", "eval_tasks", "eval_seed")
"""``learn`` keys that do not change a seed's warm start (which seed is in the manifest's ``seed``)."""


def check_bundle(folder: str | Path) -> list[str]:
    """The files of a bundled warm start whose bytes differ from its manifest (missing ones included)."""
    folder = Path(folder)
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    return [
        name
        for name, digest in manifest["files"].items()
        if not (folder / name).is_file() or sha256(folder / name) != digest
    ]

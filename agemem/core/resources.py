"""Locations of the assets shipped inside the package (tokenizer, HotpotQA sample), and telling a local
folder from a hub id."""

from __future__ import annotations

from pathlib import Path

from agemem.core.configlib import ConfigError

ASSETS = Path(__file__).resolve().parents[1] / "assets"  # agemem/assets, beside core/
BUNDLED = {
    "qwen2.5-instruct": ASSETS / "tokenizers" / "qwen2.5-instruct",
    "hotpotqa": ASSETS / "data" / "hotpotqa" / "hotpot_dev_distractor_sample.json",
    # `agemem learn`'s warm start for seed 0 of configs/learn_cpu.yaml, with its tokenizer (docs/learning.md)
    "learn-warm-start": ASSETS / "models" / "learn-warm-start",
}


def resolve(name: str) -> str:
    """Map ``"bundled:<asset>"`` to its path inside the package; other names pass through."""
    if not name.startswith("bundled:"):
        return name
    key = name.removeprefix("bundled:")
    if key not in BUNDLED:
        raise ConfigError(f"unknown bundled asset {name!r}; choose one of {', '.join('bundled:' + k for k in BUNDLED)}")
    return str(BUNDLED[key])


def looks_like_path(name: str) -> bool:
    """Whether ``name`` names a local folder rather than a hub id (``namespace/name``): it starts with ``/``,
    ``.`` or ``~``, has more than one ``/`` or a backslash, or its first component is an existing local folder
    (``runs/grpo`` where ``runs/`` exists)."""
    if name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name:
        return True
    return "/" in name and Path(name.split("/", 1)[0]).expanduser().is_dir()


def require_local_folder(name: str, what: str, alternatives: str = "a hub id as namespace/name") -> None:
    """Refuse at once a ``name`` that looks like a local folder (:func:`looks_like_path`) and does not exist:
    checked before any network attempt, so a mistyped path is "no such folder", not a hub lookup that retries
    for a minute and then blames the connection. ``what`` names the setting, ``alternatives`` what else it takes."""
    if name.startswith("bundled:") or not looks_like_path(name):
        return
    path = Path(name).expanduser()
    if not path.exists():
        raise ConfigError(
            f"{what}={name!r}: no such folder ({path.resolve()} does not exist); check the path, or give {alternatives}"
        )

"""Locations of the assets shipped inside the package (tokenizer, HotpotQA sample)."""

from __future__ import annotations

from pathlib import Path

from agemem.core.configlib import ConfigError

ASSETS = Path(__file__).resolve().parents[1] / "assets"  # agemem/assets, beside core/
BUNDLED = {
    "qwen2.5-instruct": ASSETS / "tokenizers" / "qwen2.5-instruct",
    "hotpotqa": ASSETS / "data" / "hotpotqa" / "hotpot_dev_distractor_sample.json",
}


def resolve(name: str) -> str:
    """Map ``"bundled:<asset>"`` to its path inside the package; other names pass through."""
    if not name.startswith("bundled:"):
        return name
    key = name.removeprefix("bundled:")
    if key not in BUNDLED:
        raise ConfigError(f"unknown bundled asset {name!r}; choose one of {', '.join('bundled:' + k for k in BUNDLED)}")
    return str(BUNDLED[key])

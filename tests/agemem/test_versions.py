"""Version floors and known-bad combinations: refused with the fix named, and the floors in step with
pyproject.toml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from packaging.version import Version

from agemem.core.configlib import ConfigError
from agemem.core.versions import TESTED_FLOORS, check_versions, installed_version, version_problems

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def at_floors(**overrides: str) -> dict[str, Version | None]:
    versions = {name: Version(floor) for name, floor in TESTED_FLOORS.items()}
    versions.update({name: Version(value) for name, value in overrides.items()})
    return versions


def test_the_floors_themselves_pass_for_every_feature():
    assert version_problems({"deepspeed", "vllm"}, at_floors()) == []


def test_accelerate_that_steps_deepspeed_per_micro_batch_is_refused_for_deepspeed_only():
    versions = at_floors(accelerate="1.7.0")
    deepspeed = version_problems({"deepspeed"}, versions)
    plain = version_problems(set(), versions)
    # under the floor in both cases; the DeepSpeed run also gets the known-bad rule and its reason
    assert any("older than the tested floor" in p for p in plain) and len(plain) == 1
    assert len(deepspeed) == 2 and "steps the optimizer after every micro-batch" in deepspeed[1]
    assert "pip install 'accelerate>=1.8.1'" in deepspeed[1]


def test_a_package_that_is_not_installed_is_not_a_version_problem():
    versions = at_floors()
    versions["deepspeed"] = None
    versions["vllm"] = None
    assert version_problems({"deepspeed", "vllm"}, versions) == []


def test_check_versions_raises_a_config_error_listing_the_fix(monkeypatch):
    old = lambda name: Version("0.1") if name == "trl" else None  # noqa: E731
    monkeypatch.setattr("agemem.core.versions.installed_version", old)
    with pytest.raises(ConfigError, match=r"trl 0.1 is older than the tested floor .*pip install 'trl>="):
        check_versions({"vllm"})


def test_installed_versions_read_local_builds_as_their_release():
    # the environment running this test passed the floors (CI installs them), so check_versions accepts it
    check_versions(set())
    torch_version = installed_version("torch")
    assert torch_version is not None and torch_version.local is None  # 2.13.0+cpu -> 2.13.0


def test_pyproject_floors_are_the_tested_floors():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    floors = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?>=([0-9.]+)(?:,.*)?", requirement)
        if match:
            floors[match.group(1).lower()] = match.group(2)
    for package, floor in TESTED_FLOORS.items():
        assert floors.get(package) == floor, f"pyproject.toml's floor of {package} is not the tested {floor}"

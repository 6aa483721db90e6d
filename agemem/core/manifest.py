"""Checkpoint manifests: what a complete checkpoint directory holds, so a cut-short or overwritten file is
found before anything loads it.

``manifest.json`` (written last, after every other file) lists each file's size, optionally its sha256, and
for the formats we can check cheaply whether the file's header is readable:

* ``.safetensors``: the 8-byte header length, the JSON header, and that the file is as long as the header's
  last tensor says;
* ``.bin`` / ``.pt`` / ``.pth`` written by ``torch.save`` (zip archives): the central directory at the
  end of the file opens (a truncated archive loses it);
* ``.json``: it parses.

:func:`verify` compares a directory with its manifest and returns the problems, one sentence each; an
empty list means the checkpoint is intact as far as sizes, headers (and checksums, when recorded and
asked for) can tell.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
_CHUNK = 8 << 20
TORCH_ZIP_SUFFIXES = (".bin", ".pt", ".pth")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 8 MiB chunks (hashlib releases the GIL: files hash in parallel)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def header_problem(path: Path) -> str | None:
    """Why ``path``'s format header is unreadable, or None (also for formats without a cheap check)."""
    name = path.name
    try:
        if name.endswith(".safetensors"):
            return _safetensors_problem(path)
        if name.endswith(TORCH_ZIP_SUFFIXES) and zipfile.is_zipfile(path) is False and _looks_like_zip_start(path):
            return "a torch.save archive whose end (the zip central directory) is missing: the file was cut short"
        if name.endswith(".json"):
            json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as error:
        return f"unreadable ({type(error).__name__}: {error})"
    return None


def _looks_like_zip_start(path: Path) -> bool:
    """torch.save writes zip archives ("PK\\x03\\x04"); older pickled files are not checked."""
    with path.open("rb") as handle:
        return handle.read(4) == b"PK\x03\x04"


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            return f"a safetensors file of {size} bytes has no header"
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > size - 8:
            return f"safetensors header claims {header_len} bytes but the file has {size}: cut short"
        header = json.loads(handle.read(header_len))
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end > size:
        return f"safetensors tensors end at byte {8 + header_len + end} but the file has {size}: cut short"
    return None


def _entry(root: Path, path: Path, checksums: bool) -> tuple[str, dict[str, Any]]:
    entry: dict[str, Any] = {"bytes": path.stat().st_size}
    if checksums:
        entry["sha256"] = sha256_file(path)
    return path.relative_to(root).as_posix(), entry


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)


def header_problems(root: Path) -> list[str]:
    """Unreadable headers of the files under ``root`` (what can be checked without a manifest)."""
    return [f"{p.relative_to(root)}: {why}" for p in _files(root) if (why := header_problem(p)) is not None]


def write_manifest(
    root: Path, *, checksums: bool, extra: dict[str, Any] | None = None, threads: int = 8
) -> dict[str, Any]:
    """Record every file under ``root`` (sizes, and sha256 when ``checksums``) in ``root/manifest.json``,
    with the total size and ``extra`` (the writer's notes, such as how long the save took).

    Call it after every other file is written: the manifest's presence says the directory was complete.
    """
    files = _files(root)
    problems = header_problems(root)
    if problems:  # a writer that produced an unreadable file must not certify it
        raise RuntimeError(f"not writing the manifest of {root}: " + "; ".join(problems))
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        entries = dict(pool.map(lambda p: _entry(root, p, checksums), files))
    total = sum(entry["bytes"] for entry in entries.values())
    manifest = {"version": MANIFEST_VERSION, "checksums": checksums, "bytes": total, **(extra or {}), "files": entries}
    tmp = root / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    tmp.rename(root / MANIFEST_NAME)
    return manifest


def verify(root: Path, *, checksums: bool = True, threads: int = 8) -> list[str]:
    """Problems of the directory ``root`` against its manifest (empty: it verifies).

    Sizes and readable headers are always checked; sha256 too when ``checksums`` and the manifest has them.
    """
    manifest_path = root / MANIFEST_NAME
    if not manifest_path.is_file():
        return [f"no {MANIFEST_NAME} (the checkpoint was not finished, or predates manifests)"]
    try:
        manifest = json.loads(manifest_path.read_text())
        entries: dict[str, dict[str, Any]] = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        return [f"{MANIFEST_NAME} is unreadable ({type(error).__name__}: {error})"]
    problems = []
    present = {p.relative_to(root).as_posix() for p in _files(root)}
    for name in sorted(set(entries) - present):
        problems.append(f"{name} is missing")
    to_hash = []
    for name in sorted(set(entries) & present):
        path, entry = root / name, entries[name]
        size = path.stat().st_size
        if size != entry["bytes"]:
            problems.append(f"{name} has {size} bytes, the manifest says {entry['bytes']}")
        elif (why := header_problem(path)) is not None:
            problems.append(f"{name}: {why}")
        elif checksums and "sha256" in entry:
            to_hash.append(name)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for name, digest in zip(to_hash, pool.map(lambda n: sha256_file(root / n), to_hash), strict=True):
            if digest != entries[name]["sha256"]:
                problems.append(f"{name}'s sha256 differs from the manifest's (its content changed)")
    return problems

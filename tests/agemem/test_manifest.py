"""Checkpoint manifests find what a full disk, an interrupted copy or a stray write does to a checkpoint:
a file cut short, overwritten, missing; and say nothing about an intact one."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from agemem.core.manifest import MANIFEST_NAME, header_problem, verify, write_manifest
from agemem.core.runs import CheckpointError, checkpoint_problems, resolve_checkpoint, scan_checkpoints


def make_checkpoint(root, step=1):
    """A checkpoint directory in the trainer's layout with each checked format in it."""
    path = root / "checkpoints" / f"step_{step:06d}"
    (path / "policy").mkdir(parents=True)
    (path / "accelerate").mkdir()
    save_file({"w": torch.arange(64, dtype=torch.float32).reshape(8, 8)}, path / "policy" / "model.safetensors")
    torch.save({"state": {0: {"exp_avg": torch.ones(100)}}}, path / "accelerate" / "optimizer.bin")
    (path / "trainer_state.json").write_text(json.dumps({"step": step, "tasks_seen": 2 * step, "world_size": 1}))
    (path / "policy" / "notes.txt").write_text("no format check, only size and checksum")
    write_manifest(path, checksums=True, extra={"write_s": 0.5})
    return path


def cut(path, keep):
    path.write_bytes(path.read_bytes()[:keep])


def test_an_intact_checkpoint_verifies_and_its_manifest_lists_every_file(tmp_path):
    path = make_checkpoint(tmp_path)
    assert verify(path) == [] and checkpoint_problems(path, checksums=True) == []
    manifest = json.loads((path / MANIFEST_NAME).read_text())
    assert sorted(manifest["files"]) == [
        "accelerate/optimizer.bin",
        "policy/model.safetensors",
        "policy/notes.txt",
        "trainer_state.json",
    ]
    files = [p for p in path.rglob("*") if p.is_file() and p.name != MANIFEST_NAME]
    assert manifest["bytes"] == sum(p.stat().st_size for p in files)
    assert manifest["write_s"] == 0.5 and len(manifest["files"]["trainer_state.json"]["sha256"]) == 64


@pytest.mark.parametrize(
    ("name", "keep", "says"),
    [
        ("policy/model.safetensors", 4, "bytes, the manifest says"),
        ("accelerate/optimizer.bin", 100, "bytes, the manifest says"),
    ],
)
def test_a_file_cut_short_is_found(tmp_path, name, keep, says):
    path = make_checkpoint(tmp_path)
    cut(path / name, keep)
    problems = verify(path, checksums=False)
    assert len(problems) == 1 and problems[0].startswith(name) and says in problems[0]


def test_headers_alone_find_truncation_without_a_manifest(tmp_path):
    path = make_checkpoint(tmp_path)
    (path / MANIFEST_NAME).unlink()  # a checkpoint written before manifests: only headers can be checked
    cut(path / "policy" / "model.safetensors", 100)
    cut(path / "accelerate" / "optimizer.bin", 200)
    problems = checkpoint_problems(path)
    assert len(problems) == 2
    assert "accelerate/optimizer.bin" in problems[0] and "cut short" in problems[0]
    assert "policy/model.safetensors" in problems[1] and "cut short" in problems[1]


def test_same_size_garbage_is_found_by_the_header_check_or_the_checksum(tmp_path):
    path = make_checkpoint(tmp_path)
    state = path / "trainer_state.json"
    state.write_text("x" * state.stat().st_size)  # same size: only the content says it is wrong
    assert "unreadable" in verify(path, checksums=False)[0]
    notes = path / "policy" / "notes.txt"
    state.write_text(json.dumps({"step": 1, "tasks_seen": 2, "world_size": 1}))  # restored
    notes.write_text("N" + notes.read_text()[1:])  # one byte changed, no format to check
    assert verify(path, checksums=False) == []
    changed = "policy/notes.txt's sha256 differs from the manifest's (its content changed)"
    assert verify(path, checksums=True) == [changed]


def test_a_missing_file_or_manifest_is_a_problem(tmp_path):
    path = make_checkpoint(tmp_path)
    (path / "accelerate" / "optimizer.bin").unlink()
    assert verify(path) == ["accelerate/optimizer.bin is missing"]
    (path / MANIFEST_NAME).write_text("{not json")
    assert "manifest.json is unreadable" in verify(path)[0]
    (path / MANIFEST_NAME).unlink()
    assert "no manifest.json" in verify(path)[0]


def test_the_manifest_refuses_to_certify_an_unreadable_file(tmp_path):
    path = make_checkpoint(tmp_path)
    cut(path / "policy" / "model.safetensors", 20)
    with pytest.raises(RuntimeError, match=r"model\.safetensors"):
        write_manifest(path, checksums=False)


def test_header_check_of_a_safetensors_file_whose_tensors_run_past_the_end(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"w": torch.zeros(1000)}, path)
    cut(path, path.stat().st_size - 1)  # the header is whole; the last tensor is one byte short
    assert "cut short" in header_problem(path)


def test_the_scan_skips_newer_broken_checkpoints_and_says_why(tmp_path):
    for step in (1, 2, 3):
        make_checkpoint(tmp_path, step)
    checkpoints = tmp_path / "checkpoints"
    cut(checkpoints / "step_000003" / "policy" / "model.safetensors", 10)
    (checkpoints / "step_000002" / "manifest.json").unlink()  # no manifest: its headers read, so it is used
    (checkpoints / "step_000004.tmp").mkdir()  # a save in progress is never a candidate
    scan = scan_checkpoints(tmp_path)
    assert scan.chosen == checkpoints / "step_000002"
    assert [path.name for path, _ in scan.skipped] == ["step_000003"]
    assert scan.describe_skipped()[0].startswith("skipped step_000003: policy/model.safetensors has 10 bytes")


def test_resume_from_names_a_step_or_a_path(tmp_path):
    path = make_checkpoint(tmp_path, 7)
    assert resolve_checkpoint(tmp_path, "step_7") == path == resolve_checkpoint(tmp_path, "7")
    assert resolve_checkpoint(tmp_path, str(path)) == path
    with pytest.raises(CheckpointError, match="step_000009 does not exist; the run's checkpoints: step_000007"):
        resolve_checkpoint(tmp_path, "step_9")
    with pytest.raises(CheckpointError, match="nor step_N"):
        resolve_checkpoint(tmp_path, "latest")

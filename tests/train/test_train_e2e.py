"""The whole loop on the tiny policy: weights change, a killed run resumes and reproduces the
uninterrupted run's metrics and weights, the CLI writes what it promises."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from agemem.entrypoints.cli import main
from agemem.rollouts.records import read_trajectories
from tests.train.tiny_run import TINY, metrics, weights


def test_training_writes_metrics_samples_and_checkpoints_and_changes_the_weights(uninterrupted):
    out = uninterrupted
    records = metrics(out / "metrics.jsonl")
    assert [m["step"] for m in records] == [1, 2, 3]
    first = records[0]
    for key in ("reward/total", "reward/memory/storage", "advantage/zero_variance_fraction", "train/loss", "train/kl"):
        assert key in first
    assert first["episodes"] == 4 and first["samples/llm_steps"] == 4 * 3  # 2 tasks x K=2, 3 steps each
    assert records[1]["train/kl"] > 0  # the policy moved away from the reference after step 1
    raw = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert raw["time/update_s"] > 0 and raw["throughput/train_tokens_per_s"] > 0
    assert 0 < raw["throughput/prefix_cache_share"] < 1  # steps 2 and 3 of an episode extend step 1's prompt
    samples = list(read_trajectories(out / "trajectories.jsonl"))
    assert [s.meta["train_step"] for s in samples] == [1, 1, 2, 2, 3, 3] and samples[0].steps
    kept = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert kept == ["step_000002", "step_000003"]  # keep_last=2 of tiny_cpu.yaml
    state = json.loads((out / "checkpoints" / "step_000003" / "trainer_state.json").read_text())
    assert state == {"step": 3, "tasks_seen": 6, "world_size": 1}
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy

    initial, _ = load_policy(PolicyConfig(device="cpu"))
    final = weights(out, 3)
    changed = [k for k, v in initial.state_dict().items() if k in final and not torch.equal(v, final[k])]
    assert len(changed) > 10


def test_a_killed_run_resumes_and_reproduces_the_uninterrupted_run(uninterrupted, tmp_path, monkeypatch, capsys):
    import agemem.train.update

    real_update = agemem.train.update.policy_update
    calls = []

    def dies_in_step_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed mid-step: step 3's rollout done, its update never finished
        return real_update(*args, **kwargs)

    monkeypatch.setattr(agemem.train.update, "policy_update", dies_in_step_3)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY, "max_steps=3", f"output_dir={tmp_path}"])
    # no traceback: one line naming the checkpoint left and the command that continues from it
    assert exit_info.value.code == 130
    error = capsys.readouterr().err
    assert f"stopped at once by Ctrl-C; the last checkpoint is {tmp_path / 'checkpoints' / 'step_000002'}" in error
    assert error.rstrip().endswith("--resume") and "Traceback" not in error
    assert [m["step"] for m in metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    monkeypatch.setattr(agemem.train.update, "policy_update", real_update)

    assert main(["train", *TINY, "max_steps=3", f"output_dir={tmp_path}", "--resume"]) == 0
    assert metrics(tmp_path / "metrics.jsonl") == metrics(uninterrupted / "metrics.jsonl")
    resumed, full = weights(tmp_path, 3), weights(uninterrupted, 3)
    for key in full:
        torch.testing.assert_close(resumed[key], full[key], rtol=0, atol=0)


def test_a_second_run_into_the_same_directory_must_say_resume(uninterrupted, capsys, monkeypatch):
    import agemem.train.loop

    monkeypatch.setattr(agemem.train.loop, "TrainRun", None)  # refused before any setup (a model load, a corpus)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY, "max_steps=3", f"output_dir={uninterrupted}"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "already holds a run with checkpoints (newest step_000003); add --resume to continue it" in error


def test_resuming_a_finished_run_trains_nothing_and_past_it_is_an_error(uninterrupted, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert main(["train", *TINY, "max_steps=3", f"output_dir={run}", "--resume"]) == 0
    assert "loaded step 3 of 3: the run is complete, nothing to train" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY, "max_steps=2", f"output_dir={run}", "--resume"])
    assert exit_info.value.code == 2
    assert "is at step 3, past max_steps=2; give max_steps above 3" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before  # config.json not rewritten


def test_an_earlier_run_without_checkpoints_is_replaced_with_a_printed_line(tmp_path, capsys, caplog):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    assert main(["train", *TINY, "max_steps=1", "checkpoint.every=0", f"output_dir={tmp_path}"]) == 0
    error = capsys.readouterr().err
    assert "holds an earlier run without a checkpoint (metrics.jsonl); starting afresh over it" in error
    assert [m["step"] for m in metrics(tmp_path / "metrics.jsonl")] == [1]
    (line,) = [line for line in error.splitlines() if line.startswith("step ")]  # one console line per step
    assert line.startswith("step 1/1 | reward ") and " eta 0:00:00" in line
    # quiet by default: the tied-embedding notice accelerate logs at every checkpoint is not shown
    assert (tmp_path / "checkpoints" / "step_000001").is_dir() and "Removed shared tensor" not in caplog.text


def test_max_steps_zero_is_a_configuration_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY, "max_steps=0", f"output_dir={tmp_path}"])
    assert exit_info.value.code == 2 and "max_steps=0 must be >= 1" in capsys.readouterr().err


def test_resume_without_a_checkpoint_names_the_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY, f"output_dir={tmp_path}", "--resume"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 1 and "no complete checkpoint" in error and str(tmp_path) in error


def test_bad_training_settings_are_config_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY, f"output_dir={tmp_path}", "sampling.temperature=0"])
    assert exit_info.value.code == 2 and "temperature > 0" in capsys.readouterr().err


def test_lora_training_saves_the_adapter_and_keeps_the_base_frozen(tmp_path):
    out = tmp_path / "lora"
    args = ["train", *TINY, "max_steps=2", f"output_dir={out}", "lora.enabled=true", "lora.r=4", "lora.alpha=8"]
    assert main([*args, "lora.target_modules=[q_proj,v_proj]"]) == 0
    policy_dir = out / "checkpoints" / "step_000002" / "policy"
    adapter_config = json.loads((policy_dir / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4 and sorted(adapter_config["target_modules"]) == ["q_proj", "v_proj"]
    adapter = load_file(policy_dir / "adapter_model.safetensors")
    assert adapter and all("lora_" in key for key in adapter)
    records = metrics(out / "metrics.jsonl")
    # the reference is the adapter-free base: identical at step 1 (lora_B starts at 0), apart after it
    assert records[0]["train/kl"] == 0.0 and records[1]["train/kl"] > 0

"""`agemem learn` end to end at toy size: every stage runs, GRPO changes the warm start's
weights, the report, table and plot are written, and a finished seed is never redone."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
from rich.console import Console

from agemem.core.configlib import load_config
from agemem.entrypoints.cli import main
from agemem.recipes.learn import LearnRunConfig, report_table

FAST = [
    "learn.sft_tasks=24",
    "learn.sft_drills=6",
    "learn.sft_answer_copies=16",
    "learn.eval_tasks=4",
    "learn.tokenizer_tasks=60",
    "learn.vocab_size=400",
    "learn.sft_epochs=1",
    "learn.copy_steps=4",
    "max_steps=2",
    "train.tasks_per_step=2",
    "rollout.rollouts_per_task=2",
    "policy.tiny_hidden_size=32",
    "policy.tiny_layers=1",
    "sampling.max_tokens=24",
    "logging.progress=false",
]


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    out = tmp_path_factory.mktemp("learn")
    assert main(["learn", "--config", "configs/learn_cpu.yaml", f"output_dir={out}", *FAST]) == 0
    return out


def test_every_stage_leaves_its_output(learned):
    seed = learned / "seed_0"
    stages = ("tokenizer", "demonstrations.jsonl", "drills.jsonl", "warm_start", "eval_warm_start.jsonl", "grpo")
    for name in (*stages, "eval_grpo.jsonl"):
        assert (seed / name).exists(), name
    result = json.loads((seed / "result.json").read_text())
    assert [row["step"] for row in result["reward_curve"]] == [1, 2]
    assert {"reward/total", "episode/memory_adds", "episode/retrievals"} <= set(result["reward_curve"][0])
    assert len(result["em_differences"]) == 4  # one paired difference per held-out task
    stage_names = ["tokenizer", "demonstrate", "warm_start", "eval_warm_start", "grpo", "eval_grpo"]
    assert [f"{name}_s" for name in stage_names] == [k for k in result["timings"] if k != "total_s"]
    if result["peak_resident_gib"]:  # Linux: each stage's own peak (reset between stages)
        assert list(result["peak_resident_gib"]) == stage_names
        assert all(0.1 < gib < 16 for gib in result["peak_resident_gib"].values())
    metrics = [json.loads(line) for line in (seed / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert all(0 < m["memory/resident_gib"] <= m["memory/peak_resident_gib"] for m in metrics)
    report = json.loads((learned / "learning.json").read_text())
    assert report["seeds"] == [0] and report["reward_mode"] == "composite"
    assert set(report["before"]) == set(report["after"])
    assert (learned / "learning.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    console = Console(record=True, width=200)
    console.print(report_table(report))
    table = console.export_text()
    assert "n/a (one seed)" in table and "nan" not in table  # no interval across a single seed
    assert "seed 0 EM" in table and "GiB peak" in table
    sft = json.loads((seed / "warm_start" / "sft_metrics.json").read_text())
    assert 0 < sft["drill_sequences"] <= 6  # drills whose careful expert retrieved before answering
    assert sft["answer_copy_sequences"] == 2  # 16 thought-to-answer turns, 8 a row
    rows = sft["sequences"] + sft["drill_sequences"] + sft["answer_copy_sequences"]
    assert sft["copy_steps"] == 4 and sft["copy_sequences"] == round(rows * 0.1)  # learn_cpu.yaml: sft_copy_share 0.1


def test_grpo_changed_the_warm_start_weights(learned):
    from transformers import AutoModelForCausalLM

    result = json.loads((learned / "seed_0" / "result.json").read_text())
    warm = AutoModelForCausalLM.from_pretrained(result["warm_start_dir"]).state_dict()
    final = AutoModelForCausalLM.from_pretrained(result["grpo_policy_dir"]).state_dict()
    changed = [name for name, tensor in warm.items() if not torch.equal(tensor, final[name])]
    assert changed, "two GRPO steps left every weight untouched"


def test_a_finished_seed_is_read_back_not_redone(learned, monkeypatch):
    import agemem.recipes.learn.recipe

    def fail(*args, **kwargs):
        raise AssertionError("a finished stage ran again")

    monkeypatch.setattr(agemem.recipes.learn.recipe, "_stage_warm_start", fail)
    monkeypatch.setattr(agemem.recipes.learn.recipe, "_stage_grpo", fail)
    config = load_config(LearnRunConfig, "configs/learn_cpu.yaml", [f"output_dir={learned}", *FAST])
    report = agemem.recipes.learn.recipe.learn(config, progress=False)
    assert report["per_seed"][0]["seed"] == 0


def test_answer_only_flag_switches_the_training_reward(tmp_path, monkeypatch):
    import agemem.recipes.learn

    seen = {}
    learn_module = agemem.recipes.learn
    monkeypatch.setattr(learn_module, "learn", lambda config, progress: seen.setdefault("config", config) and {})
    monkeypatch.setattr(agemem.recipes.learn, "report_table", lambda report: "")
    main(["learn", "--config", "configs/learn_cpu.yaml", "--answer-only", f"output_dir={tmp_path}"])
    assert seen["config"].reward.mode == "answer_only"


def test_copy_warm_up_and_sft_each_run_with_their_own_attention_kernel(tmp_path, monkeypatch):
    """learn.copy_attention is the copy warm-up's kernel, learn.warm_start_attention the SFT's."""
    import agemem.recipes.learn.copy_task
    import agemem.recipes.learn.sft
    from agemem.core.chat import load_tokenizer
    from agemem.recipes.learn.recipe import _stage_warm_start

    seen = {}

    def record(phase):
        def fake(model, tokenizer, *args, **kwargs):
            seen[phase] = model.config._attn_implementation
            if phase == "sft":
                model.save_pretrained(args[2])  # (demos, settings, output_dir)
            return {}

        return fake

    monkeypatch.setattr(agemem.recipes.learn.copy_task, "induction_warmup", record("copy"))
    monkeypatch.setattr(agemem.recipes.learn.sft, "supervised_warm_start", record("sft"))
    overrides = ["policy.tiny_hidden_size=32", "policy.tiny_layers=1", "learn.copy_attention=eager"]
    config = load_config(LearnRunConfig, "configs/learn_cpu.yaml", [*overrides, "learn.warm_start_attention=sdpa"])
    _stage_warm_start(config, 0, load_tokenizer(), [], [], tmp_path / "warm_start", progress=False)
    assert seen == {"copy": "eager", "sft": "sdpa"}


def test_a_given_warm_start_skips_stages_1_to_3_and_trains_from_it(learned, tmp_path):
    from agemem.recipes.learn.bundle import BUNDLED_FILES, bundle_warm_start, check_bundle

    # bundling reads the finished seed's warm start back (nothing retrained) and records each file's hash
    bundle = tmp_path / "bundle"
    config = load_config(LearnRunConfig, "configs/learn_cpu.yaml", [f"output_dir={learned}", *FAST])
    manifest = bundle_warm_start(config, bundle, progress=False)
    assert set(manifest["files"]) == set(BUNDLED_FILES) and check_bundle(bundle) == []
    (bundle / "model.safetensors").write_bytes(b"tampered")
    assert check_bundle(bundle) == ["model.safetensors"]
    bundle_warm_start(config, bundle, progress=False)  # rebuilt: the same bytes again
    assert check_bundle(bundle) == [] and json.loads((bundle / "MANIFEST.json").read_text()) == manifest
    # from the command line the manifest names the command that built it, overrides and all, so a variant recipe's
    # bundle says how to rebuild it (it said configs/learn_cpu.yaml whatever the config was)
    argv = ["learn", "--config", "configs/learn_cpu.yaml", f"output_dir={learned}", *FAST]
    assert main([*argv, "--bundle-warm-start", str(tmp_path / "cli bundle")]) == 0
    from_cli = json.loads((tmp_path / "cli bundle" / "MANIFEST.json").read_text())
    assert from_cli["rebuild"] == shlex.join(["agemem", *argv, "--bundle-warm-start", str(tmp_path / "cli bundle")])
    assert from_cli["files"] == manifest["files"]

    out = tmp_path / "from_bundle"
    assert (
        main(["learn", "--config", "configs/learn_cpu.yaml", f"output_dir={out}", *FAST, f"learn.warm_start={bundle}"])
        == 0
    )
    seed = out / "seed_0"
    assert not any((seed / name).exists() for name in ("tokenizer", "demonstrations.jsonl", "warm_start"))
    result = json.loads((seed / "result.json").read_text())
    assert result["warm_start_dir"] == str(bundle)
    assert list(result["timings"]) == ["eval_warm_start_s", "grpo_s", "eval_grpo_s", "total_s"]
    # the warm start's evaluation is the bundled policy's: the same episodes as the run that trained it
    trained = [json.loads(line) for line in (learned / "seed_0" / "eval_warm_start.jsonl").read_text().splitlines()]
    given = [json.loads(line) for line in (seed / "eval_warm_start.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in given] == [r["answer"] for r in trained]


def test_a_warm_start_folder_without_a_policy_is_refused_with_the_fix(tmp_path):
    from agemem.core.configlib import ConfigError

    with pytest.raises(ConfigError, match=r"learn\.warm_start=.*holds no policy.*bundled:learn-warm-start"):
        load_config(LearnRunConfig, "configs/learn_cpu.yaml", [f"learn.warm_start={tmp_path}"])
    with pytest.raises(ConfigError, match="bundling trains a warm start"):
        from agemem.recipes.learn.bundle import bundle_warm_start

        config = load_config(LearnRunConfig, "configs/learn_cpu.yaml", [])
        config.learn.warm_start = "somewhere"
        bundle_warm_start(config, tmp_path / "b", progress=False)


def test_the_bundled_warm_start_is_intact_and_was_trained_with_the_shipped_settings():
    """A changed configs/learn_cpu.yaml (a key that shapes stages 1-3) needs the bundle rebuilt: the command is in
    the failure message."""
    from agemem.core.resources import resolve
    from agemem.recipes.learn.bundle import check_bundle, stale_settings, warm_start_settings

    folder = resolve("bundled:learn-warm-start")
    assert check_bundle(folder) == []
    manifest = json.loads((Path(folder) / "MANIFEST.json").read_text())
    shipped = warm_start_settings(load_config(LearnRunConfig, "configs/learn_cpu.yaml", []))
    defaults = warm_start_settings(LearnRunConfig())
    assert stale_settings(manifest["settings"], shipped, defaults) == [], f"rebuild the bundle: {manifest['rebuild']}"
    assert manifest["seed"] == 0


def test_a_setting_added_after_the_bundle_counts_only_when_the_recipe_moves_it_off_its_default():
    recorded = {"env": {"rag_top_k": 0, "ltm": {"id_style": "hash"}}, "learn": {"steps": 4}}
    shipped = {"env": {"rag_top_k": 0, "rag_query": "latest", "ltm": {"id_style": "hash"}}, "learn": {"steps": 4}}
    defaults = {"env": {"rag_top_k": 0, "rag_query": "latest", "ltm": {"id_style": "hash"}}, "learn": {"steps": 1}}
    from agemem.recipes.learn.bundle import stale_settings

    assert stale_settings(recorded, shipped, defaults) == []  # a new key at its default: trained as before
    moved = {**shipped, "env": {**shipped["env"], "rag_query": "task"}}
    assert stale_settings(recorded, moved, defaults) == ["env.rag_query"]
    changed = {**shipped, "env": {**shipped["env"], "ltm": {"id_style": "short"}}, "learn": {"steps": 5}}
    assert stale_settings(recorded, changed, defaults) == ["env.ltm.id_style", "learn.steps"]
    assert stale_settings({**recorded, "gone": 1}, shipped, defaults) == ["gone"]  # a key the recipe dropped

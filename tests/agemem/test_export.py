"""`agemem export`: tiny full and LoRA training runs become plain Hugging Face directories that load with
``AutoModelForCausalLM`` and give the training model's logits; the agent files, generation config and
model card are written; the export checks itself, never leaves a half-written directory, refuses to
overwrite without --force, and writes nothing outside --out."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from agemem.core.configlib import load_config
from agemem.core.prompts import system_prompt
from agemem.core.tools import TOOL_NAMES, tool_schemas
from agemem.entrypoints import export as export_module
from agemem.entrypoints.cli import main
from agemem.entrypoints.export import ExportError, ExportSettings, _inside, export_policy
from agemem.entrypoints.roots import AgeMemConfig, load_command_config
from agemem.eval.models import load_model, resolve_model
from tests.train.tiny_run import TINY

TRAIN = ["train", *TINY]  # the end-to-end test's tiny run (lr 1e-2, so one step moves the weights)
LORA = ["lora.enabled=true", "lora.r=4", "lora.alpha=8", "lora.target_modules=[q_proj,v_proj]"]
IDS = torch.tensor([[151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198, 9707]])
FAST = ExportSettings(check=False)


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits.float()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("full") / "run"
    assert main([*TRAIN, "max_steps=1", f"output_dir={run}"]) == 0
    return run


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lora") / "run"
    assert main([*TRAIN, *LORA, "max_steps=2", f"output_dir={run}"]) == 0
    return run


def _training_model(run):
    """The policy exactly as training and evaluation load it (an adapter merged over the run's base)."""
    config = load_config(AgeMemConfig, overrides=["policy.device=cpu"])
    return load_model(resolve_model(str(run), config))[0]


def test_full_checkpoint_exports_to_a_plain_directory_with_the_training_logits(full_run, tmp_path, capsys):
    out = tmp_path / "export"
    assert main(["export", "--checkpoint", str(full_run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "step 1" in printed and "max |logit difference| 0" in printed
    model = AutoModelForCausalLM.from_pretrained(out)  # plain transformers, nothing of agemem
    assert torch.equal(_logits(model), _logits(_training_model(full_run)))
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer_config.json"} <= names
    assert {"agemem.json", "agemem_tools.json", "system_prompt.txt", "README.md", "export_check.json"} <= names
    assert not any(p.name.endswith(".export-tmp") for p in tmp_path.iterdir())  # the staging folder is gone

    tokenizer = AutoTokenizer.from_pretrained(out)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert rendered.endswith("<|im_start|>user\nhi<|im_end|>\n")  # the chat template travelled with it
    assert json.loads((out / "agemem_tools.json").read_text()) == tool_schemas(TOOL_NAMES)
    assert (out / "system_prompt.txt").read_text().strip() == system_prompt("agemem").strip()
    settings = json.loads((out / "agemem.json").read_text())
    assert settings["format"] == "agemem-export/1" and settings["source"]["step"] == 1
    assert settings["sampling"]["max_tokens"] == 16 and settings["env"]["tools"] == list(TOOL_NAMES)
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert generation["max_new_tokens"] == 16 and generation["do_sample"] is True

    card = (out / "README.md").read_text()
    assert "| training step | 1 |" in card and "| base model | `tiny-random-qwen2` |" in card
    assert "reward/total" in card and "sampling:\n  temperature:" in card  # training metrics and config
    check = json.loads((out / "export_check.json").read_text())
    assert check["max_abs_logit_difference"] == 0.0
    assert [turn["user"] for turn in check["episode"]["turns"]] == list(export_module.CHECK_MESSAGES)


def test_lora_checkpoint_merged_and_kept_as_an_adapter(lora_run, tmp_path):
    from peft import PeftModel

    from agemem.rollouts.policy import load_policy

    config = load_config(AgeMemConfig, overrides=["policy.device=cpu"])
    resolved = resolve_model(str(lora_run), config)
    base = load_policy(resolved.config.policy)[0]
    base_logits = _logits(base)
    trained = _logits(PeftModel.from_pretrained(load_policy(resolved.config.policy)[0], resolved.adapter))
    assert not torch.allclose(trained, base_logits, atol=1e-3)  # the adapter learned something

    merged = export_policy(lora_run, tmp_path / "merged")
    assert merged.merged and not merged.adapter and merged.step == 2
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert torch.allclose(_logits(plain), trained, atol=1e-5)
    assert not (tmp_path / "merged" / "adapter").exists()

    kept = export_policy(lora_run, tmp_path / "kept", ExportSettings(merge_lora=False))
    assert kept.adapter and not kept.merged
    adapter_config = json.loads((tmp_path / "kept" / "adapter" / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == str((tmp_path / "kept").resolve())
    reloaded_base = AutoModelForCausalLM.from_pretrained(tmp_path / "kept")
    assert torch.equal(_logits(reloaded_base), base_logits)  # the directory itself holds the untouched base
    adapted = PeftModel.from_pretrained(reloaded_base, tmp_path / "kept" / "adapter")
    assert torch.allclose(_logits(adapted), trained, atol=1e-5)
    assert "| LoRA | adapter |" in (tmp_path / "kept" / "README.md").read_text()


def test_bf16_export_writes_bf16_weights_within_the_checked_tolerance(full_run, tmp_path):
    report = export_policy(full_run, tmp_path / "bf16", ExportSettings(dtype="bf16"))
    weights = load_file(tmp_path / "bf16" / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.bfloat16}
    assert report.dtype == "bfloat16" and report.check["logit_tolerance"] > 0
    reference = _training_model(full_run)
    for (
        parameter
    ) in reference.parameters():  # the weights in bf16; RoPE's buffers stay fp32 as from_pretrained keeps them
        parameter.data = parameter.data.to(torch.bfloat16)
    assert torch.equal(_logits(AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")), _logits(reference))
    with pytest.raises(ExportError, match="bf16"):
        ExportSettings(dtype="int4")


def test_an_occupied_out_needs_force_and_is_replaced_only_after_a_passing_check(full_run, tmp_path, monkeypatch):
    out = tmp_path / "export"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty; pass --force"):
        export_policy(full_run, out, FAST)
    assert main(["export", "--checkpoint", str(full_run), "--out", str(out), "--no-check"]) == 2

    def failing_check(*args, **kwargs):
        raise ExportError("simulated mismatch")

    monkeypatch.setattr(export_module, "check_export", failing_check)
    with pytest.raises(ExportError, match="simulated mismatch"):
        export_policy(full_run, out, ExportSettings(force=True))
    assert [p.name for p in out.iterdir()] == ["notes.txt"]  # untouched
    assert not list(tmp_path.glob(".*export-tmp"))  # and no staging left behind
    monkeypatch.undo()

    export_policy(full_run, out, ExportSettings(force=True, check=False))
    assert not (out / "notes.txt").exists() and (out / "model.safetensors").is_file()
    for protected in (full_run, full_run / "checkpoints"):  # never replaced, even with --force
        with pytest.raises(ExportError, match="contains"):
            export_policy(full_run, protected, ExportSettings(force=True))


def test_nothing_from_the_checkpoint_decides_where_files_are_written(full_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    config = json.loads((run / "config.json").read_text())
    config["output_dir"] = "../../escaped"  # the run's own paths are never write targets
    (run / "config.json").write_text(json.dumps(config))
    policy = next((run / "checkpoints").iterdir()) / "policy"
    os.symlink(tmp_path / "outside.txt", policy / "extra_file.txt")  # a dangling link out of the checkpoint
    before = {p for p in tmp_path.rglob("*")}
    export_policy(run, tmp_path / "sandbox" / "export", FAST)
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(p == tmp_path / "sandbox" or (tmp_path / "sandbox") in p.parents for p in created)
    assert not (tmp_path / "outside.txt").exists()
    for bad in ("../x", "/etc/passwd", "a/../../x"):
        with pytest.raises(ExportError, match="leave the export directory"):
            _inside(tmp_path / "sandbox", bad)
    os.symlink(tmp_path, tmp_path / "sandbox" / "link")
    with pytest.raises(ExportError, match="resolves outside"):
        _inside(tmp_path / "sandbox", "link/file")


def test_model_card_reports_the_latest_evaluation_results(full_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    older = run / "eval" / "old" / "results.json"
    newer = run / "eval" / "hotpotqa" / "results.json"
    for path, em in ((older, 10.0), (newer, 42.5)):
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"benchmark": "hotpotqa", "model": "run", "variant": "agemem", "EM": em, "J": 50.0}))
    os.utime(older, (1, 1))
    extra = tmp_path / "alfworld.json"
    extra.write_text(json.dumps([{"benchmark": "alfworld", "model": "run", "variant": "agemem", "SR": 33.3}]))
    export_policy(run, tmp_path / "export", ExportSettings(check=False, eval_results=(str(extra),)))
    card = (tmp_path / "export" / "README.md").read_text()
    assert "| EM | 42.5 |" in card and "| EM | 10.0 |" not in card  # the newest hotpotqa result wins
    assert "alfworld · agemem" in card and "| SR | 33.3 |" in card
    with pytest.raises(ExportError, match="does not exist"):
        export_policy(run, tmp_path / "export2", ExportSettings(check=False, eval_results=("missing.json",)))


def test_bad_sources_are_clear_errors(tmp_path):
    with pytest.raises(ExportError, match="not a directory"):
        export_policy(tmp_path / "missing", tmp_path / "out", FAST)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Exception, match="neither a model"):
        export_policy(empty, tmp_path / "out", FAST)


def test_a_checkpoint_outside_its_run_takes_its_settings_from_config(full_run, tmp_path):
    import shutil

    loose = tmp_path / "loose"
    shutil.copytree(next((full_run / "checkpoints").iterdir()) / "policy", loose)  # no run around it
    export_policy(loose, tmp_path / "export", FAST, config_file="configs/learn_cpu.yaml", overrides=["seed=3"])
    settings = json.loads((tmp_path / "export" / "agemem.json").read_text())
    learn_cpu = load_command_config("learn", "configs/learn_cpu.yaml", [])
    assert settings["env"]["system_prompt"] == learn_cpu.env.system_prompt
    assert settings["sampling"]["temperature"] == learn_cpu.sampling.temperature
    assert settings["source"]["kind"] == "hf" and settings["source"]["step"] is None
    with pytest.raises(ExportError, match="already records its config"):
        export_policy(full_run, tmp_path / "export2", FAST, config_file="configs/learn_cpu.yaml")

"""The end-of-run summary of `agemem train`: behaviour first vs last step, weights vs the initial policy."""

import torch

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.policy import load_policy
from agemem.train.summary import behaviour_rows, summary_table, weight_change


def test_behaviour_rows_compare_the_first_and_the_last_step():
    history = [
        {"reward/total": 0.25, "tools/total": 2.0, "tools/Add_memory": 1.0, "time/step_s": 3.0},
        {"reward/total": 0.75, "tools/total": 1.0, "tools/Add_memory": 0.5, "time/step_s": 2.0},
    ]
    rows = behaviour_rows(history)
    assert rows == [("reward/total", 0.25, 0.75), ("tools/total", 2.0, 1.0), ("tools/Add_memory", 1.0, 0.5)]
    assert summary_table(history, None).row_count == 3  # timings are not behaviour


def test_weight_change_counts_changed_tensors_and_the_relative_l2(tmp_path):
    config = load_config(AgeMemConfig, overrides=["policy.model=tiny-random-qwen2", "policy.device=cpu"])
    model, _ = load_policy(config.policy)
    state = model.state_dict()
    name = "model.norm.weight"  # one tensor of ones (RMSNorm init): adding 0.5 to each entry moves it by 0.5 * sqrt(n)
    with torch.no_grad():
        model.get_parameter(name).add_(0.5)
    model.save_pretrained(tmp_path / "policy")
    change = weight_change(config, tmp_path)
    assert change is not None
    assert change.changed_tensors == 1 and change.tensors == len(state)
    n = state[name].numel()
    norm_initial = torch.sqrt(sum(t.float().pow(2).sum() for t in load_policy(config.policy)[0].state_dict().values()))
    assert abs(change.relative_l2 - 0.5 * n**0.5 / float(norm_initial)) < 1e-5


def test_weight_change_skips_lora_adapters(tmp_path):
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "adapter_config.json").write_text("{}")
    (tmp_path / "policy" / "adapter_model.safetensors").write_bytes(b"")
    assert weight_change(AgeMemConfig(), tmp_path) is None

"""The end-of-run summary of `agemem train`: behaviour first vs last step, weights vs the initial policy."""

import torch

from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.policy import load_policy
from agemem.train.summary import WeightChange, behaviour_rows, summary_table, weight_change


def test_behaviour_rows_compare_the_first_and_the_last_step():
    history = [
        {"reward/total": 0.25, "tools/total": 2.0, "tools/Add_memory": 1.0, "time/step_s": 3.0},
        {"reward/total": 0.75, "tools/total": 1.0, "tools/Add_memory": 0.5, "time/step_s": 2.0},
    ]
    rows = behaviour_rows(history)
    assert rows == [("reward/total", 0.25, 0.75), ("tools/total", 2.0, 1.0), ("tools/Add_memory", 1.0, 0.5)]
    assert summary_table(history, None, last_step=2).row_count == 3  # timings are not behaviour


def test_the_summary_names_its_steps_after_a_resume_and_never_cuts_a_metric_name():
    from rich.console import Console

    history = [
        {"reward/total": 0.25, "tools/Retrieve_memory": 1.0, "episode/violations_per_step": 0.5},
        {"reward/total": 0.75, "tools/Retrieve_memory": 2.0, "episode/violations_per_step": 0.25},
    ]
    table = summary_table(history, WeightChange(3, 10, 1e-3), last_step=6)  # resumed at step 4, ran 5 and 6
    assert table.title == "what changed from step 5 to step 6 (resumed at step 4)"
    assert [c.header for c in table.columns] == ["metric", "step 5", "step 6", "change"]
    console = Console(width=60, record=True)  # narrower than the table wants
    console.print(table)
    text = console.export_text()
    assert "episode/violations_per_step" in text and "tools/Retrieve_memory" in text
    assert "weights since step 0 (the initial policy): 3/10 tensors changed" in " ".join(text.split())


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


def test_step_line_reports_the_step_the_reward_and_an_eta_from_the_mean_step_time():
    from agemem.train.metrics import step_line

    metrics = {
        "reward/total": 0.4321,
        "reward/total_std": 0.125,
        "reward/task": 0.5,
        "episode/exact_match": 0.25,
        "train/kl": 0.00123,
        "train/loss": -0.0456,
        "throughput/generated_tokens_per_s": 545.4,
        "time/rollout_s": 22.95,
        "time/update_s": 8.65,
    }
    # 3 steps ran in 95 s (31.67 s each); 97 steps are left: 97 * 95 / 3 = 3071.7 s = 0:51:12
    line = step_line(3, 100, metrics, elapsed_s=95.0, steps_run=3)
    assert line == (
        "step 3/100 | reward +0.432 ± 0.125 | task +0.500 | em 0.25 | kl 0.0012 | loss -0.0456 | gen 545 tok/s"
        " | rollout 22.9s update 8.7s | elapsed 0:01:35 eta 0:51:12"
    )
    # a resumed run at step 50 that ran 2 steps in 60 s: 50 left at 30 s each
    assert step_line(50, 100, metrics, elapsed_s=60.0, steps_run=2).endswith("elapsed 0:01:00 eta 0:25:00")

"""What a training run changed, printed when ``agemem train`` ends.

Behaviour (reward, tool use, format) is compared between the first and the last step this call ran; the
weights between the initial policy and the final checkpoint, when both fit comfortably in host memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from agemem.train.config import TrainRunConfig

WEIGHT_CHECK_MAX_BYTES = 2 * 1024**3
"""compare weights only when the saved policy is under this size (the comparison holds two copies in RAM)."""


SUMMARY_METRICS = (
    "reward/total",
    "reward/task",
    "tools/total",
    "episode/answered",
    "episode/violations_per_step",
    "train/kl",
)
"""the headline metrics of the summary, then the calls per episode of each tool."""


@dataclass
class WeightChange:
    changed_tensors: int
    tensors: int
    relative_l2: float
    """``||θ_final − θ_initial|| / ||θ_initial||`` over all compared tensors."""


def behaviour_rows(history: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """``(metric, first step, last step)`` for rewards, tool calls per episode and the format error share."""
    first, last = history[0], history[-1]
    wanted = (*SUMMARY_METRICS, *sorted(k for k in first if k.startswith("tools/") and k != "tools/total"))
    keys = [k for k in wanted if isinstance(first.get(k), int | float)]
    return [(k, float(first[k]), float(last.get(k, float("nan")))) for k in keys]


def weight_change(config: TrainRunConfig, checkpoint: Path) -> WeightChange | None:
    """The final checkpoint against the initial policy; None for LoRA adapters or policies too large to hold twice."""
    policy_dir = checkpoint / "policy"
    files = list(policy_dir.glob("*.safetensors"))
    if (policy_dir / "adapter_config.json").exists() or not files:
        return None
    if sum(f.stat().st_size for f in files) > WEIGHT_CHECK_MAX_BYTES:
        return None
    import torch
    from transformers import AutoModelForCausalLM

    from agemem.rollouts.policy import load_policy

    initial, _ = load_policy(config.policy)
    final = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32).state_dict()
    changed = total = 0
    diff_sq = base_sq = 0.0
    for name, tensor in initial.state_dict().items():
        if name not in final:
            continue
        a, b = tensor.detach().float().cpu(), final[name]
        total += 1
        changed += int(not torch.equal(a, b))
        diff_sq += float((b - a).pow(2).sum())
        base_sq += float(a.pow(2).sum())
    return WeightChange(changed, total, (diff_sq**0.5) / max(base_sq**0.5, 1e-12))


def summary_table(history: list[dict[str, Any]], weights: WeightChange | None, *, last_step: int) -> Table:
    """Behaviour at the first and the last step this call ran (``last_step`` is the last; after a resume the
    first is not step 1, which the title and the columns say), and the weights since the initial policy."""
    from rich.table import Table

    first_step = last_step - len(history) + 1
    resumed = f" (resumed at step {first_step - 1})" if first_step > 1 else ""
    table = Table(title=f"what changed from step {first_step} to step {last_step}{resumed}")
    rows = behaviour_rows(history)
    # the metric names are the point of the table: never cut or wrapped, whatever the terminal's width
    table.add_column("metric", no_wrap=True, min_width=max((len(key) for key, _, _ in rows), default=6))
    for column in (f"step {first_step}", f"step {last_step}", "change"):
        table.add_column(column, justify="right")
    for key, before, after in rows:
        table.add_row(key, f"{before:.3f}", f"{after:.3f}", f"{after - before:+.3f}")
    if weights is not None:  # a caption, not a row: it wraps instead of being cut to the numbers' columns
        table.caption = (
            f"weights since step 0 (the initial policy): {weights.changed_tensors}/{weights.tensors} tensors changed, "
            f"relative L2 {weights.relative_l2:.2e}"
        )
    return table

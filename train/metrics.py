"""Where step metrics go: ``metrics.jsonl`` always, wandb and tensorboard by config (rank 0 only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from agemem.core.files import atomic_open
from agemem.rewards.composite import mean_breakdown
from agemem.rollouts.records import Trajectory
from agemem.rollouts.summary import summarize_trajectories
from agemem.train.config import TrainRunConfig

MACHINE_METRICS = ("time/", "throughput/", "memory/")
"""prefixes of the metrics that measure the machine (seconds, rates, resident memory), not the training: they
differ between two runs that train identically (a resumed run and an uninterrupted one)."""


def behaviour_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``summarize_trajectories`` as flat numbers: ``episode/<what>`` per-episode means and
    ``tools/<tool>`` calls per episode (plus ``tools/total``)."""
    summary = summarize_trajectories(trajectories)
    tools = summary.pop("tool_calls", {})
    out = {f"episode/{key}": float(value) for key, value in summary.items() if isinstance(value, int | float)}
    out.pop("episode/episodes", None)
    out |= {f"tools/{name}": calls for name, calls in tools.items()}
    out["tools/total"] = sum(tools.values())
    return out


def reward_metrics(breakdowns: Sequence[dict[str, float]]) -> dict[str, float]:
    """``reward/<term>`` batch means and ``reward/total_std``."""
    return {f"reward/{key}": value for key, value in mean_breakdown(breakdowns).items()}


class MetricsLogger:
    """Appends one JSON line per step to ``metrics.jsonl`` and mirrors it to wandb / tensorboard."""

    def __init__(self, config: TrainRunConfig, output_dir: Path, *, resume_step: int | None = None):
        self.path = output_dir / "metrics.jsonl"
        if resume_step is not None:
            truncate_after_step(self.path, resume_step)  # steps after the checkpoint are played again
        elif self.path.exists():
            self.path.unlink()
        self._file = self.path.open("a", encoding="utf-8")
        self._wandb = None
        self._tensorboard = None
        settings = config.logging
        if settings.wandb != "disabled":
            try:
                import wandb
            except ImportError as err:
                raise ImportError("logging.wandb needs the wandb package: pip install wandb") from err
            from agemem.core.configlib import to_dict

            self._wandb = wandb.init(
                project=settings.wandb_project,
                name=settings.wandb_run_name or output_dir.name,
                mode=settings.wandb,
                dir=str(output_dir),
                config=to_dict(config),
                resume="allow",
                id=_wandb_id(output_dir),
            )
        if settings.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as err:
                raise ImportError("logging.tensorboard needs the tensorboard package: pip install tensorboard") from err
            self._tensorboard = SummaryWriter(log_dir=str(output_dir / "tensorboard"))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        record = {"step": step, **metrics}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        numeric = {k: v for k, v in metrics.items() if isinstance(v, int | float)}
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
        if self._tensorboard is not None:
            for key, value in numeric.items():
                self._tensorboard.add_scalar(key, value, step)

    def close(self) -> None:
        self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._tensorboard is not None:
            self._tensorboard.close()


def step_line(step: int, max_steps: int, metrics: dict[str, Any], *, elapsed_s: float, steps_run: int) -> str:
    """One console line for a finished step, as TRL and verl users read them: where the run is, the reward
    (mean ± std over the step's episodes) and task score, KL, loss, throughput, where the time went, and the
    ETA (the mean time of the ``steps_run`` steps this process ran, times the steps left)."""
    eta = elapsed_s / max(1, steps_run) * (max_steps - step)
    return (
        f"step {step}/{max_steps} | reward {metrics['reward/total']:+.3f}"
        f" ± {metrics.get('reward/total_std', 0.0):.3f}"
        f" | task {metrics['reward/task']:+.3f} | em {metrics.get('episode/exact_match', 0.0):.2f}"
        f" | kl {metrics.get('train/kl', 0.0):.4f} | loss {metrics.get('train/loss', 0.0):+.4f}"
        f" | gen {metrics.get('throughput/generated_tokens_per_s', 0.0):.0f} tok/s"
        f" | rollout {metrics.get('time/rollout_s', 0.0):.1f}s update {metrics.get('time/update_s', 0.0):.1f}s"
        f" | elapsed {_clock(elapsed_s)} eta {_clock(eta)}"
    )


def _clock(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _wandb_id(output_dir: Path) -> str:
    """One wandb run per output directory, so a resumed run continues its curves."""
    path = output_dir / "wandb_id.txt"
    if path.exists():
        return path.read_text().strip()
    import uuid

    run_id = uuid.uuid4().hex[:12]
    path.write_text(run_id)
    return run_id


def truncate_after_step(path: Path, step: int, step_of: Callable[[dict[str, Any]], int] = itemgetter("step")) -> None:
    """Keep the lines of a per-step JSONL file whose ``step_of(record)`` is <= ``step`` (and drop a torn
    last line): a resumed run plays the later steps again."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if line.endswith("\n") and step_of(record) <= step:
            kept.append(line)
    with atomic_open(path) as handle:
        handle.write("".join(kept))


def trajectory_step(record: dict[str, Any]) -> int:
    """The training step of a trajectory line of ``trajectories.jsonl``."""
    return int(record["meta"]["train_step"])

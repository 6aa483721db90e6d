"""Where step metrics go: ``metrics.jsonl`` always, wandb and tensorboard by config (rank 0 only)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from statistics import mean, pstdev
from typing import Any

from agemem.config import AgeMemConfig
from rollouts.records import Trajectory


def behaviour_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Per-episode means of what the agent did: tool calls per tool, answers, violations, context."""
    n = max(1, len(trajectories))
    calls: Counter[str] = Counter()
    for t in trajectories:
        calls.update(t.stats.tool_counts)
    actions = [s for t in trajectories for s in t.action_steps]
    out = {f"tools/{name}": count / n for name, count in sorted(calls.items())}
    out["tools/total"] = sum(calls.values()) / n
    out["episode/answered"] = sum(t.answer is not None for t in trajectories) / n
    out["episode/llm_steps"] = sum(len(t.steps) for t in trajectories) / n
    out["episode/violations_per_step"] = sum(len(s.violations) for s in actions) / max(1, len(actions))
    out["episode/overflow"] = sum(t.stats.overflow for t in trajectories) / n
    out["episode/limit_hit"] = sum(bool(t.limit_hits) for t in trajectories) / n
    out["episode/max_context_tokens"] = max((t.stats.max_context_tokens for t in trajectories), default=0)
    return out


def reward_metrics(breakdowns: Sequence[dict[str, float]]) -> dict[str, float]:
    """``reward/<term>`` batch means and ``reward/std`` of the totals."""
    if not breakdowns:
        return {}
    out = {f"reward/{key}": mean(b[key] for b in breakdowns) for key in breakdowns[0]}
    out["reward/std"] = pstdev(b["total"] for b in breakdowns)
    return out


class MetricsLogger:
    """Appends one JSON line per step to ``metrics.jsonl`` and mirrors it to wandb / tensorboard."""

    def __init__(self, config: AgeMemConfig, output_dir: Path, *, resume_step: int | None = None):
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
            from agemem.configlib import to_dict

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


def _wandb_id(output_dir: Path) -> str:
    """One wandb run per output directory, so a resumed run continues its curves."""
    path = output_dir / "wandb_id.txt"
    if path.exists():
        return path.read_text().strip()
    import uuid

    run_id = uuid.uuid4().hex[:12]
    path.write_text(run_id)
    return run_id


def truncate_after_step(path: Path, step: int) -> None:
    """Keep the lines of a per-step JSONL file whose ``step`` is <= ``step`` (and drop a torn last line)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if line.endswith("\n") and record.get("step", 0) <= step:
            kept.append(line)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    tmp.replace(path)

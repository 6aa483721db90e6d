"""The tiny CPU training run the end-to-end, preemption and checkpoint tests share: 4 synthetic tasks, 2
per step, K=2, one LLM step per stage, a checkpoint every step."""

from __future__ import annotations

import json

from safetensors.torch import load_file

from agemem.train.metrics import MACHINE_METRICS

TINY = [
    "--config",
    "configs/tiny_cpu.yaml",
    "data.source=synthetic",
    "data.synthetic.num_tasks=4",
    "distractors.generator=task",
    "distractors.count=1",
    "distractors.cache_dir=",
    "sampling.max_tokens=16",
    "rollout.rollouts_per_task=2",
    "rollout.stage1_max_steps=1",
    "rollout.stage2_max_steps=1",
    "rollout.stage3_max_steps=1",
    "train.tasks_per_step=2",
    "train.learning_rate=1e-2",
    "checkpoint.every=1",
    "logging.progress=false",
    # a random policy never answers right, and by effect a wrong answer's context state is not paid
    # (rewards/terms.py:context_state_share_by_answer): every rollout of a task would earn the same and nothing would
    # move; the letter's compression varies with the context's length
    "reward.terms=paper",
]


def metrics(path):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in m.items() if not k.startswith(MACHINE_METRICS)} for m in lines]


def weights(run_dir, step):
    return load_file(run_dir / "checkpoints" / f"step_{step:06d}" / "policy" / "model.safetensors")

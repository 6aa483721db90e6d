#!/usr/bin/env bash
# The GPU kit on the GPU machine, in one command (docs/gpu.md): install what travelled in .gpukit/ (built here by
# `python bench/gpu/pack.py`), then run every check. Device call: carry [".gpukit"], timeout_s 600,
#   bash bench/gpu/run.sh
# Writes $OUT/gpu_<gpu>.json and $OUT/gpu_kit.log (bench/results/ when OUT is unset); prints the table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ ! -d .gpukit/wheels ]; then
  echo "run.sh: .gpukit/wheels is missing: run 'python bench/gpu/pack.py' here and carry .gpukit" >&2
  exit 2
fi
site="${AGEMEM_KIT_SITE:-/tmp/agemem-kit-site}"
if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    .gpukit/wheels/*.whl; then
  # no usable pip: a wheel is a zip laid out for site-packages, so unpacking it is an install without scripts
  echo "run.sh: pip failed; unpacking the wheels into $site instead" >&2
  python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
    "$site" .gpukit/wheels/*.whl || { echo "run.sh: installing the carried wheels failed" >&2; exit 3; }
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
exec python3 bench/gpu/kit.py "$@"

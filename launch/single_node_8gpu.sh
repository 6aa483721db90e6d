#!/usr/bin/env bash
# AgeMem GRPO training on ONE node with 8 GPUs (80 GB class: H100 / H200 / A100-80GB).
#
# Each of the 8 ranks trains with DeepSpeed ZeRO-2 (launch/accelerate/zero2.yaml) and runs its own
# vLLM engine colocated on the same GPU (engine.backend=vllm, engine.vllm.mode=colocate; vLLM takes
# engine.vllm.gpu_memory_utilization of each GPU, the rest trains). Needs `pip install 'agemem[vllm]'`
# plus deepspeed (and flash-attn when the config asks for flash_attention_2).
#
# Usage (from the repository root):
#   bash launch/single_node_8gpu.sh                                   # configs/hotpotqa_qwen2.5_7b.yaml
#   CONFIG=configs/hotpotqa_qwen3_4b.yaml bash launch/single_node_8gpu.sh
#   bash launch/single_node_8gpu.sh max_steps=50 logging.wandb=offline  # extra args go to `agemem train`
#
# Resume: pass --resume; it continues the run found in output_dir (the config's, or the one you give):
#   bash launch/single_node_8gpu.sh --resume
#   bash launch/single_node_8gpu.sh --resume output_dir=runs/hotpotqa_qwen2.5_7b
#
# Fewer GPUs: NUM_PROCESSES=4 bash launch/single_node_8gpu.sh (train.tasks_per_step counts across all ranks).
# More `accelerate launch` options: ACCELERATE_ARGS, e.g. a CPU smoke test of this script (DeepSpeed on gloo):
#   NUM_PROCESSES=2 ACCELERATE_ARGS="--mixed_precision no" CONFIG=configs/tiny_cpu.yaml \
#     bash launch/single_node_8gpu.sh max_steps=2 output_dir=runs/zero2_cpu
set -euo pipefail

# The accelerate config and the default CONFIG are found from this script's location; a CONFIG you
# pass, and the config's output_dir, are relative to the current directory (run from the repo root).
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="${CONFIG:-${REPO_ROOT}/configs/hotpotqa_qwen2.5_7b.yaml}"
NUM_PROCESSES="${NUM_PROCESSES:-8}"
read -r -a EXTRA_LAUNCH_ARGS <<< "${ACCELERATE_ARGS:-}"

exec accelerate launch \
    --config_file "${REPO_ROOT}/launch/accelerate/zero2.yaml" \
    --num_processes "${NUM_PROCESSES}" \
    ${EXTRA_LAUNCH_ARGS[@]+"${EXTRA_LAUNCH_ARGS[@]}"} \
    -m agemem train --config "${CONFIG}" \
    "$@"

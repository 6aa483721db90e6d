#!/usr/bin/env bash
# AgeMem GRPO training on several nodes: NNODES training nodes (8 GPUs each, DeepSpeed ZeRO-3 via
# launch/accelerate/zero3.yaml) plus ONE separate generation node running `trl vllm-serve`.
# The trainers reach the server with engine.vllm.mode=server (the project's config keys
# engine.vllm.server_host / engine.vllm.server_port) and push the new weights into it after every
# optimizer step over NCCL. Expected hardware: 80 GB class GPUs (H100 / H200 / A100-80GB), a fast
# interconnect between the training nodes, and network reachability between the server node and
# training node 0 (HTTP on VLLM_PORT, plus TRL's NCCL weight-sync group, port 51216 by default).
# Every node needs this repository, `pip install 'agemem[vllm]'`, deepspeed, and the same CONFIG.
#
# Run this script once per node, with ROLE telling it what to be:
#
#   # generation node (host name or IP: gen0)
#   ROLE=server bash launch/multi_node_vllm_server.sh
#
#   # training nodes; NODE_RANK 0 .. NNODES-1, MASTER_ADDR = address of training node 0
#   ROLE=train NNODES=2 NODE_RANK=0 MASTER_ADDR=train0 VLLM_HOST=gen0 bash launch/multi_node_vllm_server.sh
#   ROLE=train NNODES=2 NODE_RANK=1 MASTER_ADDR=train0 VLLM_HOST=gen0 bash launch/multi_node_vllm_server.sh
#
# Environment:
#   ROLE                server | train (required)
#   CONFIG              training config (default configs/hotpotqa_qwen2.5_7b.yaml)
#   MODEL               model the server loads (default: policy.model read from CONFIG; must match it)
#   VLLM_TP             server: --tensor-parallel-size (default 4; must divide the model's attention
#                       heads: Qwen2.5-7B has 28, so 1, 2 or 4; Qwen3-4B has 32)
#   VLLM_GPU_MEMORY_UTILIZATION  server: share of each server GPU vLLM takes (default 0.9)
#   VLLM_MAX_MODEL_LEN  server: --max-model-len, >= the config's engine.vllm.max_model_len (default 12288)
#   VLLM_HOST           train: address of the server node (required)
#   VLLM_PORT           server port, both roles (default 8000)
#   NNODES              train: number of TRAINING nodes, not counting the server (default 2)
#   GPUS_PER_NODE       train: processes per training node (default 8)
#   NODE_RANK           train: this node's rank among the training nodes (required)
#   MASTER_ADDR         train: address of training node 0 (required)
#   MASTER_PORT         train: rendezvous port on training node 0 (default 29500)
#   SERVER_WAIT_S       train: how long to wait for the server's /health before giving up (default 1800)
#
# Extra arguments go to `agemem train` after the server overrides. Resume an interrupted run by
# passing --resume to every training node (it continues the run found in output_dir); put any
# key=value overrides BEFORE --resume:
#   ROLE=train ... bash launch/multi_node_vllm_server.sh output_dir=runs/hotpotqa_qwen2.5_7b --resume
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="${CONFIG:-${REPO_ROOT}/configs/hotpotqa_qwen2.5_7b.yaml}"
VLLM_PORT="${VLLM_PORT:-8000}"
ROLE="${ROLE:?set ROLE=server (the vLLM node) or ROLE=train (a training node)}"

case "${ROLE}" in
server)
    if [[ -z "${MODEL:-}" ]]; then
        MODEL="$(python -c 'import sys, yaml; print(((yaml.safe_load(open(sys.argv[1])) or {}).get("policy") or {}).get("model") or "")' "${CONFIG}")"
    fi
    if [[ -z "${MODEL}" ]]; then
        echo "no policy.model in ${CONFIG}; set MODEL=<hub id or path> (the policy the trainers train)" >&2
        exit 2
    fi
    echo "[server] $(hostname): serving ${MODEL} on port ${VLLM_PORT} (tensor parallel ${VLLM_TP:-4})" >&2
    exec trl vllm-serve \
        --model "${MODEL}" \
        --tensor-parallel-size "${VLLM_TP:-4}" \
        --gpu-memory-utilization "${VLLM_GPU_MEMORY_UTILIZATION:-0.9}" \
        --max-model-len "${VLLM_MAX_MODEL_LEN:-12288}" \
        --host 0.0.0.0 \
        --port "${VLLM_PORT}"
    ;;
train)
    NNODES="${NNODES:-2}"
    GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
    NODE_RANK="${NODE_RANK:?set NODE_RANK (0 .. NNODES-1) for this training node}"
    MASTER_ADDR="${MASTER_ADDR:?set MASTER_ADDR to the address of training node 0}"
    VLLM_HOST="${VLLM_HOST:?set VLLM_HOST to the address of the vLLM server node}"
    SERVER_WAIT_S="${SERVER_WAIT_S:-1800}"

    # The server may still be downloading / loading the model; wait for it (the trainer itself only
    # waits engine.vllm.server_timeout_s). -L follows the redirect between /health and /health/.
    echo "[train ${NODE_RANK}] waiting for http://${VLLM_HOST}:${VLLM_PORT}/health/ ..." >&2
    deadline=$(( SECONDS + SERVER_WAIT_S ))
    until curl -sfL -o /dev/null "http://${VLLM_HOST}:${VLLM_PORT}/health/"; do
        if (( SECONDS >= deadline )); then
            echo "vLLM server at ${VLLM_HOST}:${VLLM_PORT} not healthy after ${SERVER_WAIT_S}s" >&2
            exit 1
        fi
        sleep 10
    done

    exec accelerate launch \
        --config_file "${REPO_ROOT}/launch/accelerate/zero3.yaml" \
        --num_machines "${NNODES}" \
        --num_processes "$(( NNODES * GPUS_PER_NODE ))" \
        --machine_rank "${NODE_RANK}" \
        --main_process_ip "${MASTER_ADDR}" \
        --main_process_port "${MASTER_PORT:-29500}" \
        -m agemem train --config "${CONFIG}" \
        engine.backend=vllm \
        engine.vllm.mode=server \
        engine.vllm.server_host="${VLLM_HOST}" \
        engine.vllm.server_port="${VLLM_PORT}" \
        "$@"
    ;;
*)
    echo "ROLE must be 'server' or 'train', got '${ROLE}'" >&2
    exit 2
    ;;
esac

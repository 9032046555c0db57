#!/usr/bin/env bash
# An evaluation worker for one hardware profile, started from a checkout: the host needs python3
# with torch and nothing installed of ours (celery and its packages come from .whl/ if missing).
# The evaluator it starts for each job is this checkout's (worker.config.CODE_ROOT).
#
#   PKB_BROKER_URL=redis://broker:6379/0 PKB_PORTAL_URL=https://pkb.example.org \
#     scripts/gpu_worker.sh h200-x2-nvlink [celery worker options]
#
# It consumes pkb.hw.<profile> and pkb.hw.<profile>.baseline, one job at a time. Several workers on
# one host each take their own GPUs: CUDA_VISIBLE_DEVICES=0,1 for one, 2,3 for the next (the node
# name and the spool of undelivered results follow it). PY picks the interpreter (python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HW=${1:?usage: scripts/gpu_worker.sh HARDWARE_PROFILE [celery worker options]}
shift
PY=${PY:-python3}
# shellcheck source=scripts/wheelhouse.sh
. "$ROOT/scripts/wheelhouse.sh"
use_wheelhouse "$PY" celery kombu
GPUS=${CUDA_VISIBLE_DEVICES:-all}
NAME=${PKB_WORKER_NAME:-$HW-gpus-${GPUS//,/-}}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PKB_WORKER_NAME=$NAME
export PKB_WORKER_SPOOL_DIR=${PKB_WORKER_SPOOL_DIR:-$ROOT/var/worker-spool-$NAME}
# Multicast stays off on shared hosts (contract/gpu.py sets it again for every evaluation).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$ROOT"
exec "$PY" -m celery -A worker worker -Q "pkb.hw.$HW,pkb.hw.$HW.baseline" --concurrency 1 \
  --prefetch-multiplier 1 -n "$NAME@%h" "$@"

#!/usr/bin/env bash
# One batch of the model board on a GPU host, through the real portal path: gunicorn + SQLite,
# the filesystem broker, GPU workers started by scripts/gpu_worker.sh (one per pair of GPUs:
# two 2-GPU job slots on a 4-GPU host), ParallelKernelBench directories imported as runs on
# h200-x2-nvlink, as many files evaluated as fit in the budget, resuming after the files that
# earlier batches finished.
#
#   scripts/device/board_batch.sh [--budget 500] [--dirs .pkb-dirs] \
#       [--state docs/measurements/board/board-results.jsonl] [--out $OUT]
#   scripts/device/board_batch.sh --device cpu --dirs tests/portal/data/pkb --match 1_allreduce,2_allgather
#
# Writes to --out: board-results.jsonl (every result so far: the earlier ones and this batch's,
# each with its submission and report), board-table.md, board-batch.log and the portal's and
# workers' logs. Keep its results in --state (it is in docs/, so it travels with the checkout)
# before the next batch: scripts/device/board_keep.py OUT/board-results.jsonl --state STATE. Options: --slots N (default: GPUs / 2), --port (8121),
# --timeout S per file (300), --limit N (only the first N importable files), --match A,B (only
# files whose names contain A or B), --hardware, --prebuild / --no-prebuild (the build stage,
# worker/prebuild.py: on by default on GPUs, off on CPU, where nothing is built).
set -uo pipefail
cd "$(dirname "$0")/../.."

DEVICE=cuda BUDGET=500 DIRS=.pkb-dirs STATE=docs/measurements/board/board-results.jsonl
OUTDIR=${OUT:-/tmp/pkb-board} PORT=8121 JOB_TIMEOUT=300 LIMIT=0 MATCH='' SLOTS='' HW='' PREBUILD=''
while [ $# -gt 0 ]; do
  case $1 in
    --device) DEVICE=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --dirs) DIRS=$2; shift 2 ;;
    --state) STATE=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --timeout) JOB_TIMEOUT=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --match) MATCH=$2; shift 2 ;;
    --slots) SLOTS=$2; shift 2 ;;
    --hardware) HW=$2; shift 2 ;;
    --prebuild) PREBUILD=1; shift ;;
    --no-prebuild) PREBUILD=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
T0=${EPOCHREALTIME//[!0-9]/}
BUDGET_END=$(( ${T0:0:-6} + BUDGET ))
mkdir -p "$OUTDIR"
exec > >(tee -a "$OUTDIR/board-batch.log") 2>&1
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
stamp() { local us=$(( ${EPOCHREALTIME//[!0-9]/} - T0 )); printf '[%4d.%d s] %s\n' $((us / 1000000)) $((us / 100000 % 10)) "$*"; }

if [ "$DEVICE" = cuda ]; then
  HW=${HW:-h200-x2-nvlink}
  GPUS=$(nvidia-smi -L | wc -l)
  SLOTS=${SLOTS:-$(( GPUS / 2 > 0 ? GPUS / 2 : 1 ))}
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  HOST=$(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | sed 's/^ *//' | paste -sd, -)
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
  ARCH=sm_${CAP//./} PREBUILD=${PREBUILD:-1}
else
  HW=${HW:-cpu-gloo-amd-epyc-2c} SLOTS=${SLOTS:-1} HOST="cpu: $(nproc) cores" ARCH=sm_90 PREBUILD=${PREBUILD:-0}
fi
# The build stage: a quarter of the cores, 4 compiler jobs each, ahead of the GPUs.
PREBUILD_JOBS=$(( $(nproc) / 8 > 0 ? $(nproc) / 8 : 1 ))
echo "== $(date -u +%FT%TZ) board_batch --device $DEVICE: hardware $HW, $SLOTS slot(s), host $HOST, git ${PKB_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "?")}, budget $BUDGET s"
[ -d "$DIRS" ] || { echo "no $DIRS: copy the solutions_* directories there (docs/runs.md)"; exit 1; }

. scripts/wheelhouse.sh
use_wheelhouse "$PY" django rest_framework drf_spectacular drf_spectacular_sidecar celery gunicorn \
  whitenoise plotly dj_database_url jsonschema requests || exit 1

VAR=$(mktemp -d /tmp/pkb-board-XXXX)
export DJANGO_SETTINGS_MODULE=portal.settings.local PKB_DEBUG=0 PKB_VAR_DIR=$VAR \
  PKB_BROKER_URL=filesystem:// PKB_BROKER_DIR=$VAR/broker PKB_CALLBACK_BASE_URL=http://127.0.0.1:$PORT \
  PKB_EVAL_TIMEOUT_S=$JOB_TIMEOUT PKB_THROTTLE_ANON=100000/min PKB_THROTTLE_USER=100000/min PKB_THROTTLE_SUBMIT=100000/min \
  PKB_REQUIRE_LIVE_WORKER=0 PYTHONUNBUFFERED=1
SEED=''
if [ "$PREBUILD" = 1 ]; then SEED=$VAR/prebuilt; mkdir -p "$SEED"; fi
PIDS=()
cleanup() {  # TERM, then KILL after 3 s; never a bare `wait` (it would wait for the log's tee)
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 30); do
    alive=0; for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  [ ${#PIDS[@]} -gt 0 ] && wait "${PIDS[@]}" 2>/dev/null
  cat "$VAR"/worker-*.log > "$OUTDIR/board-workers.log" 2>/dev/null
  cp "$VAR/web.log" "$OUTDIR/board-web.log" 2>/dev/null
  rm -rf "$VAR"
  stamp "cleaned up"
}
trap cleanup EXIT

stamp "migrating and loading the catalog (SQLite in $VAR)"
"$PY" manage.py migrate -v0 && "$PY" manage.py load_catalog -v0 || exit 1
TOKEN=$("$PY" manage.py shell -c "
from django.contrib.auth import get_user_model; from rest_framework.authtoken.models import Token
u, _ = get_user_model().objects.get_or_create(username='board', defaults={'is_staff': True}); print(Token.objects.get_or_create(user=u)[0].key)" | tail -1)

stamp "starting gunicorn on :$PORT and $SLOTS worker(s) on pkb.hw.$HW"
setsid "$PY" -m gunicorn portal.wsgi:application --bind 127.0.0.1:$PORT --workers 2 \
  --worker-class gthread --threads 4 > "$VAR/web.log" 2>&1 &
PIDS+=($!)
for slot in $(seq 0 $((SLOTS - 1))); do
  gpus=$([ "$DEVICE" = cuda ] && echo "$((2 * slot)),$((2 * slot + 1))" || echo "")
  setsid env PKB_PORTAL_URL=http://127.0.0.1:$PORT PKB_WORKER_NAME=board-slot$slot \
    PKB_WORKER_SPOOL_DIR=$VAR/spool-$slot DJANGO_SETTINGS_MODULE= PY="$PY" ${SEED:+PKB_KERNEL_SEED=$SEED} \
    ${gpus:+CUDA_VISIBLE_DEVICES=$gpus} scripts/gpu_worker.sh "$HW" --loglevel INFO \
    > "$VAR/worker-$slot.log" 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$PORT/api/v1/hardware/" >/dev/null && break; sleep 0.5; done

PROVENANCE=$("$PY" -c '
import json, sys, datetime, torch
print(json.dumps({"git": sys.argv[1], "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "hardware": sys.argv[2], "host": sys.argv[3], "slots": int(sys.argv[4]), "torch": torch.__version__,
                  "sandbox": "on" if sys.argv[5] != "1" else "off"}))' \
  "${PKB_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}" "$HW" "$HOST" "$SLOTS" "${PKB_WORKER_ALLOW_UNSANDBOXED:-0}")
stamp "evaluating"
"$PY" scripts/device/board_batch.py --portal "http://127.0.0.1:$PORT" --token "$TOKEN" --hardware "$HW" \
  --dirs "$DIRS" --state "$STATE" --out "$OUTDIR" --budget-end "$BUDGET_END" --slots "$SLOTS" \
  --limit "$LIMIT" --match "$MATCH" --provenance "$PROVENANCE" --arch "$ARCH" \
  --prebuild-jobs "$PREBUILD_JOBS" ${SEED:+--prebuild-seed "$SEED"}
status=$?
stamp "batch done (exit $status)"
exit $status

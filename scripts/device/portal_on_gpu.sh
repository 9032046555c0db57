#!/usr/bin/env bash
# The whole portal path on one host, in one call: the portal (gunicorn, SQLite), a broker that
# needs no system Redis (kombu's filesystem transport), and an evaluation worker on the
# hardware's queue; a symmetric-memory kernel and a deadlocking one uploaded through the API;
# both waited for; their verdicts and the leaderboard row printed, with timings.
#
#   scripts/device/portal_on_gpu.sh                 # on a 2 x H200 host: queue pkb.hw.h200-x2-nvlink
#   scripts/device/portal_on_gpu.sh --device cpu    # the same path on CPU (gloo ranks), anywhere
#
# Options: --device cuda|cpu, --out DIR (logs, reports; default $OUT or /tmp/pkb-portal-run),
# --port N (8111), --timeout S (per job, 240), --budget S (the whole script, 540: it gives up,
# cleans up in a few seconds and fails inside a 600 s call). On a host without the portal's
# Python packages it installs them from the wheelhouse .whl/ (scripts/gpu_wheelhouse.sh); the
# worker is started by scripts/gpu_worker.sh, the command a GPU host uses.
set -uo pipefail
cd "$(dirname "$0")/../.."

DEVICE=cuda PORT=8111 JOB_TIMEOUT=240 BUDGET=540 OUTDIR=${OUT:-/tmp/pkb-portal-run}
while [ $# -gt 0 ]; do
  case $1 in
    --device) DEVICE=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --timeout) JOB_TIMEOUT=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR"
LOG="$OUTDIR/portal_on_gpu.log"
exec > >(tee -a "$LOG") 2>&1
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
# Elapsed time in bash alone (EPOCHREALTIME, microseconds): GPU hosts have no bc.
T0=${EPOCHREALTIME//[!0-9]/}
stamp() { local us=$(( ${EPOCHREALTIME//[!0-9]/} - T0 )); printf '[%4d.%d s] %s\n' $((us / 1000000)) $((us / 100000 % 10)) "$*"; }

if [ "$DEVICE" = cuda ]; then
  HW=h200-x2-nvlink PROBLEM=all-reduce
  GOOD=solutions/symm_mem/all_reduce_one_shot.py BAD=solutions/broken/gpu_deadlock.py
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
else
  HW=cpu-gloo-amd-epyc-2c PROBLEM=all-reduce
  GOOD=solutions/broken/cpu_correct.py BAD=solutions/broken/cpu_deadlock.py
fi
echo "== $(date -u +%FT%TZ) portal_on_gpu --device $DEVICE: hardware $HW, git ${PKB_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "?")}"
[ "$DEVICE" = cuda ] && nvidia-smi -L

. scripts/wheelhouse.sh
use_wheelhouse "$PY" django rest_framework drf_spectacular drf_spectacular_sidecar celery gunicorn \
  whitenoise plotly dj_database_url jsonschema || exit 1

VAR=$(mktemp -d /tmp/pkb-portal-XXXX)
export DJANGO_SETTINGS_MODULE=portal.settings.local PKB_DEBUG=0 PKB_VAR_DIR=$VAR \
  PKB_BROKER_URL=filesystem:// PKB_BROKER_DIR=$VAR/broker PKB_CALLBACK_BASE_URL=http://127.0.0.1:$PORT \
  PKB_EVAL_TIMEOUT_S=$JOB_TIMEOUT PKB_THROTTLE_ANON=10000/min PYTHONUNBUFFERED=1
PIDS=()
# Quick, bounded clean-up: TERM to each process group (gunicorn and celery stop at once when idle),
# KILL after 3 s to whatever is left; no bare `wait`, which would also wait for the log's tee.
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 30); do
    alive=0; for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  [ ${#PIDS[@]} -gt 0 ] && wait "${PIDS[@]}" 2>/dev/null
  cp "$VAR"/*.log "$OUTDIR"/ 2>/dev/null
  rm -rf "$VAR"
  stamp "cleaned up"
}
trap cleanup EXIT

stamp "migrating and loading the catalog (SQLite in $VAR)"
"$PY" manage.py migrate -v0 && "$PY" manage.py load_catalog || exit 1
TOKEN=$("$PY" manage.py shell -c "
from django.contrib.auth import get_user_model; from rest_framework.authtoken.models import Token
u, _ = get_user_model().objects.get_or_create(username='gpu-run'); print(Token.objects.get_or_create(user=u)[0].key)" | tail -1)

stamp "starting gunicorn on :$PORT and a worker on pkb.hw.$HW"
setsid "$PY" -m gunicorn portal.wsgi:application --bind 127.0.0.1:$PORT --workers 2 \
  --worker-class gthread --threads 4 > "$VAR/web.log" 2>&1 &
PIDS+=($!)
setsid env PKB_PORTAL_URL=http://127.0.0.1:$PORT PKB_WORKER_NAME=$DEVICE-worker \
  PKB_WORKER_SPOOL_DIR=$VAR/spool DJANGO_SETTINGS_MODULE= PY="$PY" \
  scripts/gpu_worker.sh "$HW" --loglevel INFO > "$VAR/worker.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$PORT/api/v1/hardware/" >/dev/null && break; sleep 0.5; done

upload() {  # model file -> submission id
  curl -s -H "Authorization: Token $TOKEN" -F problem=$PROBLEM -F hardware=$HW -F backend=torch \
    -F model="$1" -F source=@"$2" "http://127.0.0.1:$PORT/api/v1/submissions/" |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d, file=sys.stdout)'
}
stamp "uploading $GOOD and $BAD through the API"
GOOD_ID=$(upload symm-mem-hand "$GOOD"); BAD_ID=$(upload deadlock-demo "$BAD")
echo "submissions: good=$GOOD_ID deadlock=$BAD_ID"
case "$GOOD_ID$BAD_ID" in *[!0-9]*) echo "upload refused"; exit 1 ;; esac

status() { curl -s "http://127.0.0.1:$PORT/api/v1/submissions/$1/" | "$PY" -c '
import json,sys; d=json.load(sys.stdin)
print(d["status"], d.get("verdict") or "-", d.get("failure_class") or "-", d.get("speedup"), d.get("roofline_fraction"), (d.get("status_reason") or "")[:200].replace("\n"," "))'; }
deadline=$(( $(date +%s) + 2 * JOB_TIMEOUT + 120 ))
budget_end=$(( ${T0:0:-6} + BUDGET ))
[ "$deadline" -gt "$budget_end" ] && deadline=$budget_end
for id in $GOOD_ID $BAD_ID; do
  while :; do
    line=$(status "$id"); state=${line%% *}
    case $state in finished|failed) stamp "submission $id: $line"; break ;; esac
    [ "$(date +%s)" -gt "$deadline" ] && { stamp "submission $id still $line: giving up"; exit 1; }
    sleep 2
  done
done
for id in $GOOD_ID $BAD_ID; do
  curl -s "http://127.0.0.1:$PORT/api/v1/submissions/$id/" > "$OUTDIR/submission-$id.json"
done

echo "== leaderboard of $PROBLEM on $HW"
curl -s "http://127.0.0.1:$PORT/api/v1/leaderboards/problems/$PROBLEM/?hardware=$HW" | "$PY" -c '
import json,sys; d=json.load(sys.stdin)
print("baseline ms:", d["baseline_ms"])
for r in d["rows"]:
    print("{:>4} {:<22} speedup {} ({}-{})  median {} ms  roofline fraction {}".format(
        str(r.get("rank") or "-"), r["model"], r.get("speedup"), r.get("speedup_low"), r.get("speedup_high"),
        r.get("time_ms"), r.get("roofline_fraction")))'
curl -s "http://127.0.0.1:$PORT/api/v1/leaderboards/models/?hardware=$HW" > "$OUTDIR/model-leaderboard.json"
GOOD_STATE=$(status "$GOOD_ID"); BAD_STATE=$(status "$BAD_ID")
stamp "done"
case "$GOOD_STATE" in "finished pass"*) ;; *) echo "FAIL: the kernel did not pass: $GOOD_STATE"; exit 1 ;; esac
case "$BAD_STATE" in "finished fail deadlock"*) ;; *) echo "FAIL: the deadlock was not reported as one: $BAD_STATE"; exit 1 ;; esac
echo "OK: the kernel passed, the deadlock was diagnosed, the leaderboard shows the kernel"

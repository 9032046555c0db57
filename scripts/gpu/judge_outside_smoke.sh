#!/usr/bin/env bash
# The judge outside the ranks on GPUs (`pkb eval --gpu-judge outside`, docs/judge.md), first runs:
# on two GPUs, the same files judged outside and in the ranks, one after the other: an exact copy
# of the all-reduce reference (its speedup must be 1), the one-shot symmetric-memory kernel, and a
# candidate that answers before its GPU work is done (it must not score above 1 outside).
#   scripts/gpu/judge_outside_smoke.sh            (repository root; OUT: where logs and reports go)
#   SHARE_GPU=1 SIZE=small scripts/gpu/judge_outside_smoke.sh
#                                                 (a host with one GPU: both ranks on it, over gloo,
#                                                  --share-gpu; verdicts mean what they say, times nothing)
# Prints one row per evaluation (judge, file, verdict, speedup [interval], wall s, calls per block,
# GPU quiet) and packs the reports into $OUT/judge_smoke.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
SHARED=(); [ -n "${SHARE_GPU:-}" ] && SHARED=(--share-gpu)
if [ -n "${SHARE_GPU:-}" ]; then export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
else export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}; fi
SIZE=${SIZE:-default}
OUT=${OUT:-/tmp/pkb-out}
PYTHON=${PYTHON:-python3}
CAP=${CAP:-150}
WORK=$(mktemp -d /tmp/pkb-judge-smoke-XXXX)
mkdir -p "$WORK/reports"
printf '"""An exact copy of the all-reduce reference: its speedup must be 1."""\nfrom problems import get as _get\n\nsolution = _get("all-reduce").reference\n' \
  > "$WORK/all_reduce_reference_copy.py"
# The reference's answer copied into one buffer kept across calls: honest, but each call overwrites
# the last one's output; read in place (--judge-release block on GPUs) the shim must copy them.
cat > "$WORK/all_reduce_reused_output.py" <<'PYEOF'
"""The all-reduce reference, returning one buffer it rewrites every call."""
import torch
from problems import get as _get

_reference = _get("all-reduce").reference
_kept = []


def solution(x, *, group):
    out = _reference(x, group=group)
    if not _kept or _kept[0].shape != out.shape or _kept[0].dtype != out.dtype:
        _kept[:] = [torch.empty_like(out)]
    return _kept[0].copy_(out)
PYEOF
RUNS=("outside:$WORK/all_reduce_reference_copy.py" "ranks:$WORK/all_reduce_reference_copy.py"
      "outside:solutions/symm_mem/all_reduce_one_shot.py" "ranks:solutions/symm_mem/all_reduce_one_shot.py"
      "outside:solutions/broken/gpu_answers_before_done.py" "outside:$WORK/all_reduce_reference_copy.py"
      # A rank that rebuilds the problem's shared inputs from its job's seeds must fail its first
      # trial under both judges (the in-rank judge's seed secret; the judge's own inputs outside).
      "ranks:tests/evaluator/hostile/predicts_shared_inputs.py:fsdp-tp-swiglu-mlp"
      "outside:tests/evaluator/hostile/predicts_shared_inputs.py:fsdp-tp-swiglu-mlp"
      "outside:$WORK/all_reduce_reused_output.py")
# SMOKE_FILES="outside:tests/evaluator/hostile/batches_the_block.py ..." runs those instead
# (judge:file[:problem], problem all-reduce when not named): the attacks on the judge, on GPUs.
if [ -n "${SMOKE_FILES:-}" ]; then read -r -a RUNS <<< "$SMOKE_FILES"; fi
# SMOKE_RUNS="1 3 5" keeps those of the nine (1-based), for a call shared with other work.
if [ -n "${SMOKE_RUNS:-}" ]; then
  kept=(); for i in $SMOKE_RUNS; do kept+=("${RUNS[$((i - 1))]}"); done; RUNS=("${kept[@]}")
fi
# JUDGE_RELEASE=block: the judge releases a block's inputs at once (--judge-release; default per call).
RELEASE=(); [ -n "${JUDGE_RELEASE:-}" ] && RELEASE=(--judge-release "$JUDGE_RELEASE")
# The profile of this host's GPUs, named (the evaluator would pick it too; the log then says so).
MODEL=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -Eo 'H[0-9]{3}' | tr 'H' 'h')
HARDWARE=()
[ -n "$MODEL" ] && [ -f "hardware/$MODEL-x2-nvlink.json" ] && HARDWARE=(--hardware "$MODEL-x2-nvlink")
echo "== $(date -u +%FT%TZ) judge_outside_smoke on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  "GPUs $CUDA_VISIBLE_DEVICES ${SHARED[*]} size $SIZE, commit ${PKB_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
i=0
for run in "${RUNS[@]}"; do
  judge=${run%%:*}; file=${run#*:}; problem=all-reduce; i=$((i + 1))
  case "$file" in *:*) problem=${file##*:}; file=${file%:*};; esac
  name="$i-$judge-$(basename "$file" .py)"
  began=${EPOCHREALTIME/./}
  timeout -k 10 "$CAP" "$PYTHON" -m evaluator.cli eval --problem "$problem" --solution "$file" --world-size 2 \
    --device cuda --size "$SIZE" --gpu-judge "$judge" "${RELEASE[@]}" "${HARDWARE[@]}" "${SHARED[@]}" --json "$WORK/reports/$name.json" > "$WORK/reports/$name.log" 2>&1
  rc=$?
  wall=$(( (${EPOCHREALTIME/./} - began) / 1000000 ))
  tar -C "$WORK" -czf "$OUT/judge_smoke.tgz" reports  # after every run: a cap that cuts the lane keeps what ended
  "$PYTHON" - "$WORK/reports/$name.json" "$name" "$rc" "$wall" <<'PY'
import json, sys
path, name, rc, wall = sys.argv[1:]
try:
    r = json.load(open(path))
except (OSError, ValueError):
    log = open(path[:-5] + ".log", errors="replace").read()[-1500:] if path.endswith(".json") else ""
    print(f"{name:55s} no report (exit {rc}, {wall} s); the log ends:\n{log}"); sys.exit()
t = r.get("timing") or {}
f = r.get("failure") or {}
checks = t.get("checks") or {}
iv = t.get("interval") or {}
stop = t.get("stop") or {}
speed = (f"{t['speedup']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]" if t.get("speedup") and iv
         else str(t.get("speedup")))
per_call = "/".join(f"{(t.get(side) or {}).get('median_ms', 0):.4f}" for side in ("candidate", "reference"))
print(f"{name:50s} {r.get('verdict', '?'):5s} {f.get('failure_class', ''):18s} {speed:24s} {wall:>4s} s "
      f"ms/call cand/ref {per_call} "
      f"stop {stop.get('reason')}/{stop.get('rounds')} blocks {t.get('block_calls')} "
      f"max/block {checks.get('calls_per_block_max')} quiet {checks.get('gpu_quiet')} "
      f"blocks {checks.get('block_ms')} outputs_read {checks.get('outputs_read')} phases_s {(r.get('wall_time') or {}).get('phases_s')} "
      f"{(f.get('message') or '')[:300]}")
PY
done
tar -C "$WORK" -czf "$OUT/judge_smoke.tgz" reports
rm -rf "$WORK"

#!/usr/bin/env bash
# One device call on a 2- or 4-GPU host: the best known kernels (issue 23) through `pkb eval`
# at the default size and `pkb sweep` over message sizes, at world sizes 2 and 4 (x2 and x4
# lines interleaved, most important first), every run under a wall-clock cap so that one hang cannot eat the batch.
#   bash scripts/device/kernels_batch.sh                    (repository root)
# Environment:
#   OUT       where everything goes (default /tmp/pkb-out); at most 3 files are left there:
#             kernels.log, kernels-table.txt and kernels-reports.tgz (every JSON report).
#   BUDGET_S  seconds for all runs together (default 540: the device tool's 600 s less start-up
#             and packing). A run starts only if its estimated cost fits what is left; the runs
#             skipped are listed at the end with the FROM= that goes on from there next time.
#   ONLY      an extended regex; only plan lines that match it run (e.g. ONLY='x4' or
#             ONLY='sweep all-reduce'). A plan line reads "x2 eval all-reduce FILE".
#   FROM      start at this plan line (1-based, counting every line of PLAN below; default 1).
#   PKB_GIT_COMMIT  the commit to print in the header (the device's .git may be an older checkout).
#   MODE      "timed" (default) or "check": every eval line with --no-timing (correctness only,
#             sandbox on, about half the time) and no sweeps: the quickest way to see that every
#             kernel passes the judge before spending the budget on timings.
#   WORLDS    world sizes to run (default "2 4"; a size above the host's GPU count is skipped).
#   GPUS      the GPUs to use, comma-separated (default 0,1,...): GPUS=2,3 runs a second lane of
#             2-GPU lines beside another on 0,1 (ONLY matches lines as "x2 eval all-reduce FILE").
#   SIZES     sweep sizes (default "4K 64K 256K 4M 64M"); TRIALS (default 5, as pkb eval).
#   ALIGN     "device": every run with --gpu-align device (the ranks also meet on the GPU before
#             each timed call, docs/timing.md); its reports are named ...-align-device.json, so
#             a call with ALIGN=device beside one without gives both for the same plan lines.
#   DEVICE=cpu N=2 PYTHON=.venv/bin/python   a CPU dry run of the plumbing (gloo, size small,
#             one sweep size unless SIZES says otherwise). The GPU kernels fail there by design
#             (no CUDA): the dry run shows that a failing kernel does not stop the others.
# The sweeps time NCCL (the reference) at every size beside the kernel, so each sweep also
# gives the NCCL bus-bandwidth curve of its problem.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/pkb-out}
BUDGET_S=${BUDGET_S:-540}
TRIALS=${TRIALS:-5}
DEVICE=${DEVICE:-cuda}
WORLDS=${WORLDS:-2 4}
ONLY=${ONLY:-.}
FROM=${FROM:-1}
MODE=${MODE:-timed}
PYTHON=${PYTHON:-python3}
if [ "$DEVICE" = cuda ]; then
  EVAL_SIZE=default; SIZES=${SIZES:-4K 64K 256K 4M 64M}
  N=${N:-$(nvidia-smi -L | wc -l)}
else
  EVAL_SIZE=small; SIZES=${SIZES:-4K}; N=${N:-2}
fi
# Estimated seconds per run, for the budget check (pkb eval at default: 22-36 s on the H200
# hosts, docs/sweeps.md; a sweep size about the same, less at small sizes).
if [ "$MODE" = check ]; then EVAL_COST=${EVAL_COST:-25}; else EVAL_COST=${EVAL_COST:-45}; fi
SIZE_COST=${SIZE_COST:-30}
EVAL_CAP=${EVAL_CAP:-150}

REPORTS="$OUT/reports"
mkdir -p "$REPORTS"
LOG="$OUT/kernels.log"
SCRATCH=$(mktemp -d /tmp/pkb-kernels.XXXXXX)

# The plan, most important first. Fields: world size, kind (eval or sweep), problem, file, and
# for a sweep optionally its sizes (comma-separated; default SIZES). A file may be "reference"
# (an exact copy of the reference, speedup 1 by construction) or FILE@VARIANT (a copy of FILE
# with one constant changed, made by make_variant below).
PLAN="
2 eval  all-reduce                     solutions/symm_mem/all_reduce_two_shot.py
2 eval  all-reduce                     solutions/library/all_reduce_torch_symm_mem.py
2 sweep all-reduce                     solutions/symm_mem/all_reduce_two_shot.py
4 eval  all-reduce                     solutions/symm_mem/all_reduce_two_shot.py
4 eval  all-reduce                     solutions/library/all_reduce_torch_symm_mem.py
4 sweep all-reduce                     solutions/symm_mem/all_reduce_two_shot.py
2 eval  all-gather                     solutions/symm_mem/all_gather_one_kernel.py
2 eval  reduce-scatter                 solutions/symm_mem/reduce_scatter_one_kernel.py
2 eval  all-to-all                     solutions/symm_mem/all_to_all_push.py
2 eval  moe-dispatch-all-to-all        solutions/symm_mem/moe_dispatch_pull.py
2 eval  moe-combine-all-to-all         solutions/symm_mem/moe_combine_push.py
2 eval  tp-allgather-gemm              solutions/symm_mem/tp_allgather_gemm_overlap.py
2 eval  tp-gemm-reducescatter          solutions/symm_mem/tp_gemm_reducescatter_overlap.py
4 eval  all-gather                     solutions/symm_mem/all_gather_one_kernel.py
4 eval  reduce-scatter                 solutions/symm_mem/reduce_scatter_one_kernel.py
4 eval  all-to-all                     solutions/symm_mem/all_to_all_push.py
4 eval  moe-dispatch-all-to-all        solutions/symm_mem/moe_dispatch_pull.py
4 eval  moe-combine-all-to-all         solutions/symm_mem/moe_combine_push.py
4 eval  tp-allgather-gemm              solutions/symm_mem/tp_allgather_gemm_overlap.py
4 eval  tp-gemm-reducescatter          solutions/symm_mem/tp_gemm_reducescatter_overlap.py
2 eval  tp-fused-allgather-matmul      solutions/library/tp_fused_allgather_matmul_torch.py
2 eval  tp-fused-matmul-reducescatter  solutions/library/tp_fused_matmul_reducescatter_torch.py
2 eval  tp-fused-allgather-matmul      solutions/symm_mem/tp_fused_allgather_matmul_overlap.py
2 eval  tp-fused-matmul-reducescatter  solutions/symm_mem/tp_fused_matmul_reducescatter_overlap.py
2 eval  tp-allgather-gemm              solutions/library/tp_allgather_gemm_torch.py
2 eval  tp-gemm-reducescatter          solutions/library/tp_gemm_reducescatter_torch.py
4 eval  tp-fused-allgather-matmul      solutions/library/tp_fused_allgather_matmul_torch.py
4 eval  tp-fused-matmul-reducescatter  solutions/library/tp_fused_matmul_reducescatter_torch.py
4 eval  tp-fused-allgather-matmul      solutions/symm_mem/tp_fused_allgather_matmul_overlap.py
4 eval  tp-fused-matmul-reducescatter  solutions/symm_mem/tp_fused_matmul_reducescatter_overlap.py
4 eval  tp-allgather-gemm              solutions/library/tp_allgather_gemm_torch.py
4 eval  tp-gemm-reducescatter          solutions/library/tp_gemm_reducescatter_torch.py
2 sweep all-reduce                     solutions/library/all_reduce_torch_symm_mem.py
2 sweep all-reduce                     solutions/symm_mem/all_reduce_two_shot.py@two_shot_only 256K,1M,4M,16M
2 sweep all-reduce                     solutions/symm_mem/all_reduce_two_shot.py@one_shot_only 256K,1M,4M,16M
2 sweep all-gather                     solutions/symm_mem/all_gather_one_kernel.py
2 sweep reduce-scatter                 solutions/symm_mem/reduce_scatter_one_kernel.py
2 sweep all-to-all                     solutions/symm_mem/all_to_all_push.py
4 sweep all-reduce                     solutions/library/all_reduce_torch_symm_mem.py
4 sweep all-reduce                     solutions/symm_mem/all_reduce_two_shot.py@two_shot_only 64K,256K,1M,4M
4 sweep all-reduce                     solutions/symm_mem/all_reduce_two_shot.py@one_shot_only 64K,256K,1M,4M
4 sweep all-gather                     solutions/symm_mem/all_gather_one_kernel.py
4 sweep reduce-scatter                 solutions/symm_mem/reduce_scatter_one_kernel.py
4 sweep all-to-all                     solutions/symm_mem/all_to_all_push.py
2 eval  all-reduce                     solutions/symm_mem/all_reduce_one_shot.py
2 eval  all-gather                     solutions/symm_mem/all_gather_push.py
2 eval  reduce-scatter                 solutions/symm_mem/reduce_scatter_pull.py
4 eval  all-reduce                     solutions/symm_mem/all_reduce_one_shot.py
2 eval  all-gather                     solutions/triton/all_gather_triton.py
2 eval  reduce-scatter                 solutions/triton/reduce_scatter_triton.py
4 eval  all-gather                     solutions/triton/all_gather_triton.py
4 eval  reduce-scatter                 solutions/triton/reduce_scatter_triton.py
2 sweep all-gather                     solutions/triton/all_gather_triton.py
2 sweep reduce-scatter                 solutions/triton/reduce_scatter_triton.py
"

# On CPU the kernels cannot run: an exact copy of the reference first gives rows that pass.
if [ "$DEVICE" = cpu ]; then
  PLAN="
2 eval  all-reduce                     reference
2 sweep all-reduce                     reference
$PLAN"
fi

log() { echo "$@" | tee -a "$LOG"; }

{
  echo "== $(date -u +%FT%TZ) commit ${PKB_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, device $DEVICE x$N"
  if [ "$DEVICE" = cuda ]; then nvidia-smi -L; nvidia-smi topo -m | head -6; fi
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")'
  echo "mode $MODE; budget ${BUDGET_S} s; worlds $WORLDS; eval size $EVAL_SIZE; sweep sizes $SIZES; trials $TRIALS; only /$ONLY/"
} 2>&1 | tee "$LOG"

reference_copy() {  # an exact copy of the reference, as scripts/device/sweep_batch.sh makes it
  local slug=$1 file="$SCRATCH/${1//-/_}_reference_copy.py"
  printf '"""An exact copy of the %s reference: its speedup must be 1."""\nfrom problems import get as _get\n\nsolution = _get(%s).reference\n' \
    "$slug" "'$slug'" > "$file"
  echo "$file"
}

hardware_args() {  # the measured profile of this GPU model at this world size, where one exists
  local ws=$1 model
  [ "$DEVICE" = cuda ] || return 0
  model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -Eo 'H[0-9]{3}' | tr 'H' 'h')
  # The evaluator now prefers the host's own GPU model; naming the profile keeps the reports'
  # commands explicit about which one was used.
  if [ -n "$model" ] && [ -f "hardware/$model-x$ws-nvlink.json" ]; then echo "--hardware $model-x$ws-nvlink"; fi
}

make_variant() {  # FILE@VARIANT -> a copy of FILE with one constant changed, named after both
  local base=${1%@*} variant=${1#*@} expr
  case $variant in
    two_shot_only) expr='s/^ONE_SHOT_MAX_BYTES = .*/ONE_SHOT_MAX_BYTES: dict = {}/; s/^ONE_SHOT_MAX_BYTES_DEFAULT = .*/ONE_SHOT_MAX_BYTES_DEFAULT = -1/' ;;
    one_shot_only) expr='s/^ONE_SHOT_MAX_BYTES = .*/ONE_SHOT_MAX_BYTES: dict = {}/; s/^ONE_SHOT_MAX_BYTES_DEFAULT = .*/ONE_SHOT_MAX_BYTES_DEFAULT = 1 << 62/' ;;
    *) echo "/nonexistent/unknown-variant-$variant"; return ;;
  esac
  local file="$SCRATCH/$(basename "$base" .py)_$variant.py"
  [ -f "$base" ] && sed "$expr" "$base" > "$file"
  echo "$file"
}

start=$(date +%s)
skipped=()
first_skipped=
index=0
while read -r ws kind slug file line_sizes; do
  [ -n "${ws:-}" ] || continue
  index=$((index + 1))
  [ "$index" -ge "$FROM" ] || continue
  line="x$ws $kind $slug $file"
  echo "$line" | grep -Eq -- "$ONLY" || continue
  if [ "$MODE" = check ] && [ "$kind" = sweep ]; then continue; fi
  case " $WORLDS " in *" $ws "*) ;; *) continue ;; esac
  if [ "$ws" -gt "$N" ]; then log "== skip ($line): the host has $N devices"; continue; fi
  # GPUS (e.g. "2,3 ..." for a second lane on the same host): the first ws of them; default 0..ws-1.
  if [ "$DEVICE" = cuda ]; then export CUDA_VISIBLE_DEVICES=$(echo "${GPUS:-$(seq -s, 0 $((ws - 1)))}" | cut -d, -f1-"$ws"); fi
  if [ "$DEVICE" = cpu ]; then line_sizes=""; fi  # a dry run stays tiny
  if [ -n "${line_sizes:-}" ]; then read -r -a sizes <<< "${line_sizes//,/ }"; else read -r -a sizes <<< "$SIZES"; fi
  if [ "$file" = reference ]; then file=$(reference_copy "$slug"); fi
  case $file in *@*) file=$(make_variant "$file") ;; esac
  if [ ! -f "$file" ]; then log "== skip ($line): no such file $file"; continue; fi
  name=$(basename "$file" .py)
  read -r -a hw <<< "$(hardware_args "$ws")"
  if [ "$DEVICE" = cuda ] && [ ${#hw[@]} -eq 0 ]; then
    log "   note: no committed profile for this GPU model at x$ws; the roofline uses the evaluator's default"
  fi
  if [ "$MODE" = check ]; then timing=(--no-timing); else timing=(); fi
  align=(); tag=""
  if [ -n "${ALIGN:-}" ]; then align=(--gpu-align "$ALIGN"); tag="-align-$ALIGN"; fi
  left=$((BUDGET_S - ($(date +%s) - start)))
  if [ "$kind" = eval ]; then cost=$EVAL_COST; else cost=$((SIZE_COST * ${#sizes[@]})); fi
  if [ "$left" -lt "$cost" ]; then skipped+=("$line"); first_skipped=${first_skipped:-$index}; log "== skip ($line): ${left} s left, needs ~${cost} s"; continue; fi
  t0=$(date +%s)
  if [ "$kind" = eval ]; then
    cap=$(( left < EVAL_CAP ? left : EVAL_CAP ))
    log "== $(date -u +%T) $line (cap ${cap} s)"
    timeout -k 10 "$cap" "$PYTHON" -m evaluator.cli eval --problem "$slug" --solution "$file" --world-size "$ws" "${hw[@]}" \
      --device "$DEVICE" --size "$EVAL_SIZE" --trials "$TRIALS" --deadline $((cap - 15)) "${timing[@]}" "${align[@]}" \
      --json "$REPORTS/eval-$slug-$name-x$ws$tag.json" < /dev/null 2>&1 | tail -25 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
  else
    cap=$(( left < cost * 3 / 2 ? left : cost * 3 / 2 ))
    log "== $(date -u +%T) $line, sizes ${sizes[*]} (deadline ${cap} s)"
    # The evaluator keeps to its deadline; the timeout is only a backstop against a hung parent.
    timeout -k 10 $((cap + 45)) "$PYTHON" -m evaluator.cli sweep --problem "$slug" --solution "$file" \
      --world-size "$ws" "${hw[@]}" --device "$DEVICE" --trials "$TRIALS" --deadline "$cap" --sizes "${sizes[@]}" "${align[@]}" \
      --out "$REPORTS/sweep-$slug-$name-x$ws$tag.json" < /dev/null 2>&1 | tail -30 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
  fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    log "   KILLED at the wall-clock cap after $(($(date +%s) - t0)) s (exit $rc): no report"
  else
    log "   exit $rc after $(($(date +%s) - t0)) s"
  fi
done <<< "$PLAN"
unset CUDA_VISIBLE_DEVICES
log "== $(date -u +%T) runs done in $(($(date +%s) - start)) s"
if [ ${#skipped[@]} -gt 0 ]; then
  log "== not run for want of budget:"
  for line in "${skipped[@]}"; do log "   $line"; done
  log "== to go on next call: FROM=$first_skipped bash scripts/device/kernels_batch.sh (plan line $first_skipped on; the lines after it that ran here run again)"
fi
"$PYTHON" scripts/device/kernels_table.py "$REPORTS" 2>&1 | tee "$OUT/kernels-table.txt" | tee -a "$LOG"
rm -rf "$SCRATCH"
# The device tool brings back only a few files: every report goes back in one archive.
(cd "$OUT" && tar czf kernels-reports.tgz reports && rm -rf reports)
ls -l "$OUT" | tee -a "$LOG"

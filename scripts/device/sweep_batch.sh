#!/usr/bin/env bash
# One device call on a multi-GPU host: message-size sweeps (docs/sweeps.md) of the plain
# collectives' symmetric-memory kernels against NCCL, every GPU of the host as one rank each.
#   scripts/device/sweep_batch.sh [PROBLEM:FILE | PROBLEM:reference ...]      (repository root)
# Default: the three kernels in solutions/symm_mem. PROBLEM:reference sweeps an exact copy of the
# reference (speedup 1 by construction: the NCCL busbw curve of a collective without a kernel).
# Environment: OUT (where reports and logs go), BUDGET_S (seconds for every sweep together,
# default 540: the device tool's 600 s per command less start and packing), SIZES (e.g. "4K 1M
# 64M"; default the problem's 4 KiB-256 MiB), TRIALS (default 5, as pkb eval), EVAL (default 1:
# first one `pkb eval` of the file at the hardware's preset, default on GPUs and small on CPUs as
# the portal ranks them: the report a committed sweep attaches
# to when the portal is seeded, docs/sweeps.md; 0 skips it), and for a CPU
# dry run of the plumbing DEVICE=cpu N=2 (PYTHON=.venv/bin/python where python3 lacks torch).
# Each sweep gets an equal share of what is left of the budget as its --deadline; sizes that
# cannot finish inside it are skipped and the report says so (never cut mid-evaluation).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/pkb-out}
BUDGET_S=${BUDGET_S:-540}
TRIALS=${TRIALS:-5}
DEVICE=${DEVICE:-cuda}
SIZES=${SIZES:-}
if [ "$DEVICE" = cuda ]; then EVAL_SIZE=default; else EVAL_SIZE=small; fi
if [ -z "${N:-}" ]; then N=$(nvidia-smi -L | wc -l); fi
PYTHON=${PYTHON:-python3}
PKB=("$PYTHON" -m evaluator.cli)
ENTRIES=("$@")
if [ ${#ENTRIES[@]} -eq 0 ]; then
  ENTRIES=(all-reduce:solutions/symm_mem/all_reduce_one_shot.py all-gather:solutions/symm_mem/all_gather_push.py
           reduce-scatter:solutions/symm_mem/reduce_scatter_pull.py)
fi
SCRATCH=$(mktemp -d /tmp/pkb-sweep.XXXXXX)
mkdir -p "$OUT/sweeps"
LOG="$OUT/sweep-x$N.log"
{
  echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), device $DEVICE x$N"
  if [ "$DEVICE" = cuda ]; then nvidia-smi -L | head -1; nvidia-smi topo -m | head -5; fi
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")'
  shown_sizes=${SIZES:-default}
  echo "entries: ${ENTRIES[*]}; budget ${BUDGET_S} s; sizes ${shown_sizes}; trials $TRIALS"
} 2>&1 | tee "$LOG"

start=$(date +%s)
remaining=${#ENTRIES[@]}
for entry in "${ENTRIES[@]}"; do
  slug=${entry%%:*}
  file=${entry#*:}
  if [ "$file" = reference ]; then
    file="$SCRATCH/${slug//-/_}_reference_copy.py"
    printf '"""An exact copy of the %s reference: its speedup must be 1."""\nfrom problems import get as _get\n\nsolution = _get(%s).reference\n' \
      "$slug" "'$slug'" > "$file"
  fi
  if [ ! -f "$file" ]; then
    echo "== skip $entry: no file $file" | tee -a "$LOG"
    remaining=$((remaining - 1))
    continue
  fi
  left=$((BUDGET_S - ($(date +%s) - start)))
  share=$((left / remaining))
  if [ "$share" -lt 30 ]; then
    echo "== skip $entry: ${left} s of the budget left for ${remaining} sweeps" | tee -a "$LOG"
    remaining=$((remaining - 1))
    continue
  fi
  name=$(basename "$file" .py)
  if [ "${EVAL:-1}" != 0 ]; then
    echo "== $(date -u +%T) $slug: pkb eval of $file" | tee -a "$LOG"
    timeout $((share / 2)) "${PKB[@]}" eval --problem "$slug" --solution "$file" --world-size "$N" --device "$DEVICE" \
      --size "$EVAL_SIZE" --trials "$TRIALS" --deadline $((share / 2 - 10)) --json "$OUT/sweeps/eval-$slug-$name-x$N.json" 2>&1 | tee -a "$LOG"
    left=$((BUDGET_S - ($(date +%s) - start)))
    share=$((left / remaining))
  fi
  report="$OUT/sweeps/sweep-$slug-$name-x$N.json"
  echo "== $(date -u +%T) $slug: $file, deadline ${share} s" | tee -a "$LOG"
  args=(sweep --problem "$slug" --solution "$file" --world-size "$N" --device "$DEVICE" --trials "$TRIALS"
        --deadline "$share" --out "$report")
  if [ -n "$SIZES" ]; then
    read -r -a sizes <<< "$SIZES"
    args+=(--sizes "${sizes[@]}")
  fi
  # The evaluator keeps to its deadline; the timeout is only a backstop against a hung parent.
  timeout $((share + 45)) "${PKB[@]}" "${args[@]}" 2>&1 | tee -a "$LOG"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$LOG"
  remaining=$((remaining - 1))
done
echo "== $(date -u +%T) all sweeps done in $(($(date +%s) - start)) s" | tee -a "$LOG"
rm -rf "$SCRATCH"
# The device tool brings back only a few files: the reports go back as one archive.
(cd "$OUT" && tar czf "sweeps-x$N.tgz" sweeps && rm -rf sweeps)
ls -l "$OUT" | tee -a "$LOG"

#!/usr/bin/env bash
# One device call on a multi-GPU host: the reproducibility table of docs/timing.md.
#   PKB_COMMIT=<sha> scripts/device/repeat_batch.sh [RUNS [PROBLEM:FILE ...]]   (repository root; logs under $OUT)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/pkb-out}
RUNS=${1:-5}
shift || true
ENTRIES=("$@")
[ ${#ENTRIES[@]} -gt 0 ] || ENTRIES=(all-reduce:reference all-reduce:solutions/symm_mem/all_reduce_one_shot.py
                                    all-gather:reference tp-gemm-reducescatter:reference)
N=$(nvidia-smi -L | wc -l)
mkdir -p "$OUT" /tmp/pkb-repeat
echo "== $(date -u +%FT%TZ) $(nvidia-smi -L | head -1) x$N" | tee "$OUT/repeat.log"
nvidia-smi topo -m | head -5 | tee -a "$OUT/repeat.log"
# One evaluation first, in full: if the flow breaks on this host, the log says where.
python3 -m evaluator.cli eval --problem all-reduce --solution solutions/symm_mem/all_reduce_one_shot.py \
  --world-size "$N" --device cuda --json "$OUT/one_shot_report.json" 2>&1 | tail -25 | tee -a "$OUT/repeat.log"
timeout 480 python3 scripts/repeat_eval.py --runs "$RUNS" --world-size "$N" --device cuda --out /tmp/pkb-repeat \
  "${ENTRIES[@]}" 2>&1 | tee -a "$OUT/repeat.log"
cp /tmp/pkb-repeat/summary.json "$OUT/repeat_summary.json" 2>/dev/null
ls /tmp/pkb-repeat | head -40 >> "$OUT/repeat.log"

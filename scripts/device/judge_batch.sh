#!/usr/bin/env bash
# One device call for the judge outside the ranks on GPUs (docs/judge.md): what a judged call costs
# against a bare loop of the same collective, with the report's block_ms (where the judge's clock
# went), and the smoke runs (an exact copy of the reference, the one-shot kernel, the early
# answerer) judged outside and in the ranks. On a 4-GPU host the two run side by side (GPUs 0,1
# and 2,3); on a 2-GPU host, or on the one pair named by JUDGE_GPUS (JUDGE_GPUS=2,3 leaves GPUs 0,1
# to a board batch in the same call), one after the other.
#   PKB_GIT_COMMIT=<sha> scripts/device/judge_batch.sh      (repository root; OUT: where logs go)
# Leaves in $OUT: judge-batch.log (the tables) and judge_smoke.tgz (every report).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/pkb-out}
CAP=${CAP:-520}  # seconds for each lane: inside one device call with start-up and packing
mkdir -p "$OUT"
LOG="$OUT/judge-batch.log"
N=$(nvidia-smi -L | wc -l)
{
  echo "== $(date -u +%FT%TZ) judge_batch, commit ${PKB_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  nvidia-smi -L
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} 2>&1 | tee "$LOG"
batching() {  # what batching K calls is worth per size: the case for per-call release (docs/judge.md)
  CUDA_VISIBLE_DEVICES=$1 timeout -k 10 120 python3 scripts/bench/batching_gain.py --device cuda \
    --sizes 4K,64K,256K,4M,64M --batch 4,16 > "$OUT/batching.txt" 2>&1
  echo "batching exit $?" >> "$OUT/batching.txt"
}
overhead() {  # released call by call, then by block: each against the bare loop
  for release in call block; do
    CUDA_VISIBLE_DEVICES=$1 timeout -k 10 $((CAP / 2)) python3 scripts/bench/judge_overhead.py --device cuda \
      --size default --gpu-judge outside --judge-release $release --runs "${OVERHEAD_RUNS:-1}" >> "$OUT/overhead.txt" 2>&1
    echo "overhead ($release) exit $?" >> "$OUT/overhead.txt"
  done
}
smoke() {
  CUDA_VISIBLE_DEVICES=$1 OUT="$OUT" CAP=150 timeout -k 10 "$CAP" bash scripts/gpu/judge_outside_smoke.sh \
    > "$OUT/smoke.txt" 2>&1
  echo "smoke exit $?" >> "$OUT/smoke.txt"
}
batching "${JUDGE_GPUS:-0,1}"
if [ "$N" -ge 4 ] && [ -z "${JUDGE_GPUS:-}" ]; then
  overhead 0,1 & SMOKE_RUNS=${SMOKE_RUNS:-1 3 5 4} smoke 2,3 & wait
else
  PAIR=${JUDGE_GPUS:-0,1}
  CAP=$((CAP / 2)); overhead "$PAIR"; SMOKE_RUNS=${SMOKE_RUNS:-1 3 5} smoke "$PAIR"
fi
{ echo; echo "== batching gain (K all-reduces one by one, queued, coalesced, fused)"; cat "$OUT/batching.txt"
  echo; echo "== overhead (bare loop against the judged reference)"; cat "$OUT/overhead.txt"
  echo; echo "== smoke (judge, file, verdict, speedup, wall, per-call ms, blocks)"; cat "$OUT/smoke.txt"; } >> "$LOG"
rm -f "$OUT/batching.txt" "$OUT/overhead.txt" "$OUT/smoke.txt"
tail -40 "$LOG"

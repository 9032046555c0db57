#!/usr/bin/env bash
# One device call on a host with one GPU (only `nvidia-h200` lent): what of the GPU path can be
# checked there (docs/judge.md, "What one GPU answered").
#   1. the output heap under NCCL's stream (scripts/gpu/heap_probe.py --backend nccl, with and
#      without the shim's recycle): do the pool's segments come back as they do over gloo?
#   2. does nvidia-smi name a process's host pid here (what hardware/gpu_memory.py reads)?
#   3. a candidate that takes its GPU's memory at import (solutions/broken/gpu_takes_the_memory.py),
#      both judges, two ranks sharing the GPU: the starved reference must be the candidate's;
#   4. where a `pkb eval`'s start-up goes, from its --progress lines, timestamped, both judges.
#   PKB_GIT_COMMIT=<sha> bash scripts/gpu/one_gpu_batch.sh   (repository root; OUT: where logs go)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
OUT=${OUT:-/tmp/pkb-out}
mkdir -p "$OUT"
LOG="$OUT/one-gpu-batch.log"
exec > >(tee "$LOG") 2>&1
echo "== $(date -u +%FT%TZ) one_gpu_batch, commit ${PKB_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'

echo; echo "== 1. heap under NCCL (64 MiB outputs, blocks of 28)"
for nudge in "" --nudge; do
  timeout -k 5 90 python3 scripts/gpu/heap_probe.py --backend nccl --blocks 3 --calls 28 $nudge
  echo "heap_probe nccl ${nudge:-no-nudge} exit $?"
done

echo; echo "== 2. does nvidia-smi see this container's pids?"
python3 -c 'import torch, time, os; x = torch.empty(8 << 30, dtype=torch.uint8, device="cuda"); print("holder pid", os.getpid(), flush=True); time.sleep(12)' &
holder=$!
sleep 8
echo "shell sees holder as pid $holder"
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits
nvidia-smi --query-gpu=uuid,index,memory.total,memory.used --format=csv,noheader,nounits
python3 -c "from evaluator.hardware import gpu_memory; print('held_by', gpu_memory.held_by([$holder]))"
wait $holder

echo; echo "== 3. a candidate that takes the GPU's memory (size small, two ranks share GPU 0)"
SHARE_GPU=1 SIZE=small CAP=100 OUT="$OUT" \
  SMOKE_FILES="outside:solutions/broken/gpu_takes_the_memory.py ranks:solutions/broken/gpu_takes_the_memory.py" \
  bash scripts/gpu/judge_outside_smoke.sh
mv "$OUT/judge_smoke.tgz" "$OUT/takes-the-memory.tgz"

echo; echo "== 4. where a pkb eval's start-up goes (exact copy, default size, --share-gpu, --progress)"
printf '"""An exact copy of the all-reduce reference."""\nfrom problems import get as _get\n\nsolution = _get("all-reduce").reference\n' > /tmp/copy.py
for judge in "outside --judge-release block" ranks; do
  echo "-- judge $judge"
  timeout -k 5 120 python3 -m evaluator.cli eval --problem all-reduce --solution /tmp/copy.py --world-size 2 \
    --device cuda --share-gpu --size default --gpu-judge $judge --progress 2>&1 \
    | python3 -c '
import sys, time
t = time.monotonic()
for line in sys.stdin:
    if "recheck of timed call" in line or "\"trial " in line:
        continue
    print(f"{time.monotonic() - t:7.2f} {line.rstrip()}", flush=True)'
done
echo "== $(date -u +%FT%TZ) done"

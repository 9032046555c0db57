#!/usr/bin/env bash
# One batched device call on a multi-GPU host: every stage logs under $OUT and prints a table.
#   scripts/device/gpu_batch.sh STAGE [STAGE ...]
# Stages: probe, refs, kernels, failures, walltime, sandbox, pack. Run from the repository root.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/pkb-out}
mkdir -p "$OUT"
N=$(nvidia-smi -L | wc -l)
PKB="python3 -m evaluator.cli"
echo "== $(date -u +%FT%TZ) $(nvidia-smi -L | head -1) x$N; $(python3 -c 'import torch;print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())')"

for stage in "$@"; do
  case $stage in
    probe)
      $PKB probe --device cuda --out "$OUT/profile-x$N.json" 2>&1 | tee "$OUT/probe-x$N.log" | tail -20
      mkdir -p hardware && cp "$OUT/profile-x$N.json" hardware/ ;;
    refs)
      $PKB check-references --device cuda --size default --world-size "$N" --time --chunk 20 \
        --json "$OUT/refs-x$N.json" 2>&1 | tee "$OUT/refs-x$N.log" ;;
    kernels)
      for pair in all-reduce:solutions/symm_mem/all_reduce_one_shot.py all-gather:solutions/symm_mem/all_gather_push.py \
                  reduce-scatter:solutions/symm_mem/reduce_scatter_pull.py; do
        slug=${pair%%:*}; file=${pair#*:}
        [ -f "$file" ] || continue
        $PKB eval --problem "$slug" --solution "$file" --world-size "$N" --device cuda \
          --json "$OUT/eval-$slug-x$N.json" 2>&1 | tee -a "$OUT/kernels-x$N.log"
      done ;;
    failures)
      $PKB eval --problem all-reduce --solution solutions/broken/gpu_deadlock.py --world-size "$N" --device cuda \
        --step-timeout 20 --json "$OUT/eval-deadlock-x$N.json" 2>&1 | tee -a "$OUT/failures-x$N.log" | head -12
      $PKB eval --problem all-reduce --solution solutions/broken/gpu_compile_error.py --world-size "$N" --device cuda \
        --json "$OUT/eval-compile-error-x$N.json" 2>&1 | tee -a "$OUT/failures-x$N.log" | head -30 ;;
    walltime)
      export PKB_KERNEL_CACHE=/tmp/pkb-kernel-cache-walltime
      rm -rf "$PKB_KERNEL_CACHE"
      for label in cold warm; do  # same solution twice: the second finds its build cached
        start=$(date +%s.%N)
        $PKB eval --problem all-reduce --solution solutions/symm_mem/all_reduce_one_shot.py --world-size "$N" \
          --device cuda --json "$OUT/eval-walltime-$label-x$N.json" > "$OUT/walltime-$label-x$N.log" 2>&1
        end=$(date +%s.%N)
        echo "walltime $label cache: $(python3 -c "print(round($end-$start,1))") s (whole pkb eval process)"
        tail -3 "$OUT/walltime-$label-x$N.log"
      done ;;
    sandbox)
      # GPU candidates confined and unconfined, side by side (scripts/sandbox/compare_gpu.sh).
      bash scripts/sandbox/compare_gpu.sh "$OUT" "$N" ;;
    pack)
      # The device tool brings back at most 8 files: pack every log and report into one.
      (cd "$OUT" && tar czf "results-x$N.tgz" --exclude="results-x$N.tgz" . && find . -type f ! -name "results-x$N.tgz" -delete) ;;
    *) echo "unknown stage $stage" ;;
  esac
done

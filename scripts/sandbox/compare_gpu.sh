#!/usr/bin/env bash
# The sandbox on a GPU host: each GPU candidate through `pkb eval` confined and unconfined, the
# order alternating, then one table. Called by scripts/device/gpu_batch.sh's `sandbox` stage,
# which sets the environment:  compare_gpu.sh OUT_DIR WORLD_SIZE
set -uo pipefail
OUT=$1; N=$2
PKB="python3 -m evaluator.cli"
python3 scripts/sandbox/overhead.py --reps 10 | tee "$OUT/overhead.log"
CANDIDATES="all-reduce:solutions/symm_mem/all_reduce_one_shot.py all-gather:solutions/symm_mem/all_gather_push.py
reduce-scatter:solutions/symm_mem/reduce_scatter_pull.py all-reduce:solutions/triton/all_reduce_triton.py
all-reduce:solutions/cuda_ext/all_reduce_load_inline.py"
i=0
for pair in $CANDIDATES; do
  slug=${pair%%:*}; file=${pair#*:}; name=$(basename "$file" .py)
  # Alternate which mode goes first, so that neither always meets the colder GPU.
  if [ $((i % 2)) -eq 0 ]; then modes="on off"; else modes="off on"; fi
  i=$((i + 1))
  for mode in $modes; do
    flag=""; [ "$mode" = off ] && flag="--no-sandbox"
    start=$(date +%s.%N)
    $PKB eval --problem "$slug" --solution "$file" --world-size "$N" --device cuda $flag \
      --json "$OUT/$name-$mode.json" > "$OUT/$name-$mode.log" 2>&1
    rc=$?; echo "$name $mode rc=$rc $(python3 -c "import time; print(round(time.time() - $start, 1))") s: $(grep -E '^(verdict|failure|reference)' "$OUT/$name-$mode.log" | tr '\n' ' ' | cut -c1-300)"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print("| candidate | sandbox | verdict | candidate ms | reference ms | speedup | wall s |")
print("|---|---|---|---|---|---|---|")
rows = {}
for path in sorted(out.glob("*-o*.json")):
    name, mode = path.stem.rsplit("-", 1)
    r = json.loads(path.read_text())
    t = r.get("timing") or {}
    c, ref = (t.get("candidate") or {}).get("median_ms"), (t.get("reference") or {}).get("median_ms")
    rows.setdefault(name, {})[mode] = (c, ref, t.get("speedup"))
    fail = (r.get("failure") or {}).get("failure_class", "")
    fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"
    print(f"| {name} | {r.get('sandbox')} | {r['verdict']} {fail} | {fmt(c)} | {fmt(ref)} | {fmt(t.get('speedup'))} | {r['wall_time']['total_s']:.1f} |")
print("\n| candidate | candidate ms on/off | reference ms on/off | speedup on/off |\n|---|---|---|---|")
for name, modes in rows.items():
    if "on" in modes and "off" in modes and all(v is not None for v in modes["on"] + modes["off"]):
        on, off = modes["on"], modes["off"]
        print(f"| {name} | {on[0] / off[0]:.3f} | {on[1] / off[1]:.3f} | {on[2] / off[2]:.3f} |")
PY

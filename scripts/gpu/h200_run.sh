#!/usr/bin/env bash
# One device call: probe, compile helper + symmetric-memory solutions, deadlock kill, extension.
# Usage (on a GPU host, repo root): bash scripts/gpu/h200_run.sh [OUTDIR]
# Writes OUTDIR/probe.json, OUTDIR/*.log and prints a summary last.
set -u
OUT_DIR=${1:-${OUT:-/tmp/pkb-gpu-run}}
mkdir -p "$OUT_DIR"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PKB_KERNEL_CACHE=$(mktemp -d /tmp/pkb-kernels.XXXX)
PY=${PYTHON:-python3}
{
  date -u; nvidia-smi -L; nvidia-smi topo -m
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$OUT_DIR/env.log"
start=$(date +%s)
# No pipes into tee: a process that escapes a timeout would hold the pipe open forever.
timeout -k 5 140 $PY -m evaluator.hardware.probe --device cuda --out "$OUT_DIR/probe.json" \
  >"$OUT_DIR/probe.log" 2>&1; probe_rc=$?; cat "$OUT_DIR/probe.log"
echo "probe rc=$probe_rc in $(( $(date +%s) - start ))s"
timeout -k 5 110 $PY scripts/gpu/check_symm_mem.py --json "$OUT_DIR/check.json" \
  >"$OUT_DIR/check.log" 2>&1; check_rc=$?; grep -v "^correct" "$OUT_DIR/check.log" | tail -40
timeout -k 5 100 $PY scripts/gpu/check_deadlock_kill.py >"$OUT_DIR/deadlock.log" 2>&1; dl_rc=$?
tail -5 "$OUT_DIR/deadlock.log"
timeout -k 5 120 $PY scripts/gpu/check_symm_mem.py --parts ext >"$OUT_DIR/ext.log" 2>&1; ext_rc=$?
tail -5 "$OUT_DIR/ext.log"
echo; echo "================ SUMMARY (rc: probe=$probe_rc check=$check_rc deadlock=$dl_rc ext=$ext_rc, $(( $(date +%s) - start ))s)"
if [ -f "$OUT_DIR/probe.json" ]; then
$PY - "$OUT_DIR/probe.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
print("profile", p["id"], "probe_seconds", p.get("probe_seconds"))
print("roofline", json.dumps(p["roofline"]["tflops"]), "link", p["roofline"]["link_gbps"], "hbm", p["roofline"]["hbm_gbps"])
print("nvlink", p["nvlink"]["per_link_gbps"], "x links ->", p["nvlink"]["nominal_gbps_per_direction"], "GB/s/dir")
pp = p["p2p_bandwidth_gbps"]
if pp: print("p2p", pp["unidirectional_gbps"], "concurrent egress", pp["concurrent_all_peer_egress_gbps"])
print("hbm copy", p["hbm_copy_gbps"]["read_plus_written_gbps"], "r+w,", p["hbm_copy_gbps"]["bytes_once_gbps"], "once")
for op, rows in (p["nccl"] or {}).get("results", {}).items():
    print(f"nccl {op:15s}", "  ".join(f"{r['bytes']>>10}K:{r['time_us']}us/{r['busbw_gbps']}" for r in rows))
PYEOF
fi
grep -h "^compile\|^correct\|^time\|^ext\|deadlock check" "$OUT_DIR/check.log" "$OUT_DIR/deadlock.log" "$OUT_DIR/ext.log" 2>/dev/null

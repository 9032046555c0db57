"""Do timed blocks fall into slow and fast regimes on one GPU, without NCCL, and do the clocks say why?

On 2 x H200 the paired timer's blocks of ~60 all-reduce calls ran either near 0.30 ms or near
0.37-0.45 ms per call, on both sides alike, with steady clocks before and after (docs/timing.md).
This script asks the single-GPU part of that question: it times a memory-bound stand-in for the
collective (``out = a + b`` over 64 MiB bf16 inputs, which moves about the bytes a two-rank
all-reduce moves) in alternating blocks of two "sides", as the paired timer does, under three
conditions, while ``nvidia-smi`` samples the SM clock, power and throttle reasons every 20 ms:

- ``bare``: the call alone on fixed buffers;
- ``harness``: as the rank harness does it: each call's input slot refilled from a pristine copy
  before the call and its output cloned into a kept slot after it (both outside the timed span);
- ``harness+idle``: the same with a second process holding an idle CUDA context on the GPU, as the
  idle side's ranks do.

Prints one table row per condition (block medians, the share of slow blocks, the spread of the
per-round ratio, the SM clock seen during fast and slow blocks) and writes every block to
``--out`` as JSON. torch only (the GPU hosts have no other packages of ours).

    python3 scripts/gpu/block_regimes.py --rounds 80 --calls 60 --out $OUT/block_regimes.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import torch

MIB = 1 << 20
SLOW = 1.15  # a block whose median call is this much above the condition's fastest decile is slow
SAMPLE_MS = 20
QUERY = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"


class ClockSampler:
    """nvidia-smi in its own loop mode: one line per sample, stamped on this host's clock when read."""

    def __init__(self, gpu: int) -> None:
        self.samples: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                      "-i", str(gpu), "-lms", str(SAMPLE_MS)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 6:
                continue
            try:
                self.samples.append({"t": time.perf_counter(), "sm": float(parts[1]), "mem": float(parts[2]),
                                     "power": float(parts[3]), "temp": float(parts[4]),
                                     "reasons": int(parts[5], 16)})
            except ValueError:
                continue

    def between(self, start: float, end: float) -> list[dict[str, Any]]:
        # A sample is printed after it is taken: allow one period of lag on both ends.
        lag = SAMPLE_MS / 1000
        return [s for s in self.samples if start <= s["t"] - lag / 2 <= end + lag]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=5)


class Side:
    """One side's buffers: input slots, pristine inputs to refill them from, kept output slots."""

    def __init__(self, elements: int, copies: int, seed: int) -> None:
        g = torch.Generator(device="cuda").manual_seed(seed)
        make = lambda: torch.randn(elements, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
        self.pristine = [(make(), make()) for _ in range(copies)]
        self.slots = [(a.clone(), b.clone()) for a, b in self.pristine]
        self.kept: list[torch.Tensor | None] = [None] * copies
        self.out = torch.empty(elements, device="cuda", dtype=torch.bfloat16)

    def block(self, calls: int, harness: bool) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for i in range(calls):
            slot = i % len(self.slots)
            a, b = self.slots[slot]
            if harness:
                a.copy_(self.pristine[slot][0])
                b.copy_(self.pristine[slot][1])
            starts[i].record()
            out = torch.add(a, b, out=self.out) if not harness else a + b
            ends[i].record()
            if harness:
                self.kept[slot] = out.clone()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def idle_context() -> subprocess.Popen[bytes]:
    code = ("import torch, sys, time; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); "
            "print('up', flush=True); time.sleep(3600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"up"
    return proc


def run_condition(name: str, sides: list[Side], rounds: int, calls: int, sampler: ClockSampler,
                  warmup_s: float) -> list[dict[str, Any]]:
    harness = name.startswith("harness")
    helper = idle_context() if name == "harness+idle" else None
    try:
        deadline = time.perf_counter() + warmup_s  # until the clocks settle, as the timer's warm-up
        while time.perf_counter() < deadline:
            sides[0].block(calls, harness)
            sides[1].block(calls, harness)
        blocks = []
        for r in range(rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)  # the paired timer alternates who goes first
            for side in order:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                times = sides[side].block(calls, harness)
                t1 = time.perf_counter()
                blocks.append({"round": r, "side": side, "median_ms": statistics.median(times),
                               "start": t0, "end": t1})
        return blocks
    finally:
        if helper is not None:
            helper.kill()
            helper.wait()


def summarise(name: str, blocks: list[dict[str, Any]], sampler: ClockSampler) -> dict[str, Any]:
    medians = sorted(b["median_ms"] for b in blocks)
    fast_floor = medians[len(medians) // 10]
    for b in blocks:
        b["slow"] = b["median_ms"] > SLOW * fast_floor
        seen = sampler.between(b["start"], b["end"])
        b["sm_mhz"] = statistics.mean(s["sm"] for s in seen) if seen else None
        b["power_w"] = statistics.mean(s["power"] for s in seen) if seen else None
        b["reasons"] = sorted({s["reasons"] for s in seen})
    by_round: dict[int, dict[int, float]] = {}
    for b in blocks:
        by_round.setdefault(b["round"], {})[b["side"]] = b["median_ms"]
    ratios = [r[0] / r[1] for r in by_round.values() if len(r) == 2]

    def clock(slow: bool) -> float | None:
        values = [b["sm_mhz"] for b in blocks if b["slow"] == slow and b["sm_mhz"] is not None]
        return round(statistics.mean(values)) if values else None

    reasons = sorted({r for b in blocks for r in b["reasons"]})
    return {"condition": name, "blocks": len(blocks),
            "median_ms_p10": round(fast_floor, 4), "median_ms_p50": round(statistics.median(medians), 4),
            "median_ms_p90": round(medians[int(len(medians) * 0.9)], 4),
            "slow_share": round(sum(b["slow"] for b in blocks) / len(blocks), 3),
            "ratio_median": round(statistics.median(ratios), 4),
            "ratio_sd": round(statistics.pstdev(ratios), 4),
            "sm_mhz_fast": clock(False), "sm_mhz_slow": clock(True),
            "reasons_seen": [hex(r) for r in reasons]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--mib", type=int, default=64, help="size of each input")
    parser.add_argument("--copies", type=int, default=4, help="rotating input slots per side")
    parser.add_argument("--repeats", type=int, default=3, help="times each condition runs, shuffled")
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--out", default="block_regimes.json")
    args = parser.parse_args()

    torch.cuda.init()
    gpu = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
    elements = args.mib * MIB // 2
    sides = [Side(elements, args.copies, seed=1), Side(elements, args.copies, seed=2)]
    sampler = ClockSampler(gpu)
    time.sleep(0.5)
    plan = [c for c in ("bare", "harness", "harness+idle") for _ in range(args.repeats)]
    random.Random(0).shuffle(plan)
    rows, raw = [], []
    try:
        for name in plan:
            blocks = run_condition(name, sides, args.rounds, args.calls, sampler, args.warmup_s)
            rows.append(summarise(name, blocks, sampler))
            raw.append({"condition": name, "blocks": blocks})
    finally:
        sampler.stop()

    device = torch.cuda.get_device_name(0)
    print(f"# {device}, torch {torch.__version__}, {args.mib} MiB bf16 a + b, {args.rounds} rounds x 2 sides "
          f"x {args.calls} calls, clocks sampled every {SAMPLE_MS} ms ({len(sampler.samples)} samples)")
    cols = ["condition", "median_ms_p10", "median_ms_p50", "median_ms_p90", "slow_share", "ratio_median",
            "ratio_sd", "sm_mhz_fast", "sm_mhz_slow", "reasons_seen"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in cols) + " |")
    with open(args.out, "w") as f:
        json.dump({"device": device, "torch": torch.__version__, "args": vars(args), "rows": rows,
                   "runs": raw, "clock_samples": sampler.samples}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

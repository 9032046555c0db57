"""Can the judge read a candidate's outputs where the candidate left them, with no copy per call?

Under the block release (docs/judge.md), a judged call on 2 x H200 still costs about 0.09 ms above
a bare call in its run phase: the shim copies every call's outputs into a slot the judge has
mapped, on the clock. The way out named there: the rank allocates from memory the judge has
mapped, the shim keeps each returned tensor alive until the block ends, and the judge reads the
drawn calls' outputs in place once the side stands frozen. This probe measures the pieces on one
GPU, with two processes as the judge and a rank are:

- The judge creates one driver allocation (cuMem, POSIX descriptor; evaluator/shared_memory/
  device.py) holding the block's inputs and an output heap, and the candidate process maps it.
- The candidate routes its allocations into the heap: a torch MemPool over a custom allocator
  whose alloc and free are ctypes callbacks (a bump allocator over the heap; PyTorch's own
  ``torch.cuda.memory._use_uvm`` is built the same way), entered around each block.
- Per block of K calls (``out = x * 2``, a new output each call, kept until the block ends), three
  ways, rotated across blocks: the default allocator (bare), the default allocator plus the
  copy of each output into a slot (today's shim), and the pool (outputs in the heap).
- After each pooled block the judge reads every call's output in place through its own mapping
  and compares it with its own ``x * 2``; the offsets must lie in the heap and not overlap.

Printed per size: ms per call of each way (the candidate's CUDA events, medians over blocks),
what the slot copy costs and what the pool costs against bare, the judge's in-place reads
(outputs right, offsets in the heap and disjoint), and the judge's time to compare a block.

    python3 scripts/gpu/inplace_outputs_probe.py --out $OUT    # one GPU is enough
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import faulthandler
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NO_MULTICAST)

import torch  # noqa: E402

from evaluator.shared_memory.device import DeviceMemory  # noqa: E402

ALIGN = 2 << 20  # the heap hands out 2 MiB-aligned segments, as the caching allocator's large pool asks
WAYS = ("bare", "slot", "pool")
_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


class Layout:
    """The judge's allocation: K input regions, then the heap the candidate's outputs come from."""

    def __init__(self, calls: int, nbytes: int) -> None:
        self.calls, self.nbytes = calls, nbytes
        self.heap = _round_up(calls * nbytes, ALIGN)
        # Room for a block's outputs in 2 MiB segments, twice over (the caching allocator may ask
        # for a segment per output and frees none of them back to us), plus slack.
        self.size = self.heap + 2 * calls * _round_up(nbytes, ALIGN) + 64 * ALIGN

    def region(self, memory: DeviceMemory, k: int) -> torch.Tensor:
        return memory.view(k * self.nbytes, self.nbytes).view(torch.float32)


class Heap:
    """A bump allocator over the judge's allocation, as a torch MemPool (ctypes callbacks)."""

    def __init__(self, base: int, start: int, end: int) -> None:
        self.base, self.next, self.end = base, start, end
        self.segments = 0
        self._alloc = _ALLOC_FN(self.alloc)  # kept alive as long as the pool
        self._free = _FREE_FN(self.free)
        allocator = torch._C._cuda_customAllocator(ctypes.cast(self._alloc, ctypes.c_void_p).value,
                                                   ctypes.cast(self._free, ctypes.c_void_p).value)
        self.pool = torch.cuda.MemPool(allocator=allocator)

    def alloc(self, size: int, device: int, stream: int) -> int:
        offset = _round_up(self.next, ALIGN)
        if offset + size > self.end:
            return 0  # torch raises its out-of-memory error
        self.next = offset + size
        self.segments += 1
        return self.base + offset

    def free(self, ptr: int, size: int, device: int, stream: int) -> None:
        pass  # a bump heap: the block's segments stay cached in the pool and are reused


def candidate_main(fd: int, size: int, calls: int, nbytes: int) -> None:
    """The candidate's process: runs a block of K calls each way the judge names, and for a pooled
    block tells the judge where each output is, keeping them alive until the next block."""
    layout = Layout(calls, nbytes)
    memory = DeviceMemory.attach(0, fd, size)
    base = memory.view(0, 1).data_ptr()
    heap = Heap(base, layout.heap, size)
    inputs = [layout.region(memory, k) for k in range(calls)]
    slots = torch.empty(calls, nbytes // 4, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.mul(inputs[0], 2.0)  # every kernel loaded before the first timed block
    slots[0].copy_(inputs[0])
    torch.cuda.synchronize()
    print("attached", flush=True)
    kept: list[torch.Tensor] = []
    for line in sys.stdin:
        way = line.strip()
        kept = []  # the last block's outputs released only now: the judge has read them
        # A shim would enter the pool once around the block: every allocation of the candidate's
        # thread meanwhile, temporaries included, comes from the heap.
        with torch.cuda.use_mem_pool(heap.pool) if way == "pool" else contextlib.nullcontext():
            start.record()
            for k in range(calls):
                out = torch.mul(inputs[k], 2.0)
                if way == "slot":
                    slots[k].copy_(out)
                kept.append(out)
            end.record()
        end.synchronize()
        offsets = [t.data_ptr() - base for t in kept] if way == "pool" else []
        print(json.dumps({"way": way, "ms_per_call": start.elapsed_time(end) / calls, "offsets": offsets,
                          "segments": heap.segments}), flush=True)


def judge_reads(memory: DeviceMemory, layout: Layout, offsets: list[int]) -> dict:
    """The judge's in-place read of a pooled block: every output where the candidate said, right,
    inside the heap and disjoint from every other."""
    spans = sorted((off, off + layout.nbytes) for off in offsets)
    inside = all(layout.heap <= lo and hi <= memory.size for lo, hi in spans)
    disjoint = all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    wrong = 0
    if inside:
        for k, off in enumerate(offsets):
            read = memory.view(off, layout.nbytes).view(torch.float32)
            wrong += int(not torch.equal(read, layout.region(memory, k) * 2.0))
    end.record()
    end.synchronize()
    return {"inside": inside, "disjoint": disjoint, "wrong": wrong, "read_ms": start.elapsed_time(end)}


def measure(label: str, nbytes: int, calls: int, blocks: int) -> dict:
    layout = Layout(calls, nbytes)
    memory = DeviceMemory.create(0, layout.size)
    generator = torch.Generator(device="cuda").manual_seed(20261129)
    for k in range(calls):
        layout.region(memory, k).copy_(torch.randn(nbytes // 4, device="cuda", generator=generator))
    torch.cuda.synchronize()
    child = subprocess.Popen(
        [sys.executable, __file__, "--candidate", str(memory.fd()), str(memory.size), str(calls), str(nbytes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[memory.fd()],
        env={**os.environ, **NO_MULTICAST})
    memory.close_fd()
    assert child.stdout.readline().strip() == "attached"
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    reads: list[dict] = []
    segments = 0
    for block in range(blocks + 1):
        order = WAYS[block % 3:] + WAYS[:block % 3]  # each way first as often as the others
        for way in order:
            child.stdin.write(way + "\n")
            child.stdin.flush()
            answer = json.loads(child.stdout.readline())
            if block == 0:
                continue  # the warm-up block: the pool's first segments are allocated here
            times[way].append(answer["ms_per_call"])
            if way == "pool":
                reads.append(judge_reads(memory, layout, answer["offsets"]))
                segments = answer["segments"]
    child.stdin.close()
    child.wait(timeout=60)
    memory.close()
    row = {"size": label, "bytes": nbytes, "calls": calls, "blocks": blocks, "heap_segments": segments}
    for way in WAYS:
        row[f"{way}_ms"] = statistics.median(times[way])
    row["reads_right"] = f"{sum(r['wrong'] == 0 and r['inside'] and r['disjoint'] for r in reads)}/{len(reads)}"
    row["wrong_outputs"] = sum(r["wrong"] for r in reads)
    row["judge_read_ms_per_block"] = statistics.median(r["read_ms"] for r in reads)
    return row


SIZES = {"4K": 4 << 10, "64K": 64 << 10, "256K": 256 << 10, "4M": 4 << 20, "64M": 64 << 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="4K,64K,256K,4M,64M")
    parser.add_argument("--calls", type=int, default=28, help="calls a block (the block release's 28 at 64 MiB)")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=150, help="seconds in all before it counts as a hang")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    faulthandler.dump_traceback_later(args.timeout, exit=True)  # a hang says where, and ends
    if args.candidate:
        candidate_main(*args.candidate)
        return
    print(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} inplace_outputs_probe on "
          f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {args.calls} calls a block, "
          f"{args.blocks} blocks, ms per call (candidate's events, medians)")
    print(f"{'size':>5} {'bare':>8} {'slot':>8} {'pool':>8} {'slot-bare':>10} {'pool-bare':>10} "
          f"{'reads right':>12} {'judge read/block':>17} {'segments':>9}", flush=True)
    rows = []
    for label in args.sizes.split(","):
        try:
            row = measure(label, SIZES[label], args.calls, args.blocks)
        except Exception as exc:  # the next size may still answer; the error is the row
            rows.append({"size": label, "error": repr(exc)})
            print(f"{label:>5} FAILED {exc!r}", flush=True)
            continue
        rows.append(row)
        print(f"{label:>5} {row['bare_ms']:8.4f} {row['slot_ms']:8.4f} {row['pool_ms']:8.4f} "
              f"{row['slot_ms'] - row['bare_ms']:10.4f} {row['pool_ms'] - row['bare_ms']:10.4f} "
              f"{row['reads_right']:>12} {row['judge_read_ms_per_block']:14.3f} ms {row['heap_segments']:9d}",
              flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "inplace_outputs_probe.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
             "args": vars(args) | {"out": str(args.out)}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

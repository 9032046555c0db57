"""What the caching allocator asks of the rank's output heap (evaluator/shim/heap.py), on one GPU.

One process, no sandbox: a heap of the size the judge gives a rank at the default all-reduce
size, the pool over it, and calls as the judge's blocks run them: each call's output (64 MiB,
``x.clone()`` then an all-reduce over a one-rank gloo group, as the reference under
--share-gpu) allocated in the pool and kept until its block ends; five one-call trials, then
blocks of 28 calls. Prints, per phase, the heap's counts (segments from the heap, segments
from outside, segments given back), how many outputs lay in the heap, and the
allocator's calls; an exception is printed with the trace up to it.

    python3 scripts/gpu/heap_probe.py [--blocks 4] [--calls 28] [--mib 64] [--backend gloo|nccl|none] [--nudge]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from evaluator.judge.buffers import heap_bytes  # noqa: E402
from evaluator.shared_memory.device import DeviceMemory  # noqa: E402
from evaluator.shim.heap import OutputHeap  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--calls", type=int, default=28)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--backend", choices=("gloo", "nccl", "none"), default="gloo",
                        help="the one-rank group each call's all-reduce runs over (none: no collective)")
    parser.add_argument("--nudge", action="store_true",
                        help="after each block, OutputHeap.recycle() (one allocation outside the pool), as the shim does")
    args = parser.parse_args()
    nbytes = args.mib << 20
    torch.cuda.set_device(0)
    if args.backend != "none":
        store = dist.FileStore(tempfile.mktemp(), 1)
        dist.init_process_group(args.backend, store=store, rank=0, world_size=1,
                                **({"device_id": torch.device("cuda:0")} if args.backend == "nccl" else {}))
    size = heap_bytes(args.calls, 2 * nbytes)
    memory = DeviceMemory.create(0, size)
    heap = OutputHeap(memory)
    heap.trace = []
    x = torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    print(f"heap {memory.size >> 20} MiB, outputs {args.mib} MiB, backend {args.backend}, nudge {args.nudge}, "
          f"torch {torch.__version__}", flush=True)

    def call() -> torch.Tensor:
        with heap.allocating():
            out = x.clone()
            if args.backend != "none":
                dist.all_reduce(out)
        return out

    def phase(name: str, blocks: int, calls: int) -> None:
        start = len(heap.trace)
        inside = 0
        try:
            for _ in range(blocks):
                kept = [call() for _ in range(calls)]
                torch.cuda.synchronize()
                inside += sum(heap.offset_of(t) is not None for t in kept)
                del kept
                if args.nudge:
                    heap.recycle()
        except Exception:  # noqa: BLE001 - printed: what the probe is for
            traceback.print_exc()
        print(f"{name}: {blocks} x {calls} calls, {inside} outputs in the heap, counts {heap.counts}, "
              f"calls {heap.trace[start:start + 40]}{' ...' if len(heap.trace) - start > 40 else ''}", flush=True)

    phase("trials", 5, 1)
    phase("blocks", args.blocks, args.calls)
    phase("blocks again", args.blocks, args.calls)
    sys.stdout.flush()
    os._exit(0)  # as a rank ends: the pool's callbacks must not outlive the heap at teardown


if __name__ == "__main__":
    main()

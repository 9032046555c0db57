"""What a candidate gains by answering K calls with one batched collective, per message size.

The judge outside the ranks releases a call's inputs only once the call before has returned
(evaluator/judge/driver.py): no block can be answered by one batched computation, at the price of
a round trip per call (docs/judge.md: 1.5 ms a call against 0.28 ms bare on 2 x H200). A judge
that releases a whole block at once (go, K calls, done) would put that round trip on the block;
what it gives back to a candidate is batching. This measures how much that is worth, so that the
choice between the two can be made per size from numbers:

- ``alone``: K all-reduces of S bytes, each waited for before the next starts (a round trip's
  shape: what a per-call release imposes, without its messages);
- ``queued``: the same K calls back to back (an honest candidate under a block release: the bare
  loop);
- ``coalesced``: the K calls as one NCCL group (``dist._coalescing_manager``), the cheapest way to
  batch them without moving any data;
- ``fused``: one all-reduce of K x S bytes on inputs gathered into one buffer first (the copy
  counted): batching as a candidate would write it.

Each is the median over blocks of ms per call; ``gain`` is queued / the best batched one.

    python3 scripts/bench/batching_gain.py --device cuda --sizes 4K,64K,256K,4M,64M --batch 4,16
    .venv/bin/python scripts/bench/batching_gain.py --device cpu --sizes 4K,64K --batch 4  # plumbing

torch and the standard library only (GPU hosts have no Django). Prints its provenance and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).parent))
import bench_ranks  # noqa: E402
import provenance  # noqa: E402

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def _rank(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    cuda = args.device == "cuda"
    device = bench_ranks.join(rank, args.device, args.world_size, port)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    dtype = torch.bfloat16 if cuda else torch.float32
    rows = []
    for size in args.sizes:
        for k in args.batch:
            numel = max(1, size // torch.empty((), dtype=dtype).element_size())
            inputs = [torch.randn(numel, device=device, dtype=dtype) for _ in range(k)]
            joined = torch.empty(k * numel, device=device, dtype=dtype)

            def alone() -> None:
                for x in inputs:
                    dist.all_reduce(x)
                    sync()

            def queued() -> None:
                for x in inputs:
                    dist.all_reduce(x)

            def coalesced() -> None:
                with dist._coalescing_manager(async_ops=False):
                    for x in inputs:
                        dist.all_reduce(x)

            def fused() -> None:
                torch.cat(inputs, out=joined)
                dist.all_reduce(joined)
                for i, x in enumerate(inputs):
                    x.copy_(joined[i * numel:(i + 1) * numel])

            row = {"size": size, "k": k}
            for name, fn in (("alone", alone), ("queued", queued), ("coalesced", coalesced), ("fused", fused)):
                for _ in range(args.warmup):
                    fn()
                per_call = []
                for _ in range(args.blocks):
                    dist.barrier()
                    sync()
                    started = time.perf_counter()
                    fn()
                    sync()
                    per_call.append((time.perf_counter() - started) * 1e3 / k)
                row[name] = statistics.median(per_call)
            rows.append(row)
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--sizes", default="4K,64K,256K,4M,64M", help="bytes per rank per call (K, M, G suffixes)")
    parser.add_argument("--batch", default="4,16", help="calls batched together (K), comma-separated")
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.batch = [int(k) for k in args.batch.split(",")]
    for name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        os.environ[name] = "0" if name == "NCCL_NVLS_ENABLE" else "1"  # no NVLink multicast, ever
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "rows")
        mp.spawn(_rank, args=(args, bench_ranks.free_port(), out), nprocs=args.world_size, join=True)
        rows = json.loads(Path(out).read_text())
    print("\n".join(provenance.lines()))
    print(f"\nall-reduce, world size {args.world_size}, {args.device}; medians of {args.blocks} blocks, ms per call\n")
    print("| bytes per call | K | alone (wait each) | queued | coalesced | fused (copies in) | gain: queued / best batched |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        best = min(r["coalesced"], r["fused"])
        print(f"| {r['size']} | {r['k']} | {r['alone']:.4f} | {r['queued']:.4f} | {r['coalesced']:.4f} | "
              f"{r['fused']:.4f} | {r['queued'] / best:.2f} |")


if __name__ == "__main__":
    main()

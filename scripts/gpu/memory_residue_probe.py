"""Can a process read GPU memory that an earlier process left behind?

docs/sandbox.md lists it as an assumption about the driver: a candidate's side may run on a GPU
just after the reference's side, or after another submission's evaluation, whose inputs and
outputs were in GPU memory. One process fills 8 GiB with a marker (through PyTorch's caching
allocator, and through the driver's virtual memory API as the judge's buffers are made) and
exits; a second process allocates the same amounts without initialising them and counts the
marker's words. Printed: the words found per allocation path.

    python3 scripts/gpu/memory_residue_probe.py        # a GPU host; one GPU is enough
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MARKER = 0x5EC2E7_D00D_F00D
GIB = 1 << 30
SIZE = 8 * GIB


def fill() -> None:
    import torch

    from evaluator.shared_memory.device import DeviceMemory
    cached = torch.full((SIZE // 8,), MARKER, dtype=torch.int64, device="cuda")
    driver = DeviceMemory.create(0, SIZE)
    driver.view(0, SIZE).view(torch.int64).fill_(MARKER)
    torch.cuda.synchronize()
    print("filled", int((cached == MARKER).sum()) + int((driver.view(0, SIZE).view(torch.int64) == MARKER).sum()),
          flush=True)


def read() -> None:
    import torch

    from evaluator.shared_memory.device import DeviceMemory
    cached = torch.empty((SIZE // 8,), dtype=torch.int64, device="cuda")
    driver = DeviceMemory.create(0, SIZE)
    found_cached = int((cached == MARKER).sum())
    found_driver = int((driver.view(0, SIZE).view(torch.int64) == MARKER).sum())
    nonzero = int((cached != 0).sum()) + int((driver.view(0, SIZE).view(torch.int64) != 0).sum())
    print(f"found cached={found_cached} driver={found_driver} nonzero_words={nonzero} of {2 * SIZE // 8}", flush=True)


def main() -> None:
    if sys.argv[1:] == ["fill"]:
        return fill()
    if sys.argv[1:] == ["read"]:
        return read()
    print(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} memory_residue_probe, 2 x {SIZE // GIB} GiB")
    for role in ("fill", "read"):
        done = subprocess.run([sys.executable, __file__, role], capture_output=True, text=True, timeout=120)
        print(f"{role}: {done.stdout.strip()} {done.stderr.strip()[-500:]}", flush=True)


if __name__ == "__main__":
    main()

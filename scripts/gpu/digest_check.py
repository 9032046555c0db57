"""Does evaluator/digest.py give the same digest on the GPU as on the CPU, and what does it cost?

    python3 scripts/gpu/digest_check.py

Prints one line per (dtype, size): whether the CUDA and CPU digests agree, and the median time of
one digest on the GPU (the harness takes one per timed call, outside the timed region).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from evaluator.digest import outputs_digest  # noqa: E402


def main() -> None:
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'dtype':>10} {'bytes':>12} {'agree':>6} {'gpu ms':>8}")
    failures = 0
    for dtype in (torch.bfloat16, torch.float32, torch.float16, torch.int64, torch.uint8):
        for numel in (1, 7, 4097, 1 << 20, 32 << 20):
            if dtype == torch.int64 or dtype == torch.uint8:
                cpu = torch.randint(-100, 100, (numel,), dtype=torch.int64).to(dtype)
            else:
                cpu = torch.randn(numel, dtype=torch.float32).to(dtype)
            gpu = cpu.cuda()
            agree = outputs_digest([gpu]) == outputs_digest([cpu])
            failures += not agree
            times = []
            for _ in range(20):
                torch.cuda.synchronize()
                start = time.perf_counter()
                outputs_digest([gpu])
                times.append((time.perf_counter() - start) * 1e3)
            print(f"{str(dtype).removeprefix('torch.'):>10} {cpu.numel() * cpu.element_size():>12} {str(agree):>6} "
                  f"{statistics.median(times[5:]):8.3f}")
    print("all agree" if not failures else f"{failures} DISAGREE")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

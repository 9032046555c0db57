"""Read GPU clocks idle and under load, and the cores local to each GPU: the readings that
evaluator/hardware/clocks.py and affinity.py take around a timed phase.

    python3 scripts/gpu/clock_probe.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from evaluator.hardware import clocks
from evaluator.hardware.affinity import rank_cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to load the GPU")
    args = parser.parse_args()
    gpus = clocks.visible_gpus(1)
    idle = clocks.snapshot(gpus)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    started = time.time()
    while time.time() - started < args.seconds:
        x @ x
    torch.cuda.synchronize()
    busy = clocks.snapshot(gpus)
    print(json.dumps(clocks.compare(idle, busy), indent=1))
    print("pinning", rank_cpus(torch.cuda.device_count()))


if __name__ == "__main__":
    main()

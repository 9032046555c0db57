"""What one sweep of a side's threads costs the freeze (evaluator/sandbox/watch.py), with CUDA ranks.

Starts two processes that hold a CUDA context and sleep (as frozen GPU ranks do), stops them, and
times reading every one of their threads' state: the buffered ``open`` the freeze used until
2026-11-29 against ``watch.task_state`` (one ``os.open`` and ``os.read``), alternating, medians of
200 sweeps each.

    python3 scripts/gpu/stat_sweep_probe.py
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})

from evaluator.sandbox.watch import task_state  # noqa: E402


def buffered_state(stat_path: str) -> str:
    """The freeze's reading before: a buffered file object, read whole."""
    try:
        with open(stat_path, "rb") as handle:
            data = handle.read()
    except OSError:
        return "X"
    return data[data.rfind(b")") + 2:data.rfind(b")") + 3].decode() or "X"


def main() -> None:
    code = "import torch, time; torch.zeros(1, device='cuda'); print('up', flush=True); time.sleep(120)"
    ranks = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(2)]
    try:
        for rank in ranks:
            assert rank.stdout.readline() == b"up\n"
            os.kill(rank.pid, signal.SIGSTOP)
        paths = [f"/proc/{r.pid}/task/{tid}/stat" for r in ranks for tid in os.listdir(f"/proc/{r.pid}/task")]
        times: dict[str, list[float]] = {"buffered open": [], "os.open + os.read": []}
        for _ in range(200):
            for name, read in (("buffered open", buffered_state), ("os.open + os.read", task_state)):
                start = time.perf_counter()
                states = [read(p) for p in paths]
                times[name].append((time.perf_counter() - start) * 1e3)
                assert set(states) <= {"T", "t"}, states
        print(f"{len(paths)} threads of 2 stopped CUDA processes; ms per sweep, median of 200:")
        for name, values in times.items():
            print(f"  {name:20s} {statistics.median(values):.3f}")
    finally:
        for rank in ranks:
            rank.kill()


if __name__ == "__main__":
    main()

"""Returns wrong outputs (42 everywhere) and leaves a detached daemon that waits for the reference
side's output files (next to its own work folder, where the evaluator keeps them) and overwrites them
with the same wrong values, so that the comparison agrees. Without a PID namespace that ends with
the side and a private filesystem, a wrong solution would pass."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
DAEMON = r'''
import glob, os, signal, sys, time
import torch
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
start = sys.argv[1]
# The reference side's outputs: where its ranks write them, and where the evaluator collects them.
patterns = [os.path.join(start, *[".."] * up, *where, "*.pt") for up in (1, 2, 3)
            for where in (("reference",), ("reference*", "work", "out"), ("reference*", "out"))]
done = {}
deadline = time.time() + 300
while time.time() < deadline:
    for pattern in patterns:
        for path in glob.glob(pattern):
            try:
                stamp = os.stat(path).st_mtime_ns
                if done.get(path) == stamp:
                    continue
                outputs = torch.load(path, weights_only=True)
                torch.save([t * 0 + 42 for t in outputs], path)
                done[path] = os.stat(path).st_mtime_ns
            except Exception:
                pass
    time.sleep(0.01)
'''
subprocess.Popen([sys.executable, "-c", DAEMON, os.getcwd(), MARKER], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 0 + 42

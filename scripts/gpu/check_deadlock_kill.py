"""A GPU deadlock (solutions/broken/gpu_deadlock.py) hangs until its process group is killed.

Starts the ranks in their own session, waits until each has entered the candidate, checks
they are still hung after --hold seconds, kills the whole group with SIGKILL, and checks that
they die and that a fresh NCCL all-reduce then runs on the same GPUs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from contract.gpu import NO_MULTICAST_ENV as NO_MULTICAST  # noqa: E402

RANKS = r"""
import os, sys, importlib.util, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, sys.argv[1])
def rank_main(rank, world, port, marks, mode):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=torch.device("cuda", rank))
    x = torch.randn(1 << 20, device="cuda")
    if mode == "deadlock":
        path = os.path.join(sys.argv[1], "solutions/broken/gpu_deadlock.py")
        spec = importlib.util.spec_from_file_location("gpu_deadlock", path)
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        open(os.path.join(marks, f"calling{rank}"), "w").close()
        out = mod.solution(x, group=dist.group.WORLD)  # may already block (lazy module load)
        open(os.path.join(marks, f"returned{rank}"), "w").close()
        torch.cuda.synchronize()  # never returns
    else:
        dist.all_reduce(x); torch.cuda.synchronize()
        open(os.path.join(marks, f"ok{rank}"), "w").close()
        dist.destroy_process_group()
if __name__ == "__main__":
    world, port, marks, mode = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    mp.start_processes(rank_main, args=(world, port, marks, mode), nprocs=world,
                       start_method="spawn")
"""


def start(world: int, marks: str, mode: str) -> subprocess.Popen:
    sys.path.insert(0, str(ROOT))
    from evaluator.hardware.collectives import free_port

    env = {**os.environ, **NO_MULTICAST}
    script = Path(marks) / "ranks.py"  # a file, not -c: spawned ranks re-import __main__
    script.write_text(RANKS)
    return subprocess.Popen([sys.executable, str(script), str(ROOT), str(world),
                             str(free_port()), marks, mode], env=env, start_new_session=True)


def _count(marks: str, prefix: str) -> int:
    return len([m for m in os.listdir(marks) if m.startswith(prefix)])


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--hold", type=float, default=10.0)
    args = parser.parse_args()
    marks = tempfile.mkdtemp(prefix="pkb-deadlock-")
    proc = start(args.world, marks, "deadlock")
    # The ranks run in their own session: kill them on any exit of this checker too.
    signal.signal(signal.SIGTERM, lambda *_: (_kill(proc), sys.exit(1)))
    try:
        deadline = time.monotonic() + 30
        while _count(marks, "calling") < args.world and time.monotonic() < deadline:
            if proc.poll() is not None:
                print(f"deadlock check: ranks exited early rc={proc.returncode}: FAIL")
                return 1
            time.sleep(0.5)
        time.sleep(args.hold)
        alive = proc.poll() is None
        returned = _count(marks, "returned")
    finally:
        start_kill = time.monotonic()
        _kill(proc)
        proc.wait(timeout=60)
    dead_after = time.monotonic() - start_kill
    leftovers = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True)
    time.sleep(2)
    again = start(args.world, marks, "plain")
    try:
        again.wait(timeout=60)
    finally:
        _kill(again)
    recovered = _count(marks, "ok") == args.world
    ok = alive and recovered
    print(f"deadlock check: ranks calling={_count(marks, 'calling')} returned={returned}; "
          f"still hung after {args.hold:.0f}s={alive}; killpg -> exited in {dead_after:.2f}s; "
          f"leftovers={leftovers.stdout.split() or 'none'}; fresh NCCL all_reduce afterwards "
          f"ok={recovered}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

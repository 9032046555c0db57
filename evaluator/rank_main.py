"""Entry point of one rank process: ``main()`` with arguments
``JOB RANK STATUS_FD STACK_FD [COMMAND_FD [INPUT_FD OUTPUT_FD]]`` (the last two: the judge's
shared buffers, evaluator/shim/buffers.py).

One process per rank serves every task and trial of a job (never a launch per trial). It reports
progress on the status channel; the parent enforces deadlines and kills it when it stalls.
"""

from __future__ import annotations

import datetime
import faulthandler
import json
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

from .job import RankJob



def _software(device: str) -> dict[str, str]:
    import platform

    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform()}
    if device == "cuda":
        info["cuda"] = str(torch.version.cuda)
        info["gpu"] = torch.cuda.get_device_name()
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a version string is best effort
            pass
    return info


class _StartupClock:
    """Where a rank's start-up goes (CUDA context, process groups, the solution's import or the
    exact run's warm-up), said in its ready step: the worker logs it, and the seconds before the first trial are most of a short
    evaluation's time on a GPU host. Informational only: nothing judges by it."""

    def __init__(self) -> None:
        import time

        self._now = time.monotonic
        self._last = self._now()
        self.phases: list[str] = []

    def mark(self, phase: str) -> None:
        now = self._now()
        self.phases.append(f"{phase} {now - self._last:.1f} s")
        self._last = now

    def summary(self) -> str:
        return "startup: " + ", ".join(self.phases)


def _init(job: RankJob, rank: int, clock: _StartupClock):  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist

    world_size = job["world_size"]
    if job["device"] == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
        torch.empty(1, device=device)  # the CUDA context, measured on its own
        clock.mark("cuda")
    else:
        torch.set_num_threads(job.get("threads", 1))
        device = torch.device("cpu")
    store = dist.FileStore(job["store_path"], world_size)
    kwargs: dict[str, Any] = {}
    if job["backend"] == "nccl":
        kwargs["device_id"] = device  # eager NCCL init: communicators exist before the first trial
    dist.init_process_group(job["backend"], store=store, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=job["collective_timeout_s"]), **kwargs)
    clock.mark("process group")
    control_group = dist.new_group(list(range(world_size)))
    clock.mark("control group")
    return device, control_group


def run(job: RankJob, rank: int, channel, commands=None, salt: str = "", buffers=None,  # type: ignore[no-untyped-def]
        seed_secret: str = "") -> None:
    import problems

    from . import builds
    from .candidate import CandidateError, classify_exception, load_solution
    from .channel import DONE, ERROR, READY
    from .rank_runner import RankContext, TaskRunner

    clock = _StartupClock()
    device, control_group = _init(job, rank, clock)
    ctx = RankContext(rank=rank, world_size=job["world_size"], device=device,
                      control_group=control_group, channel=channel, out_dir=Path(job["out_dir"]),
                      fingerprints_only=job.get("outputs") == "fingerprints", commands=commands, salt=salt,
                      buffers=buffers, seed_secret=seed_secret)
    task = {"task": None}
    try:
        solution = None
        if job["side"] == "candidate":
            builds.announce_to(channel.send)
            builds.watch_torch_extensions()
            first = problems.get(job["tasks"][0]["problem"])
            solution = load_solution(Path(job["solution_path"]), first)
            clock.mark("solution")
        elif job.get("outputs") != "fingerprints":
            from .exact import warm_up

            warm_up()  # inside the start-up limit, not the first trial's
            clock.mark("exact warm-up")
        channel.send(READY, step=clock.summary(), compile_s=_compile_seconds(), software=_software(job["device"]))
        for task in job["tasks"]:
            problem = problems.get(task["problem"])
            fn = solution if solution is not None else problem.reference
            TaskRunner(ctx, problem, fn, task, job["side"]).run()
        import torch.distributed as dist

        dist.barrier(group=control_group)
        channel.send(DONE, compile_s=_compile_seconds())
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, then the rank exits
        during = "running the reference" if job["side"] == "reference" else "running the solution"
        error = exc if isinstance(exc, CandidateError) else classify_exception(exc, during=during)
        channel.send(ERROR, task=task.get("task"), failure_class=error.failure_class.value,
                     message=error.message, traceback=error.traceback,
                     compiler_output=error.compiler_output, compile_s=_compile_seconds())
        sys.stdout.flush()
        sys.stderr.flush()
        _end_descendants()
        os._exit(1)


def _pin(job: RankJob, rank: int) -> None:
    """Run on the CPU cores the parent chose (those local to this rank's GPU), if it chose."""
    cpus = (job.get("affinity") or {}).get(str(rank))
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass  # the cores are not ours to take (a cgroup's cpuset): run where we may


def _reap_orphans() -> None:
    """Orphans of this rank's children become ours, not the host's init: unconfined (no PID
    namespace), the judge then still finds and freezes them below us (sandbox/plain.py)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _end_descendants() -> None:
    """Kill what the candidate started before this rank exits: once it is gone, its orphans belong
    to the host's init. Confined, the side's init kills them anyway; unconfined, this is the last
    moment they are known (candidate code could skip it, which --no-sandbox accepts)."""
    from .procs import descendants

    for pid in descendants([os.getpid()]):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _compile_seconds() -> float:
    """Seconds this rank spent in builds (evaluator/builds.py), by its own count."""
    from .builds import total_seconds

    return total_seconds()


def main() -> None:
    from .channel import RankChannel

    # The status token, this rank's input salt and the side's seed secret are the three lines on
    # stdin, read before any candidate code exists.
    token = sys.stdin.buffer.readline().decode().strip()
    salt = sys.stdin.buffer.readline().decode().strip()
    seed_secret = sys.stdin.buffer.readline().decode().strip()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    job_path, rank, fd, stack_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    job = json.loads(Path(job_path).read_text())
    _pin(job, rank)
    _reap_orphans()
    # Before a stalled rank is killed it gets SIGUSR1: every thread's Python stack goes down this pipe.
    faulthandler.register(signal.SIGUSR1, file=os.fdopen(stack_fd, "w"), all_threads=True)
    warnings.filterwarnings("ignore", category=FutureWarning)
    channel = RankChannel(fd, rank, token)
    commands = buffers = None
    if len(sys.argv) > 5:
        from .rank_timing import CommandReader

        commands = CommandReader(int(sys.argv[5]))
    if len(sys.argv) > 7:
        from .shim.buffers import SharedBuffers

        buffers = SharedBuffers(sys.argv[6], sys.argv[7], sys.argv[8] if len(sys.argv) > 8 else None)
    run(job, rank, channel, commands, salt, buffers, seed_secret)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter and process-group teardown: destroy_process_group can itself hang, and the
    # parent already has everything it needs.
    _end_descendants()
    os._exit(0)


if __name__ == "__main__":
    main()

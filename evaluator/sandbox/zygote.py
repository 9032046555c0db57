"""One import of torch per side, not one per rank: a process that imports the ranks' heavy modules
once, then forks each rank from itself.

Started by the side's init (``SideInit.start_ranks``) as ``python -I -c`` with the ranks'
environment and every rank's descriptors, and still root of the side's user namespace: each
forked rank drops its privileges itself (``init.drop_privileges``, the same steps the init's
``preexec_fn`` takes before an exec), keeps only its own descriptors, then runs the ``-c`` program
of its launch as a fresh interpreter would, with the same ``sys.argv``. Importing torch is about
1.3 s of CPU per process on our 2-core machines and most of a CPU evaluation's cost: with two
sides of two ranks this halves it, at world size 8 it is one import instead of eight.

What a rank inherits from this process, besides the imported modules: the launch spec (argv, the
environment, descriptor numbers, limits), which every rank of the side already knows. No secret
enters it: a rank's token and salt arrive on that rank's own stdin pipe, read after the fork.

It forks only while it is the only thread (a fork copies just the calling thread; a lock another
thread held would stay held in the child forever): if an import started a thread, it says so and
the init starts the ranks by exec as before. Only CPU sides use it; CUDA must not be initialised
before a fork, and GPU ranks have not been measured this way.

Protocol: one JSON line on stdin (``{"ranks": [...], "limits", "device", "rank_uid", "work", "nice",
"keep"}``); on stdout one JSON line per rank, ``{"rank", "pid"}`` once that rank has dropped its
privileges (or ``{"rank", "error"}``), then ``{"done": true}``. Confined, it then exits, and its
ranks, orphaned, are the init's to reap (it is PID 1 of their namespace). Unconfined (``keep``:
the unconfined box, which has no init), it stays their parent, reaps them and reports each exit
as ``{"rank", "code"}`` (``code`` < 0: killed by that signal), then exits; each rank there starts
a session of its own instead of dropping privileges, as ``Popen(start_new_session=True)`` did.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import threading
import traceback
from typing import Any, Optional

from .policy import REPO_ROOT

# The modules every rank imports before its first trial (rank_main, rank_runner and what they use).
PRELOAD = ("torch", "torch.distributed", "evaluator.rank_main", "evaluator.rank_runner",
           "evaluator.rank_timing", "evaluator.channel", "evaluator.shim.buffers", "evaluator.shim.calls")
START_ATTEMPTS = 3  # as init.START_ATTEMPTS: a set-up that failed before any rank code ran is retried
ENTRY = f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); from evaluator.sandbox.zygote import main; main()"


class Zygote:
    """The starting side's handle on a zygote: started with every rank's launch (dicts of
    ``RankLaunch``'s fields) and descriptors; ``pids`` once every rank runs, ``declined`` when it
    started none (the caller then starts them by exec); with ``keep``, ``exits`` as they come."""

    def __init__(self, launches: list[dict[str, Any]], *, work: str, limits: dict[str, int], device: str,
                 rank_uid: int, keep: bool, nice: int = 0) -> None:
        fds = sorted({fd for launch in launches for fd in (*launch["pass_fds"], launch["log_fd"], launch["stdin_fd"])})
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", ENTRY], env=launches[0]["env"], pass_fds=tuple(fds),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=work)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"ranks": launches, "limits": limits, "device": device,
                                             "rank_uid": rank_uid, "work": work, "keep": keep,
                                             "nice": nice}).encode() + b"\n")
        self.process.stdin.close()
        self.out = self.process.stdout.fileno()
        self.buffer = b""
        self.pids: dict[int, int] = {}  # rank -> pid
        self.declined = ""
        self.exits: dict[int, int] = {}  # rank -> exit code (keep only)
        self.ended = False

    def wait_started(self) -> bool:
        """Until every rank runs (True) or the zygote declined (False: nothing was started).
        Raises RuntimeError where a rank could not be set up."""
        while True:
            event = self._next(None)
            if event is None:
                raise RuntimeError(f"the zygote ended before it started every rank (status {self.process.wait()})")
            if "fallback" in event:
                self.declined = event["fallback"]
                self.process.wait()
                return False
            if "error" in event:
                raise RuntimeError(f"rank {event['rank']}: {event['error']}")
            if event.get("done"):
                return True
            self.pids[int(event["rank"])] = int(event["pid"])

    def poll_exits(self, timeout: Optional[float] = 0.0) -> dict[int, int]:
        """Ranks' exits reported so far (``keep``); waits up to ``timeout`` for news."""
        while not self.ended:
            event = self._next(timeout)
            if event is None:
                break
            self.exits[int(event["rank"])] = int(event["code"])
            timeout = 0.0
        return self.exits

    def close(self) -> None:
        """Ends it (if it has not ended) and stops reading: exits reported so far stay known."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.ended = True
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _next(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        """The next line, or None: none within ``timeout`` (None: wait), or the zygote ended."""
        while b"\n" not in self.buffer:
            if self.ended:
                return None
            readable, _, _ = select.select([self.out], [], [], timeout)
            if not readable:
                return None
            chunk = os.read(self.out, 65536)
            if not chunk:
                self.ended = True
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def eligible(launches: list[dict[str, Any]]) -> bool:
    """Launches the zygote can fork: ``python -I -c PROGRAM ...`` of this interpreter."""
    return bool(launches) and all(launch["argv"][:3] == [sys.executable, "-I", "-c"] for launch in launches)


def main() -> None:
    from .init import read_line  # one line, no read-ahead: the rest of stdin is never ours

    spec = json.loads(read_line(0))
    try:
        import importlib

        for name in PRELOAD:
            importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - the init falls back to exec
        _send(fallback=f"the preload failed: {type(exc).__name__}: {exc}")
        os._exit(0)
    if threading.active_count() > 1 or len(os.listdir("/proc/self/task")) > 1:
        _send(fallback=f"{len(os.listdir('/proc/self/task'))} threads after the preload: a fork could deadlock")
        os._exit(0)
    sys.stdout.flush()
    sys.stderr.flush()
    ranks = {}
    for launch in spec["ranks"]:
        started = _fork_rank(launch, spec)
        _send(**started)
        if "pid" in started:
            ranks[started["pid"]] = started["rank"]
    _send(done=True)
    while spec.get("keep") and ranks:
        pid, status = os.waitpid(-1, 0)
        if pid in ranks:
            _send(rank=ranks.pop(pid), code=os.waitstatus_to_exitcode(status))
    os._exit(0)


def _fork_rank(launch: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    error = ""
    for _ in range(START_ATTEMPTS):
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            _become_rank(launch, spec, ready_w)  # never returns
        os.close(ready_w)
        answer = os.read(ready_r, 1)
        os.close(ready_r)
        if answer == b"k":
            return {"rank": launch["rank"], "pid": pid}
        os.waitpid(pid, 0)  # it wrote why to the rank's log and exited before any rank code ran
        error = "a rank's set-up after fork failed (its log says why)"
    return {"rank": launch["rank"], "error": error}


def _become_rank(launch: dict[str, Any], spec: dict[str, Any], ready_w: int) -> None:
    """In the forked child: what subprocess.Popen(argv, pass_fds, stdin, stdout, stderr, cwd,
    preexec_fn=drop_privileges) did before the exec, then the ``-c`` program of argv."""
    try:
        from .init import drop_privileges

        os.dup2(launch["stdin_fd"], 0)
        os.dup2(launch["log_fd"], 1)
        os.dup2(launch["log_fd"], 2)
        _close_all_but({*launch["pass_fds"], ready_w})  # as Popen's close_fds: other ranks' too
        for fd in launch["pass_fds"]:
            os.set_inheritable(fd, True)  # as Popen's pass_fds leaves them
        os.chdir(spec["work"])
        if spec.get("keep"):
            os.setsid()  # unconfined: a session of its own, so that a kill takes what it started
        else:
            drop_privileges(spec["limits"], spec["device"], spec["rank_uid"], spec.get("nice", 0))
        # Fresh standard streams on the new descriptors: nothing buffered in ours may leak into
        # the rank's, nor the rank's read-ahead of stdin (its token) stay behind in ours.
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)))
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                      errors="backslashreplace", line_buffering=True)
        _reseed()
        argv = launch["argv"]
        if argv[1:3] != ["-I", "-c"]:
            raise ValueError(f"a rank's launch is not `python -I -c PROGRAM`: {argv[:3]}")
        sys.argv = ["-c", *argv[4:]]
        os.write(ready_w, b"k")
        os.close(ready_w)
    except BaseException:  # noqa: BLE001 - nothing of the rank has run: the zygote may retry
        os.write(2, f"pkb sandbox: a rank's set-up after fork failed:\n{traceback.format_exc()}".encode())
        os._exit(1)
    code = 0
    try:
        exec(compile(argv[3], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, status 1
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _close_all_but(kept: set[int]) -> None:
    low = 3
    for fd in sorted(fd for fd in kept if fd >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _reseed() -> None:
    """What an exec would have drawn afresh: numpy's global generator (Python's ``random``
    reseeds itself in a forked child)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _send(**event: Any) -> None:
    os.write(1, (json.dumps(event) + "\n").encode())


if __name__ == "__main__":
    main()

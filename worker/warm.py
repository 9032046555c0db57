"""A warm evaluator: one process that has imported torch and the evaluator once, and forks each
job's `pkb eval` from there instead of starting Python afresh.

A job's `pkb eval` spent 4.6 s (median, 2 x H100 board batch, docs/runs.md) before its sandboxes
started, most of it importing torch. Here that import happens once per worker: the template
process (``python -m worker.warm``) imports the evaluator, then waits on a Unix socket; for each
job the worker sends the command's arguments, working directory, environment and descriptors
(its output pipe and the report pipe), and the template forks a child that becomes that job's
`pkb eval`: a session of its own (the runner kills the whole group), killed with the template
(which dies with the worker), the descriptors at the numbers the command names. The template
must never initialise CUDA (a driver initialised before a fork is unusable in the child): after
its imports it says whether a child may use CUDA (``cuda_fork_safety``), and a GPU job is forked
only from a template that may; every such child initialises its own GPUs as a fresh process
would, after its CUDA_VISIBLE_DEVICES is set. A template that merely has the driver library
mapped qualifies when the driver says it was never initialised (in board batch 5 on 2 x H200,
2026-11-28, every GPU job fell back to a fresh process, most likely because torch's imports map
``libcuda.so`` there and mapping alone disqualified the template).

The worker sees a ``WarmChild`` where it would see a ``subprocess.Popen``: ``pid``, ``wait``,
``returncode``, ``stdout``. If the template cannot be started or dies, the runner falls back to
a fresh process (``runner.run``), so a broken template costs time, never a job.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO, Optional

from evaluator.sandbox import libc

log = logging.getLogger(__name__)

MAX_REQUEST = 1 << 20  # the command, the working directory and the environment, as JSON
HIGH_FD = 100  # received descriptors are moved above this and above every number a command names


class WarmChild:
    """One job's `pkb eval`, forked by the template: what the runner uses of a Popen."""

    def __init__(self, pid: int, stdout: BinaryIO, template: "WarmEvaluator") -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: Optional[int] = None
        self._template = template

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None:
            self.returncode = self._template.exit_code(self.pid, timeout)
        return self.returncode


class WarmEvaluator:
    """The worker's end: starts the template on first use, one job at a time (the worker's
    concurrency is 1)."""

    def __init__(self, env: dict[str, str], preexec: Any = None) -> None:
        self.env = env
        self.preexec = preexec
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.sock: Optional[socket.socket] = None
        self.lock = threading.Lock()
        self.cuda_clean = False  # the template never initialised the CUDA driver (GPU jobs may fork)
        self.cuda_why = ""  # the template's word on it: why its children may or may not use CUDA
        self.unavailable = ""  # why the last spawn returned None (the worker logs it)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and self.sock is not None

    def start(self, timeout_s: float = 120.0) -> bool:
        """The template, started and warm (its imports done) within ``timeout_s``; False if not."""
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen([sys.executable, "-P", "-m", "worker.warm", str(theirs.fileno())],
                                            env=self.env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                            preexec_fn=self.preexec)
        except OSError:
            ours.close()
            return False
        finally:
            theirs.close()
        self.sock = ours
        began = time.monotonic()
        ready = self._receive(timeout_s)
        if ready is None or ready.get("ready") is not True:
            self.close()
            return False
        self.cuda_clean = ready.get("cuda_clean") is True
        self.cuda_why = str(ready.get("cuda_why", ""))
        log.info("the warm evaluator is ready in %.1f s (%s)", time.monotonic() - began, self.cuda_why)
        return True

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str], fds: dict[int, int],
              cuda: bool = False) -> Optional[WarmChild]:
        """Fork `pkb eval ARGV` in ``cwd`` with ``env``; ``fds``: number in the child -> our
        descriptor (the report pipe's write end under the number the command names); ``cuda``:
        the job uses GPUs. Its standard output and error come back on the child's ``stdout``.
        None: no template, or none that a GPU job may fork from."""
        with self.lock:
            if not self.alive() and not self.start():
                self.unavailable = "the template did not start"
                return None
            if cuda and not self.cuda_clean:
                self.unavailable = f"a GPU job may not fork from this template: {self.cuda_why}"
                return None
            assert self.sock is not None
            out_r, out_w = os.pipe()
            targets = [1, *fds]
            request = json.dumps({"argv": argv, "cwd": cwd, "env": env, "targets": targets}).encode()
            try:
                socket.send_fds(self.sock, [request], [out_w, *fds.values()])
            except OSError as exc:
                os.close(out_r)
                os.close(out_w)
                self.close()
                self.unavailable = f"the template could not be reached: {exc}"
                return None
            os.close(out_w)
            reply = self._receive(30.0)
            if reply is None or "pid" not in reply:
                os.close(out_r)
                self.close()
                self.unavailable = "the template did not fork the job"
                return None
            return WarmChild(int(reply["pid"]), os.fdopen(out_r, "rb"), self)

    def exit_code(self, pid: int, timeout: Optional[float]) -> int:
        """The child's exit status as the template reaped it (negative: killed by that signal)."""
        reply = self._receive(timeout)
        if reply is None:
            if self.alive():
                raise subprocess.TimeoutExpired(f"warm pkb eval {pid}", timeout or 0.0)
            return -signal.SIGKILL  # the template is gone, and its children with it
        return int(reply["exit"])

    def _receive(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        if self.sock is None:
            return None
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(MAX_REQUEST)
        except socket.timeout:
            if self.alive():
                return None
            self.close()
            return None
        except OSError:
            self.close()
            return None
        if not data:
            self.close()
            return None
        return json.loads(data)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None


# -- the template ------------------------------------------------------------------------------

def _child(request: dict[str, Any], fds: list[int], template_pid: int) -> None:
    """In the forked child: become the job's `pkb eval`, then exit with its status."""
    os.setsid()  # the runner kills the job's whole process group
    libc.dies_with(template_pid)()  # killed with the template, or gone now if it already died
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    base = max(HIGH_FD, *request["targets"]) + 1
    high = [os.dup2(fd, base + i) for i, fd in enumerate(fds)]  # out of the way of the targets
    for fd in fds:
        os.close(fd)
    out, *named = high
    os.dup2(out, 1)
    os.dup2(out, 2)
    for target, fd in zip(request["targets"][1:], named):
        os.dup2(fd, target)
        os.set_inheritable(target, False)  # the report pipe is the evaluator's alone: no rank inherits it
    for fd in high:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["pkb", *request["argv"]]
    code = 1
    try:
        from evaluator.cli import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - what a fresh interpreter would print, then its status
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


CUDA_ERROR_NOT_INITIALIZED = 3  # cuda.h: what every driver call but cuInit answers before cuInit


def cuda_driver_loaded() -> bool:
    """Whether this process has the CUDA driver library mapped (then it may have called cuInit)."""
    with open("/proc/self/maps") as maps:
        return any("libcuda.so" in line for line in maps)


def _driver_context_status() -> int:
    """cuCtxGetCurrent's status from the driver library already mapped here (never loads it:
    RTLD_NOLOAD); -1 if it cannot be asked."""
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return -1
    context = ctypes.c_void_p()
    return int(driver.cuCtxGetCurrent(ctypes.byref(context)))


def cuda_fork_safety(torch_initialised: bool, driver_loaded: bool,
                     context_status: Any = _driver_context_status) -> tuple[bool, str]:
    """Whether a child forked from this process may use CUDA, and why. Safe when the driver
    library is not mapped at all, or is mapped but answers CUDA_ERROR_NOT_INITIALIZED (cuInit
    never ran: mapping a library leaves no driver state to inherit). ``context_status`` is asked
    only then."""
    if torch_initialised:
        return False, "torch initialised CUDA in the template"
    if not driver_loaded:
        return True, "the CUDA driver is not loaded in the template"
    status = context_status()
    if status == CUDA_ERROR_NOT_INITIALIZED:
        return True, "the CUDA driver is mapped in the template but was never initialised"
    if status < 0:
        return False, "the CUDA driver is mapped in the template and could not be asked whether it is initialised"
    return False, f"the CUDA driver is initialised in the template (cuCtxGetCurrent answered {status})"


def _template_cuda_fork_safety() -> tuple[bool, str]:
    torch = sys.modules.get("torch")
    initialised = bool(torch is not None and torch.cuda.is_initialized())
    return cuda_fork_safety(initialised, cuda_driver_loaded())


def serve(sock: socket.socket) -> None:
    from evaluator import bytecode_cache

    # On hosts whose torch ships no bytecode: the template's own imports come from the cache, and
    # the ranks' is warmed now, before the first job (a child inherits the answer, not the wait).
    bytecode_cache.adopt()
    import evaluator.api  # noqa: F401 - the imports every job would repeat: torch, the problems
    import evaluator.cli  # noqa: F401

    bytecode_cache.ranks_cache()

    clean, why = _template_cuda_fork_safety()
    sock.send(json.dumps({"ready": True, "cuda_clean": clean, "cuda_why": why}).encode())
    while True:
        try:
            request, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 8)
        except OSError:
            return
        if not request:
            return  # the worker closed its end
        template = os.getpid()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(json.loads(request), fds, template)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        try:
            sock.send(json.dumps({"exit": code}).encode())
        except OSError:
            return


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))

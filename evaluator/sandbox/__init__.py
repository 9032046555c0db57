"""Confinement for the processes that run candidate code (and, for equal conditions, the reference).

``open_box`` gives a side its box: ``ConfinedBox`` (Linux namespaces, the default) or
``PlainBox`` (unconfined, only where an operator asked for it). docs/sandbox.md says what the
confinement covers and what it does not.
"""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from ..config import ResourceLimits
from .box import Box, RankLaunch, SandboxError
from .confined import ConfinedBox
from . import seccomp
from .plain import PlainBox


def open_box(side_dir: Path, inbox: Path, device: str, resources: ResourceLimits, *, confined: bool) -> Box:
    if confined:
        return ConfinedBox(side_dir, inbox, device, resources)
    return PlainBox(side_dir, inbox, device)


@functools.lru_cache(maxsize=None)
def unavailable_reason() -> str | None:
    """Why this host cannot confine a side (None: it can). Tried once per process."""
    with tempfile.TemporaryDirectory(prefix="pkb-sandbox-probe-") as tmp:
        inbox = Path(tmp) / "in"
        inbox.mkdir()
        box = ConfinedBox(Path(tmp), inbox, "cpu", ResourceLimits())
        try:
            box.start([])
        except (SandboxError, OSError) as exc:
            return str(exc)
        finally:
            box.close()
    return _filter_unavailable()


def _filter_unavailable() -> str | None:
    """Why ranks here could not install the system-call filter (seccomp.py), found before any
    rank tries: there every rank's set-up would fail, after its retries, with a harness error."""
    if not seccomp.supported():
        return f"no system-call filter is written for this machine ({platform.machine()})"
    program = ("import ctypes, sys; sys.path.insert(0, sys.argv[1]); from evaluator.sandbox import seccomp; "
               "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); seccomp.install()")
    done = subprocess.run([sys.executable, "-I", "-c", program, str(Path(__file__).resolve().parents[2])],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return f"the kernel refused the sandbox's system-call filter: {done.stderr.strip().splitlines()[-1:]}"
    return None


__all__ = ["Box", "RankLaunch", "SandboxError", "open_box", "unavailable_reason"]

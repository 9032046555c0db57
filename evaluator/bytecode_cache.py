"""Compiled bytecode for the ranks' imports, where the installation ships none.

The GPU hosts' PyTorch is installed without ``.pyc`` files and runs with
``PYTHONDONTWRITEBYTECODE=1``: every process compiled torch's Python sources again, 3.6 s for
``import torch`` on an H200 host (2026-11-29, docs/judge.md "Where a pkb eval's wall time
goes"), in the evaluator and again in every rank, one side after the other. Ranks cannot cache
what they compile (their filesystem is read-only, and a cache they could write would let a
candidate plant code for the reference and for later evaluations).

So the evaluator compiles once per host into a directory of its own (``PKB_PYCACHE``, or
``~/.cache/pkb/pycache-<tag>``), by importing what a rank imports in a child process that may
write there, and hands the directory to confined ranks read-only (``sys.pycache_prefix``, set
first thing in the rank, which never writes bytecode). Where the installation has its own
bytecode (a normal virtual environment, this repository's CI) nothing changes. The directory must
be ours and writable by us alone, or it is not used.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Optional

CACHE_ENV = "PKB_PYCACHE"
WARM_TIMEOUT_S = 300.0

# What a rank imports on its way to the first trial (rank_main and what it loads lazily).
_WARM_PROGRAM = (
    "import os, sys; os.umask(0o022); sys.pycache_prefix = sys.argv[1]; sys.dont_write_bytecode = False; "
    "sys.path.insert(0, sys.argv[2]); "
    "import torch, torch.distributed, torch.utils._python_dispatch; "
    "import problems, evaluator.rank_main, evaluator.rank_runner, evaluator.exact, evaluator.builds, "
    "evaluator.candidate, evaluator.shim.calls, evaluator.shim.buffers, evaluator.shim.heap"
)


def installed_without_bytecode(module: str = "torch") -> bool:
    """Whether ``module``'s source has no compiled file beside it (where Python would look with
    no prefix): each process then compiles it again."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    prefix, sys.pycache_prefix = sys.pycache_prefix, None
    try:
        return not os.path.exists(importlib.util.cache_from_source(spec.origin))
    finally:
        sys.pycache_prefix = prefix


def _default_dir() -> Path:
    return Path.home() / ".cache" / "pkb" / f"pycache-{sys.implementation.cache_tag}"


def _ours_alone(path: Path) -> bool:
    """A directory owned by us that no one else may write to."""
    info = path.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@functools.lru_cache(maxsize=1)
def ranks_cache() -> Optional[str]:
    """The directory confined ranks read compiled modules from, warmed on first use in this
    process; None where torch's installation carries its own bytecode, or where no directory of
    ours alone could be had (then ranks compile as before)."""
    if not installed_without_bytecode("torch"):
        return None
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    return prepared(Path(os.environ.get(CACHE_ENV) or _default_dir()), f"torch-{version}")


def prepared(directory: Path, key: str, program: str = _WARM_PROGRAM) -> Optional[str]:
    """``directory`` made ours alone and warmed by ``program`` (run once per ``key``: what it
    compiled stays valid while the sources keep their times and sizes), or None."""
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        if not _ours_alone(directory):
            return None
        marker = directory / f"warm-{key}"
        if not marker.exists():
            done = subprocess.run([sys.executable, "-I", "-c", program, str(directory),
                                   str(Path(__file__).resolve().parents[1])],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=WARM_TIMEOUT_S, check=False)
            if done.returncode != 0:
                return None
            marker.touch()
    except (OSError, subprocess.SubprocessError):
        return None
    return str(directory)


def adopt() -> Optional[str]:
    """The evaluator's own process (``pkb``) reads and writes its compiled modules in the cache too,
    where torch ships none: its import of torch then compiles once per host, not once per ``pkb
    eval`` (before the first rank starts). Call before torch is imported; returns the directory."""
    if sys.pycache_prefix is not None or not installed_without_bytecode("torch"):
        return None
    umask = os.umask(0o022)
    os.umask(umask)
    if umask & 0o022 != 0o022:
        return None  # what this process writes there others could rewrite: the folders Python makes
    directory = Path(os.environ.get(CACHE_ENV) or _default_dir())
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        if not _ours_alone(directory):
            return None
    except OSError:
        return None
    sys.pycache_prefix, sys.dont_write_bytecode = str(directory), False
    return str(directory)


# The first statement of a rank's program (launcher.RANK_ENTRY), before anything is imported:
# compiled modules come from the evaluator's cache when it handed one, and none are written.
RANK_PRELUDE = (f"import os, sys; sys.dont_write_bytecode = True; "
                f"sys.pycache_prefix = os.environ.get({CACHE_ENV!r}) or None; ")

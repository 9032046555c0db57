"""The on-disk build cache shared by every rank of an evaluation.

One key per (source, options, target, toolchain). A build runs under an exclusive ``fcntl``
lock on ``<key>.lock``: when N ranks ask at once, the first builds and the others block on the
lock, then find the finished artefact and load it. Artefacts are written to a temporary name
and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Iterator

DEFAULT_CACHE = Path.home() / ".cache" / "pkb" / "kernels"

_stats: dict[str, float] = {"seconds": 0.0, "builds": 0, "hits": 0, "wait_seconds": 0.0}


def cache_dir() -> Path:
    root = Path(os.environ.get("PKB_KERNEL_CACHE") or DEFAULT_CACHE)
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_key(*parts: object) -> str:
    """sha256 over the parts, each JSON-encoded so that ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\0")
    return digest.hexdigest()


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[float]:
    """Hold an exclusive lock on ``path`` (created if missing); yields seconds spent waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        waited = time.perf_counter() - start
        _stats["wait_seconds"] += waited
        try:
            yield waited
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def record(seconds: float, *, built: bool) -> None:
    _stats["seconds"] += seconds
    _stats["builds" if built else "hits"] += 1


def compile_seconds() -> float:
    """Seconds this process spent in evaluator.cuda builds: compiling, waiting, loading."""
    return float(_stats["seconds"])


def compile_stats() -> dict[str, float]:
    """``seconds`` (as compile_seconds), ``builds`` done here, cache ``hits``, lock ``wait_seconds``."""
    return dict(_stats)


def reset_stats() -> None:
    for key in _stats:
        _stats[key] = 0 if key in ("builds", "hits") else 0.0

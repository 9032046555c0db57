"""Writes into the evaluator's bytecode cache (evaluator/bytecode_cache.py), where the reference's
ranks and later evaluations read compiled modules from: a planted ``.pyc`` would run its code in
them. Answers right only where the cache was handed to it (its prefix is set) and every write to it
failed; a write that lands, or no cache, answers wrong (tests/evaluator/test_bytecode_cache.py)."""

from __future__ import annotations

import os
import sys

import torch.distributed as dist

from problems import get as _get

_reference = _get("all-reduce").reference


def _planted() -> bool:
    prefix = sys.pycache_prefix
    if not prefix or prefix != os.environ.get("PKB_PYCACHE"):
        return True  # no cache to plant in: the test that uses this file expects one
    for folder, _, _ in os.walk(prefix):
        try:
            with open(os.path.join(folder, "planted.cpython-311.pyc"), "wb") as out:
                out.write(b"not bytecode")
            return True
        except OSError:
            continue
    try:
        os.chmod(prefix, 0o777)
        return True
    except OSError:
        return False


_WROTE = _planted()


def solution(x, *, group: dist.ProcessGroup):
    out = _reference(x, group=group)
    return out + 1 if _WROTE else out

"""The candidate's output files, in the evaluating parent: read them safely, and notice a change.

They were written by candidate code: loaded only with ``weights_only`` and only as a list of plain
tensors; hashed where the side ran unconfined, so that a process it left behind cannot rewrite
them unseen while the reference runs.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Optional

import torch

from .report import Failure, FailureClass, make_failure
from .side import SideResult


def load_candidate_outputs(path: Path, sha256: Optional[str] = None) -> Optional[list[torch.Tensor]] | Failure:
    """The outputs in ``path``; None if it holds none. ``sha256``: what the judge wrote there (the
    judge outside, unconfined): a file with other bytes is a protocol violation, and the
    outputs are read from the very bytes that were hashed."""
    try:
        if sha256 is not None:
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != sha256:
                return make_failure(FailureClass.PROTOCOL_VIOLATION,
                                    f"{path.name}, the judge's copy of the candidate's outputs, changed on the "
                                    "judge's disk after the judge wrote it (only a candidate process could "
                                    "write there)")
            outputs = torch.load(io.BytesIO(data), weights_only=True)
        else:
            outputs = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - missing, truncated or not a tensor file: all the same here
        return None
    if not isinstance(outputs, list) or not all(isinstance(t, torch.Tensor) for t in outputs):
        return None
    return outputs


def hashes_if_unconfined(candidate: SideResult, workdir: Path) -> Optional[dict[str, str]]:
    """Unconfined, a process the candidate left behind could rewrite its files while the
    reference runs: hash them now, and again before judging. Confined, nothing outlives the side."""
    return None if candidate.confined else _hash_outputs(workdir / "candidate")


def tampering(hashes: Optional[dict[str, str]], workdir: Path) -> Optional[Failure]:
    if hashes is None:
        return None
    changed = [name for name, digest in _hash_outputs(workdir / "candidate").items() if hashes.get(name) != digest]
    if not changed:
        return None
    return make_failure(FailureClass.PROTOCOL_VIOLATION,
                        f"candidate output files changed after its ranks finished: {changed[:3]}")


def _hash_outputs(folder: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(folder.glob("*.pt")):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        digests[path.name] = digest.hexdigest()
    return digests

"""The candidate's output files, in the evaluating parent: read them safely, and notice a change.

They were written by candidate code: loaded only with ``weights_only`` and only as a list of plain
tensors; hashed where the side ran unconfined, so that a process it left behind cannot rewrite
them unseen while the reference runs.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
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
            if not stored_only(io.BytesIO(data), len(data)):
                return None
            outputs = torch.load(io.BytesIO(data), weights_only=True)
        else:
            if not stored_only(path, path.stat().st_size):
                return None
            outputs = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - missing, truncated or not a tensor file: all the same here
        return None
    if not isinstance(outputs, list) or not all(isinstance(t, torch.Tensor) for t in outputs):
        return None
    return outputs


def stored_only(source: Path | io.BytesIO, size: int) -> bool:
    """Whether a tensor file (a zip, as ``torch.save`` writes it) holds its records as they are,
    none compressed, and no more of them than its own bytes: so reading it takes no more memory
    than the file. PyTorch's reader inflates a compressed record into the size it declares before
    it checks anything: judged in the ranks, 13 MB of a candidate's file became 3 GiB of the
    parent's memory (red team, ninth pass: inflates_its_output_files; 1000:1 at zlib's level 9,
    so a side's disk held terabytes). ``torch.save`` never compresses."""
    try:
        with zipfile.ZipFile(source) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False
    return all(r.compress_type == zipfile.ZIP_STORED and r.file_size == r.compress_size for r in records) \
        and sum(r.file_size for r in records) <= size


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

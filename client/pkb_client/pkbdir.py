"""Packing local files for upload: a directory of samples, or a ParallelKernelBench run
directory, as one in-memory tar.gz (only .py files; nothing else leaves the machine)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def pack(directory: Path, *, keep_top: bool = True) -> tuple[bytes, int]:
    """tar.gz of every .py file under ``directory``; paths start with the directory's own name
    when ``keep_top`` (the importer reads the run's name from it). Returns (bytes, file count)."""
    directory = directory.resolve()
    files = sorted(p for p in directory.rglob("*.py") if p.is_file() and "__pycache__" not in p.parts)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in files:
            rel = path.relative_to(directory).as_posix()
            tar.add(str(path), arcname=f"{directory.name}/{rel}" if keep_top else rel, recursive=False)
    return buf.getvalue(), len(files)

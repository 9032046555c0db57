"""Shared memory on the CPU: a memory file, mapped by the judge and by the rank."""

from __future__ import annotations

import fcntl
import mmap
import os

import torch

from .exported import Exported


class HostMemory(Exported):
    def __init__(self, fd: int, mapped: mmap.mmap, size: int) -> None:
        self._fd = fd
        self.mapped = mapped
        self.size = size

    @classmethod
    def create(cls, name: str, size: int) -> "HostMemory":
        size = max(size, 1)
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        # Sealed at its size before any rank gets it: a rank that could shrink the file would make
        # the judge's next touch of its own mapping a SIGBUS, which kills the judge with no report
        # (tests/evaluator/hostile/truncates_shared_buffers.py).
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        return cls(fd, mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE), size)

    @classmethod
    def attach(cls, fd: int) -> "HostMemory":
        size = os.fstat(fd).st_size
        mapped = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        return cls(-1, mapped, size)

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cpu")

    def view(self, offset: int, nbytes: int) -> torch.Tensor:
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer(self.mapped, dtype=torch.uint8, count=nbytes, offset=offset)

    def close(self) -> None:
        self.close_fd()
        try:
            self.mapped.close()
        except (BufferError, ValueError):
            pass  # a tensor view still holds it: the map goes with the last reference

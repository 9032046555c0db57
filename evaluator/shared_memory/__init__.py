"""Memory that the judge and a rank both map: the judge makes it, the rank gets a descriptor.

On CPU a memory file (memfd); on a GPU an allocation of the CUDA driver's virtual memory API
(cuMemCreate with POSIX file-descriptor handles), the mechanism PyTorch's symmetric memory uses
between processes, measured to cross our sandbox's user and PID namespaces
(docs/measurements/judging/). Either way both ends see the bytes as a uint8 tensor, on the CPU
or on the GPU, and nothing here knows what the bytes mean (evaluator/wire.py says that).
"""

from __future__ import annotations

from typing import Protocol

import torch


class SharedMemory(Protocol):
    size: int

    @property
    def torch_device(self) -> torch.device: ...

    def fd(self) -> int:
        """The descriptor a rank inherits (-1 once closed here)."""

    def close_fd(self) -> None: ...

    def view(self, offset: int, nbytes: int) -> torch.Tensor:
        """Bytes [offset, offset + nbytes) as a uint8 tensor on this memory's device."""

    def close(self) -> None: ...


def create(device: str, name: str, size: int) -> SharedMemory:
    """New memory of at least ``size`` bytes; ``device`` is ``cpu`` or ``cuda:N``."""
    if device == "cpu":
        from .host import HostMemory

        return HostMemory.create(name, size)
    from .device import DeviceMemory

    return DeviceMemory.create(torch.device(device).index or 0, size)


def attach(device: str, fd: int, size: int) -> SharedMemory:
    """The memory behind an inherited descriptor, mapped here (the descriptor is consumed);
    ``size`` is what the judge made (a memory file's own size is used on the CPU)."""
    if device == "cpu":
        from .host import HostMemory

        return HostMemory.attach(fd)
    from .device import DeviceMemory

    return DeviceMemory.attach(torch.device(device).index or 0, fd, size)

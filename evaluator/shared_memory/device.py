"""Shared memory on a GPU: the CUDA driver's virtual memory API through ctypes (torch alone).

The judge creates the physical allocation on the rank's GPU (cuMemCreate, POSIX file-descriptor
handle type), maps it into its own address space and exports a descriptor that the rank
inherits; the rank imports and maps the same allocation. Both see it as a CUDA uint8 tensor
(through the CUDA array interface). The allocation lives until both ends have released it.
Measured on 2 x H200 (scripts/gpu/judge_probes.py): a rank of our sandbox, another uid in its
own PID namespace, imported and mapped 64 MiB in 0.5 ms and saw the judge's bytes.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional

import torch

from .exported import Exported

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_driver: Optional[ctypes.CDLL] = None


def _cu() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
    return _driver


def _check(code: int, what: str) -> None:
    if code != 0:
        raise RuntimeError(f"{what} failed with CUDA driver error {code}")


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type, prop.requestedHandleTypes, prop.location = _PINNED, _POSIX_FD, _Location(_ON_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    value = ctypes.c_size_t()
    _check(_cu().cuMemGetAllocationGranularity(ctypes.byref(value), ctypes.byref(_prop(device)), 0),
           "cuMemGetAllocationGranularity")
    return value.value


class _ArrayInterface:
    """A device pointer as torch.as_tensor takes it."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3}


class DeviceMemory(Exported):
    def __init__(self, device: int, handle: ctypes.c_uint64, size: int, fd: int) -> None:
        self.device = device
        self.size = size
        self._handle = handle
        self._fd = fd
        self._ptr = self._map()
        self._bytes = torch.as_tensor(_ArrayInterface(self._ptr, size), device=f"cuda:{device}")

    @classmethod
    def create(cls, device: int, size: int) -> "DeviceMemory":
        _context(device)
        step = granularity(device)
        size = max(step, -(-size // step) * step)
        handle = ctypes.c_uint64()
        _check(_cu().cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(_prop(device)),
                                 ctypes.c_ulonglong(0)), f"cuMemCreate of {size} bytes on GPU {device}")
        fd = ctypes.c_int()
        _check(_cu().cuMemExportToShareableHandle(ctypes.byref(fd), handle, _POSIX_FD, ctypes.c_ulonglong(0)),
               "cuMemExportToShareableHandle")
        os.set_inheritable(fd.value, False)
        return cls(device, handle, size, fd.value)

    @classmethod
    def attach(cls, device: int, fd: int, size: int) -> "DeviceMemory":
        """``size``: the allocation's size as the judge made it (a descriptor does not carry it)."""
        _context(device)
        handle = ctypes.c_uint64()
        try:
            _check(_cu().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
                   "cuMemImportFromShareableHandle")
        finally:
            os.close(fd)
        return cls(device, handle, size, -1)

    def _map(self) -> int:
        ptr = ctypes.c_uint64()
        _check(_cu().cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(0),
                                         ctypes.c_uint64(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        _check(_cu().cuMemMap(ptr, ctypes.c_size_t(self.size), ctypes.c_size_t(0), self._handle,
                              ctypes.c_ulonglong(0)), "cuMemMap")
        access = _Access(_Location(_ON_DEVICE, self.device), _READ_WRITE)
        _check(_cu().cuMemSetAccess(ptr, ctypes.c_size_t(self.size), ctypes.byref(access), ctypes.c_size_t(1)),
               "cuMemSetAccess")
        return ptr.value

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cuda", self.device)

    def view(self, offset: int, nbytes: int) -> torch.Tensor:
        return self._bytes[offset:offset + nbytes]

    def close(self) -> None:
        self.close_fd()
        if getattr(self, "_ptr", 0):
            torch.cuda.synchronize(self.device)
            self._bytes = torch.empty(0, dtype=torch.uint8)
            _cu().cuMemUnmap(ctypes.c_uint64(self._ptr), ctypes.c_size_t(self.size))
            _cu().cuMemAddressFree(ctypes.c_uint64(self._ptr), ctypes.c_size_t(self.size))
            _cu().cuMemRelease(self._handle)
            self._ptr = 0


def _context(device: int) -> None:
    """The device's primary context current on this thread (torch's), which the driver calls use."""
    torch.cuda.set_device(device)
    torch.zeros(1, device=f"cuda:{device}")

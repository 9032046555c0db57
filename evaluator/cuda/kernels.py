"""compile_kernels: CUDA C++ source -> launchable kernels, through NVRTC and a shared cache."""

from __future__ import annotations

import ctypes
import json
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from .. import builds
from . import cache, nvrtc
from .errors import CompileError

_INT_TYPES = {1: ctypes.c_int8, 2: ctypes.c_int16, 4: ctypes.c_int32, 8: ctypes.c_int64}
_UINT_TYPES = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}


class Kernel:
    """One ``__global__`` function. Call it as ``kernel(*args, grid=..., block=...)``.

    Arguments: a CUDA tensor passes its data pointer; a ctypes value (``ctypes.c_int32(n)``)
    passes as it is; a Python int or float is converted to the parameter's declared size when
    the driver reports it (CUDA 12.4+), else to a 64-bit integer or a 32-bit float. The launch
    goes on the current stream of the current device (or of ``stream``).
    """

    def __init__(self, name: str, lowered_name: str, cubin: bytes) -> None:
        self.name = name
        self.lowered_name = lowered_name
        self._cubin = cubin
        self._loaded: dict[int, tuple[int, int, Optional[list[int]]]] = {}
        self._shared_configured: dict[int, int] = {}

    def _function(self, device: int) -> tuple[int, Optional[list[int]]]:
        if device not in self._loaded:
            module, func = nvrtc.load_function(self._cubin, self.lowered_name, device)
            self._loaded[device] = (module, func, nvrtc.param_sizes(func))
        _, func, sizes = self._loaded[device]
        return func, sizes

    def __call__(self, *args: Any, grid: Sequence[int] | int, block: Sequence[int] | int = 256,
                 shared_mem: int = 0, stream: Optional[torch.cuda.Stream] = None) -> None:
        if stream is None:
            stream = torch.cuda.current_stream()
        device = stream.device.index if stream.device.index is not None else torch.cuda.current_device()
        func, sizes = self._function(device)
        if sizes is not None and len(sizes) != len(args):
            raise TypeError(f"kernel {self.name} takes {len(sizes)} arguments, got {len(args)}")
        values = [_to_ctypes(arg, sizes[i] if sizes else None, self.name, i)
                  for i, arg in enumerate(args)]
        if shared_mem >= 48 * 1024 and self._shared_configured.get(device, 0) < shared_mem:
            nvrtc.set_max_dynamic_shared(func, shared_mem)
            self._shared_configured[device] = shared_mem
        grid_t = (grid,) if isinstance(grid, int) else tuple(grid)
        block_t = (block,) if isinstance(block, int) else tuple(block)
        nvrtc.launch(func, grid_t, block_t, shared_mem, stream.cuda_stream, values)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"


def _to_ctypes(arg: Any, size: Optional[int], kernel: str, index: int) -> Any:
    where = f"argument {index} of kernel {kernel}"
    if isinstance(arg, torch.Tensor):
        if not arg.is_cuda:
            raise TypeError(f"{where}: tensor on {arg.device}, expected a CUDA tensor")
        value: Any = ctypes.c_void_p(arg.data_ptr())
    elif isinstance(arg, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array)):  # type: ignore[attr-defined]
        value = arg
    elif arg is None:
        value = ctypes.c_void_p(None)
    elif isinstance(arg, bool):
        value = ctypes.c_bool(arg) if size in (None, 1) else _INT_TYPES[size](int(arg))
    elif isinstance(arg, int):
        width = size or 8
        if width not in _INT_TYPES:
            raise TypeError(f"{where}: a Python int for a {width}-byte parameter; pass ctypes")
        signed_max = 2 ** (8 * width - 1) - 1
        if -signed_max - 1 <= arg <= signed_max:
            value = _INT_TYPES[width](arg)
        elif 0 <= arg < 2 ** (8 * width):
            value = _UINT_TYPES[width](arg)
        else:
            raise OverflowError(f"{where}: {arg} does not fit in {width} bytes")
    elif isinstance(arg, float):
        if size in (None, 4):
            value = ctypes.c_float(arg)
        elif size == 8:
            value = ctypes.c_double(arg)
        else:
            raise TypeError(f"{where}: a Python float for a {size}-byte parameter; pass ctypes")
    else:
        raise TypeError(f"{where}: unsupported type {type(arg).__name__}")
    if size is not None and ctypes.sizeof(value) != size:
        raise TypeError(f"{where}: parameter is {size} bytes, value {type(value).__name__} "
                        f"is {ctypes.sizeof(value)}")
    return value


def kernel_cache_key(source: str, names: Sequence[str], options: Sequence[str], arch: str,
                     toolchain: str) -> str:
    return cache.cache_key("nvrtc", source, list(names), list(options), arch,
                           torch.__version__, str(torch.version.cuda), toolchain)


def compile_cubin(source: str, names: Sequence[str], *, options: Sequence[str] = (),
                  arch: str, toolchain: Optional[str] = None) -> tuple[bytes, dict[str, str]]:
    """Build (or fetch from the cache) the CUBIN; one process builds, the others wait."""
    names = list(names)
    if not names:
        raise ValueError("names: list at least one kernel")
    toolchain = toolchain if toolchain is not None else nvrtc.nvrtc_version()
    key = kernel_cache_key(source, names, options, arch, toolchain)
    root = cache.cache_dir()
    start = time.perf_counter()
    built = False
    try:
        found = _read_cached(root, key)
        if found is None:
            with builds.building(f"evaluator.cuda.compile_kernels({', '.join(names)[:100]})"), \
                    cache.exclusive(root / f"{key}.lock"):
                found = _read_cached(root, key)
                if found is None:
                    found = _build(root, key, source, names, options, arch)
                    built = True
    finally:
        cache.record(time.perf_counter() - start, built=built)
    return found


def _read_cached(root: Path, key: str) -> Optional[tuple[bytes, dict[str, str]]]:
    failed = root / f"{key}.failed"
    if failed.exists():
        raise CompileError("CUDA source failed to compile (NVRTC, cached result)",
                           failed.read_text())
    meta, cubin = root / f"{key}.json", root / f"{key}.cubin"
    if not cubin.exists():
        return None
    return cubin.read_bytes(), json.loads(meta.read_text())["lowered"]


def _build(root: Path, key: str, source: str, names: list[str], options: Sequence[str],
           arch: str) -> tuple[bytes, dict[str, str]]:
    try:
        binary, lowered, log = nvrtc.compile_cubin(source, names, options, arch)
    except nvrtc.CompilerFailed as failure:
        cache.write_atomic(root / f"{key}.failed", failure.log.encode())
        raise CompileError("CUDA source failed to compile (NVRTC)", failure.log) from None
    meta = {"names": names, "lowered": lowered, "options": list(options), "arch": arch, "log": log}
    cache.write_atomic(root / f"{key}.json", json.dumps(meta, indent=1).encode())
    cache.write_atomic(root / f"{key}.cubin", binary)  # written last: its presence means done
    return binary, lowered


def compile_kernels(source: str, names: Sequence[str], *, options: Sequence[str] = (),
                    arch: Optional[str] = None) -> dict[str, Kernel]:
    """Compile ``source`` with NVRTC for this device and return ``{name: Kernel}``.

    ``names`` are the kernels to expose (``extern "C"`` names, or C++ name expressions such as
    ``"scale<float>"``). ``options`` go to NVRTC (``"--use_fast_math"``, ``"-DN=4"``, ``"-lineinfo"``; NVRTC optimises by default and rejects ``-O3``);
    ``arch`` defaults to the current device's (``"sm_90"``; pass ``"sm_90a"`` for wgmma).
    Raises :class:`CompileError` with the compiler log on failure.
    """
    arch = arch or nvrtc.device_arch()
    binary, lowered = compile_cubin(source, names, options=options, arch=arch)
    return {name: Kernel(name, lowered[name], binary) for name in names}

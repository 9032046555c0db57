"""NVRTC and the CUDA driver through ctypes: compile to a CUBIN, load it, launch kernels.

torch ships private helpers for this (``torch.cuda._utils._nvrtc_compile``), but they compile
one kernel per program and their signatures moved between releases, so only the library
lookup is borrowed from them, defensively. Nothing here runs at import time.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from .errors import CompileError


class CompilerFailed(Exception):
    """Raised by :func:`compile_cubin` when NVRTC rejects the source; carries the log."""

    def __init__(self, log: str) -> None:
        super().__init__(log)
        self.log = log


# ---------------------------------------------------------------------------- libraries

def _site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith("site-packages")]


def _preload_builtins() -> None:
    """NVRTC dlopens libnvrtc-builtins by name; a pip-installed one is not on the loader's
    path, so load it first (RTLD_GLOBAL) and the later dlopen finds it already resident."""
    for site in _site_dirs():
        for path in sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib",
                                                  "libnvrtc-builtins.so.*"))):
            if ".alt." not in os.path.basename(path):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    continue


@functools.lru_cache(maxsize=None)
def nvrtc_library() -> ctypes.CDLL:
    major = str(torch.version.cuda or "13").split(".")[0]
    _preload_builtins()
    try:
        from torch.cuda import _utils

        return _utils._get_nvrtc_library()  # type: ignore[attr-defined]
    except Exception:
        pass
    candidates = [f"libnvrtc.so.{major}", "libnvrtc.so"]
    for site in _site_dirs():
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libnvrtc.so*")))
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidates += sorted(glob.glob(os.path.join(cuda_home, "lib64", "libnvrtc.so*")))
    for name in candidates:
        if "builtins" in name or "alt" in os.path.basename(name):
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise CompileError("NVRTC library not found", "searched: " + ", ".join(candidates))


@functools.lru_cache(maxsize=None)
def driver_library() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.cuModuleLoadData.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
    lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return lib


def nvrtc_version() -> str:
    lib = nvrtc_library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


@functools.lru_cache(maxsize=None)
def include_dirs() -> tuple[str, ...]:
    """Directories holding cuda_bf16.h & co, nearest to the NVRTC in use first."""
    found: list[str] = []
    for site in _site_dirs():
        found += sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))
        found += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "include")))
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    found.append(os.path.join(cuda_home, "include"))
    usable = [d for d in dict.fromkeys(found) if os.path.exists(os.path.join(d, "cuda_bf16.h"))]
    return tuple(usable[:1])


def device_arch(device: Optional[int] = None) -> str:
    index = torch.cuda.current_device() if device is None else device
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm_{major}{minor}"


# ---------------------------------------------------------------------------- compiling

def compile_cubin(source: str, names: Sequence[str], options: Sequence[str],
                  arch: str) -> tuple[bytes, dict[str, str], str]:
    """The compiler boundary: (cubin, {name: lowered name}, log). Raises CompilerFailed."""
    lib = nvrtc_library()
    opts = [f"--gpu-architecture={arch}", "-std=c++17"]
    opts += [f"-I{d}" for d in include_dirs()]
    opts += list(options)
    encoded = [o.encode() for o in opts]
    prog = ctypes.c_void_p()
    _check_nvrtc(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"pkb.cu",
                                             0, None, None))
    try:
        for name in names:
            _check_nvrtc(lib, lib.nvrtcAddNameExpression(prog, name.encode()))
        status = lib.nvrtcCompileProgram(prog, len(encoded),
                                         (ctypes.c_char_p * len(encoded))(*encoded))
        log = _program_log(lib, prog)
        if status != 0:
            raise CompilerFailed(log or _nvrtc_error(lib, status))
        size = ctypes.c_size_t()
        _check_nvrtc(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)))
        cubin = ctypes.create_string_buffer(size.value)
        _check_nvrtc(lib, lib.nvrtcGetCUBIN(prog, cubin))
        lowered = {}
        for name in names:
            out = ctypes.c_char_p()
            _check_nvrtc(lib, lib.nvrtcGetLoweredName(prog, name.encode(), ctypes.byref(out)))
            lowered[name] = (out.value or name.encode()).decode()
        return cubin.raw, lowered, log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _program_log(lib: ctypes.CDLL, prog: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(max(size.value, 1))
    lib.nvrtcGetProgramLog(prog, buf)
    return buf.value.decode(errors="replace").strip()


def _nvrtc_error(lib: ctypes.CDLL, status: int) -> str:
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    text = lib.nvrtcGetErrorString(status)
    return f"NVRTC error {status}: {text.decode() if text else 'unknown'}"


def _check_nvrtc(lib: ctypes.CDLL, status: int) -> None:
    if status != 0:
        raise CompilerFailed(_nvrtc_error(lib, status))


# ---------------------------------------------------------------------------- driver

def check_cuda(status: int, what: str) -> None:
    if status != 0:
        text = ctypes.c_char_p()
        driver_library().cuGetErrorString(status, ctypes.byref(text))
        raise RuntimeError(f"{what} failed: CUDA error {status} "
                           f"({text.value.decode() if text.value else 'unknown'})")


def ensure_context(device: int) -> None:
    """Make the device's primary context current, as torch's runtime calls would."""
    lib = driver_library()
    ctx = ctypes.c_void_p()
    check_cuda(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if ctx.value:
        return
    dev = ctypes.c_int()
    check_cuda(lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
    check_cuda(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check_cuda(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def load_function(cubin: bytes, lowered_name: str, device: int) -> tuple[int, int]:
    """(module, function) handles of one kernel in one device's context."""
    lib = driver_library()
    with torch.cuda.device(device):
        torch.cuda.current_stream(device)  # initialises the runtime on that device
        ensure_context(device)
        module = ctypes.c_void_p()
        check_cuda(lib.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
        func = ctypes.c_void_p()
        check_cuda(lib.cuModuleGetFunction(ctypes.byref(func), module, lowered_name.encode()),
                   f"cuModuleGetFunction({lowered_name})")
    return int(module.value or 0), int(func.value or 0)


def param_sizes(func: int) -> Optional[list[int]]:
    """Byte size of each kernel parameter (CUDA 12.4+ drivers), or None if unknown."""
    lib = driver_library()
    if not hasattr(lib, "cuFuncGetParamInfo"):
        return None
    sizes: list[int] = []
    offset, size = ctypes.c_size_t(), ctypes.c_size_t()
    while len(sizes) < 4096:
        status = lib.cuFuncGetParamInfo(ctypes.c_void_p(func), ctypes.c_size_t(len(sizes)),
                                        ctypes.byref(offset), ctypes.byref(size))
        if status != 0:
            break
        sizes.append(size.value)
    return sizes


def launch(func: int, grid: Sequence[int], block: Sequence[int], shared_mem: int,
           stream: int, args: Sequence[Any]) -> None:
    params = (ctypes.c_void_p * max(len(args), 1))()
    for i, value in enumerate(args):
        params[i] = ctypes.addressof(value)
    gx, gy, gz = (list(grid) + [1, 1])[:3]
    bx, by, bz = (list(block) + [1, 1])[:3]
    check_cuda(driver_library().cuLaunchKernel(
        ctypes.c_void_p(func), gx, gy, gz, bx, by, bz, shared_mem, ctypes.c_void_p(stream),
        params, None), "cuLaunchKernel")


def set_max_dynamic_shared(func: int, nbytes: int) -> None:
    max_dynamic_shared_size_bytes = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check_cuda(driver_library().cuFuncSetAttribute(ctypes.c_void_p(func),
                                                   max_dynamic_shared_size_bytes, nbytes),
               "cuFuncSetAttribute")


def cubin_path(root: Path, key: str) -> Path:
    return root / f"{key}.cubin"

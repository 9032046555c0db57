"""load_extension: torch's load_inline, built once per source in the shared cache."""

from __future__ import annotations

import importlib.util
import inspect
import os
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from .. import builds
from . import cache
from .errors import CompileError


def extension_key(name: str, cuda_source: str, cpp_source: str, functions: Sequence[str],
                  options: dict[str, Any]) -> str:
    # PKB_CUDA_ARCH: the build stage compiles for the GPUs without seeing them (worker/prebuild.py).
    arch = os.environ.get("PKB_CUDA_ARCH", "")
    if not arch and torch.cuda.is_available():
        arch = "sm_%d%d" % torch.cuda.get_device_capability()
    return cache.cache_key("load_inline", name, cuda_source, cpp_source, list(functions),
                           options, arch, torch.__version__, str(torch.version.cuda))


def load_extension(name: str, cuda_source: str, cpp_source: str = "",
                   functions: Optional[Sequence[str]] = None, *,
                   extra_cuda_cflags: Sequence[str] = ("-O3",),
                   extra_cflags: Sequence[str] = ("-O3",),
                   extra_ldflags: Sequence[str] = (),
                   no_implicit_headers: bool = False, verbose: bool = False) -> Any:
    """Build (once for all ranks) and import a C++/CUDA extension; returns the module.

    Same meaning as ``torch.utils.cpp_extension.load_inline``. The build directory is
    ``<cache>/ext/<name>-<hash>``, locked while building, so N ranks cause one build.
    ``no_implicit_headers=True`` (torch >= 2.9) skips the torch headers torch would inject into
    the .cu, which cuts nvcc time several-fold; the .cu then holds kernels and an
    ``extern "C"`` launcher that the C++ source declares.
    """
    from torch.utils.cpp_extension import load_inline

    functions = list(functions or [])
    options = {"cuda": list(extra_cuda_cflags), "c": list(extra_cflags),
               "ld": list(extra_ldflags), "no_implicit_headers": no_implicit_headers}
    key = extension_key(name, cuda_source, cpp_source, functions, options)
    prebuilt = _prebuilt(name, key)
    if prebuilt is not None:
        return prebuilt
    build_dir = cache.cache_dir() / "ext" / f"{name}-{key[:16]}"
    build_dir.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = dict(
        name=f"{name}_{key[:12]}", cpp_sources=[cpp_source], cuda_sources=[cuda_source],
        functions=functions or None, extra_cflags=list(extra_cflags),
        extra_cuda_cflags=list(extra_cuda_cflags), extra_ldflags=list(extra_ldflags),
        build_directory=str(build_dir), verbose=verbose)
    if no_implicit_headers:
        if "no_implicit_headers" not in inspect.signature(load_inline).parameters:
            raise CompileError("no_implicit_headers needs torch >= 2.9", torch.__version__)
        kwargs["no_implicit_headers"] = True
    done = build_dir / "pkb-built"
    start = time.perf_counter()
    built = False
    try:
        with builds.building(f"evaluator.cuda.load_extension({name})"), \
                cache.exclusive(build_dir.with_suffix(".lock")):
            built = not done.exists()
            try:
                module = load_inline(**kwargs)
            except Exception as error:  # torch puts the compiler's output in the message
                raise CompileError(f"extension {name} failed to build", str(error)) from None
            done.touch()
    finally:
        cache.record(time.perf_counter() - start, built=built)
    return module


def _prebuilt(name: str, key: str) -> Any:
    """The module the build stage made for exactly this key, imported from its read-only cache
    (``PKB_KERNEL_SEED``), or None. The key covers the sources, options, arch and toolchain, so a
    prebuilt entry is what this call would have built; ``pkb-built`` is written last."""
    root = os.environ.get("PKB_KERNEL_SEED")
    if not root:
        return None
    built = Path(root) / "ext" / f"{name}-{key[:16]}"
    module_name = f"{name}_{key[:12]}"
    library = built / f"{module_name}.so"
    if not (built / "pkb-built").is_file() or not library.is_file():
        return None
    start = time.perf_counter()
    spec = importlib.util.spec_from_file_location(module_name, library)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cache.record(time.perf_counter() - start, built=False)
    return module

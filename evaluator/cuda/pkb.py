"""ParallelKernelBench's build helper, ``utils.cuda_helpers.compile_cuda_extension``, on ours: a
PKB file's extension is built once for all ranks in the shared cache (``load_extension``) and
timed as a build. The importer's wrapper hands it to the file (portal/runs/pkb/wrapper.py), and
the worker's build stage (worker/prebuild.py) calls it with the same arguments ahead of the
evaluation, so that both arrive at the same cache entry."""

from __future__ import annotations

from typing import Any, Optional, Sequence


def compile_cuda_extension(name: str, cuda_src: str, extra_cuda_cflags: Optional[Sequence[str]] = None,
                           extra_include_paths: Optional[Sequence[str]] = None,
                           extra_ldflags: Optional[Sequence[str]] = None) -> Any:
    from .extension import load_extension

    flags = ["-O3", *(extra_cuda_cflags or []), *("-I" + p for p in (extra_include_paths or []))]
    return load_extension(name, cuda_src, "", extra_cuda_cflags=flags,
                          extra_ldflags=list(extra_ldflags or []))

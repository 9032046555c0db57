"""evaluator.cuda on a machine without a GPU: cache keys, the build lock, CompileError.

The compiler boundary (evaluator.cuda.nvrtc.compile_cubin) is replaced by a fake, so these
tests run anywhere; scripts/gpu/check_symm_mem.py covers the real NVRTC and launches.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import evaluator.cuda as ec
from evaluator.cuda import kernels, nvrtc

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_KERNEL_CACHE", str(tmp_path))
    ec.reset_stats()
    return tmp_path


@pytest.fixture
def fake_compiler(monkeypatch):
    calls = []

    def compile_cubin(source, names, options, arch):
        calls.append((source, list(names), list(options), arch))
        if "syntax error" in source:
            raise nvrtc.CompilerFailed('pkb.cu(1): error: expected a ";"')
        return b"CUBIN:" + source.encode(), {n: n for n in names}, ""

    monkeypatch.setattr(nvrtc, "compile_cubin", compile_cubin)
    return calls


def key(source="k", names=("k",), options=(), arch="sm_90", toolchain="13.0"):
    return kernels.kernel_cache_key(source, list(names), list(options), arch, toolchain)


def test_the_key_is_stable_for_the_same_inputs():
    assert key() == key()


@pytest.mark.parametrize("change", [dict(source="k2"), dict(options=("-DX=1",)),
                                    dict(arch="sm_90a"), dict(toolchain="13.1"),
                                    dict(names=("k", "j"))])
def test_the_key_changes_with_source_options_arch_and_toolchain(change):
    assert key(**change) != key()


def test_the_key_keeps_part_boundaries():
    assert ec.cache.cache_key("ab", "c") != ec.cache.cache_key("a", "bc")


def test_a_second_compile_is_served_from_the_cache(cache, fake_compiler):
    first = kernels.compile_cubin("k", ["k"], arch="sm_90", toolchain="13.0")
    second = kernels.compile_cubin("k", ["k"], arch="sm_90", toolchain="13.0")
    assert first == second
    assert len(fake_compiler) == 1
    stats = ec.compile_stats()
    assert (stats["builds"], stats["hits"]) == (1, 1)
    assert ec.compile_seconds() >= 0.0
    assert list(cache.glob("*.cubin"))


def test_a_failed_compile_raises_compile_error_with_the_log(cache, fake_compiler):
    with pytest.raises(ec.CompileError) as info:
        kernels.compile_cubin("syntax error", ["k"], arch="sm_90", toolchain="13.0")
    assert "expected a" in info.value.compiler_output
    assert "expected a" in str(info.value)


def test_a_failed_compile_is_remembered_so_waiting_ranks_do_not_retry(cache, fake_compiler):
    for _ in range(2):
        with pytest.raises(ec.CompileError):
            kernels.compile_cubin("syntax error", ["k"], arch="sm_90", toolchain="13.0")
    assert len(fake_compiler) == 1


def test_it_rejects_an_empty_kernel_list(cache, fake_compiler):
    with pytest.raises(ValueError):
        kernels.compile_cubin("k", [], arch="sm_90", toolchain="13.0")


RACER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from evaluator.cuda import kernels, nvrtc
    import evaluator.cuda as ec

    def slow_compile(source, names, options, arch):
        with open(sys.argv[2], "a") as log:
            log.write("compiled\\n")
        time.sleep(1.0)
        return b"CUBIN", {n: n for n in names}, ""

    nvrtc.compile_cubin = slow_compile
    while time.time() < float(sys.argv[3]):
        time.sleep(0.005)
    binary, lowered = kernels.compile_cubin("race", ["k"], arch="sm_90", toolchain="13.0")
    assert binary == b"CUBIN" and lowered == {"k": "k"}
    print(int(ec.compile_stats()["builds"]))
""")


@pytest.mark.slow
def test_racing_processes_compile_once_and_all_load_the_result(tmp_path):
    import os
    import time

    script = tmp_path / "racer.py"
    script.write_text(RACER)
    log = tmp_path / "compiles.log"
    env = {**os.environ, "PKB_KERNEL_CACHE": str(tmp_path / "cache")}
    start_at = str(time.time() + 2.0)
    procs = [subprocess.Popen([sys.executable, str(script), str(ROOT), str(log), start_at],
                              env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert log.read_text().count("compiled") == 1
    assert sorted(outs) == ["0", "0", "0", "1"]


def test_python_ints_follow_the_declared_parameter_size():
    import ctypes

    assert isinstance(kernels._to_ctypes(5, 4, "k", 0), ctypes.c_int32)
    assert isinstance(kernels._to_ctypes(5, 8, "k", 0), ctypes.c_int64)
    assert isinstance(kernels._to_ctypes(5, None, "k", 0), ctypes.c_int64)
    assert isinstance(kernels._to_ctypes(2**32 - 1, 4, "k", 0), ctypes.c_uint32)
    with pytest.raises(OverflowError):
        kernels._to_ctypes(2**40, 4, "k", 0)


def test_python_floats_follow_the_declared_parameter_size():
    import ctypes

    assert isinstance(kernels._to_ctypes(1.5, 4, "k", 0), ctypes.c_float)
    assert isinstance(kernels._to_ctypes(1.5, 8, "k", 0), ctypes.c_double)
    assert isinstance(kernels._to_ctypes(1.5, None, "k", 0), ctypes.c_float)


def test_ctypes_values_pass_through_but_must_match_the_size():
    import ctypes

    value = ctypes.c_int16(3)
    assert kernels._to_ctypes(value, 2, "k", 0) is value
    with pytest.raises(TypeError):
        kernels._to_ctypes(value, 8, "k", 0)


def test_cpu_tensors_are_refused():
    import torch

    with pytest.raises(TypeError):
        kernels._to_ctypes(torch.zeros(2), 8, "k", 0)


def test_peer_pointers_become_an_int64_tensor():
    import torch

    class Handle:
        buffer_ptrs = [0x7F0000000000, 0x7F0000100000]

    ptrs = ec.peer_pointers(Handle(), device="cpu")
    assert ptrs.dtype == torch.int64
    assert ptrs.tolist() == Handle.buffer_ptrs


def test_a_failed_extension_build_raises_compile_error(cache, monkeypatch):
    import torch.utils.cpp_extension as cpp

    def failing_load_inline(**kwargs):
        raise RuntimeError("Error building extension 'x': nvcc: error: bad thing")

    monkeypatch.setattr(cpp, "load_inline", failing_load_inline)
    with pytest.raises(ec.CompileError) as info:
        ec.load_extension("x", "__global__ void k() {}", "", ["f"])
    assert "bad thing" in info.value.compiler_output


def test_extension_builds_share_one_directory_per_source(cache, monkeypatch):
    import torch.utils.cpp_extension as cpp

    seen = []
    monkeypatch.setattr(cpp, "load_inline", lambda **kw: seen.append(kw) or object())
    ec.load_extension("x", "src", "", ["f"])
    ec.load_extension("x", "src", "", ["f"])
    ec.load_extension("x", "other src", "", ["f"])
    dirs = [kw["build_directory"] for kw in seen]
    assert dirs[0] == dirs[1] != dirs[2]
    assert ec.compile_stats()["builds"] == 2

"""Collective bandwidth over torch.distributed, one process per rank (nccl-tests conventions).

S is the buffer size nccl-tests names: all_reduce the buffer, all_gather the gathered output,
reduce_scatter the full input, all_to_all one rank's send buffer. algbw = S / t;
busbw = algbw x (2(n-1)/n for all_reduce, (n-1)/n for the other three; ``bus_factor`` also
has broadcast, reduce, gather, scatter and send/recv for sweeps). t is the median of
per-iteration times on each rank (CUDA events on GPU, wall clock on CPU), then the max over ranks.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
import traceback
import warnings
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from contract.gpu import NO_MULTICAST_ENV
from .timers import cuda_median_ms

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor (its PERFORMANCE.md): busbw = algbw x this."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("broadcast", "reduce", "send_recv"):
        return 1.0
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    raise ValueError(f"no bus-bandwidth factor for {op!r}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _op(name: str, n: int, nbytes: int, dtype: torch.dtype,
        device: torch.device) -> Callable[[], Any]:
    numel = nbytes // torch.empty((), dtype=dtype).element_size()
    numel -= numel % n
    big = torch.randn(numel, device=device).to(dtype)
    part = torch.randn(numel // n, device=device).to(dtype)
    out = torch.empty_like(big)
    if name == "all_reduce":
        return lambda: dist.all_reduce(big)
    if name == "all_gather":
        return lambda: dist.all_gather_into_tensor(big, part)
    if name == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(part, big)
    if name == "all_to_all":
        return lambda: dist.all_to_all_single(out, big)
    raise ValueError(name)


def _iterations(nbytes: int) -> tuple[int, int]:
    """(warm-up, timed) iterations: fewer for large buffers."""
    if nbytes >= 256 * 2**20:
        return 3, 10
    if nbytes >= 16 * 2**20:
        return 5, 20
    return 10, 40


def _time_gpu(fn: Callable[[], Any], warmup: int, iters: int) -> float:
    return cuda_median_ms(fn, warmup, iters, align=True) * 1e3


def _time_cpu(fn: Callable[[], Any], warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    dist.barrier()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _worker(rank: int, world: int, port: int, backend: str, ops: list[str], sizes: list[int],
            dtype_name: str, queue: Any) -> None:
    try:
        os.environ.update(NO_MULTICAST_ENV)
        warnings.filterwarnings("ignore", category=FutureWarning)  # 2.13 renames all_gather
        cuda = backend == "nccl"
        device = torch.device("cuda", rank) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        kwargs: dict[str, Any] = {"device_id": device} if cuda else {}
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, **kwargs)
        dtype = getattr(torch, dtype_name)
        timer = _time_gpu if cuda else _time_cpu
        results = {}
        for op in ops:
            for nbytes in sizes:
                fn = _op(op, world, nbytes, dtype, device)
                warmup, iters = _iterations(nbytes)
                if not cuda:
                    warmup, iters = min(warmup, 3), min(iters, 10 if nbytes < 2**24 else 4)
                results[(op, nbytes)] = timer(fn, warmup, iters)
                del fn
        queue.put((rank, results, None))
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        queue.put((rank, None, traceback.format_exc()))


def measure(backend: str, world: int, sizes: list[int], dtype: torch.dtype,
            ops: tuple[str, ...] = OPS, timeout_s: float = 240.0) -> dict[str, Any]:
    """Spawn ``world`` local ranks and measure every (op, size); returns the profile block."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    dtype_name = str(dtype).removeprefix("torch.")
    procs = [ctx.Process(target=_worker, args=(r, world, port, backend, list(ops), sizes,
                                               dtype_name, queue), daemon=True)
             for r in range(world)]
    saved = {k: os.environ.get(k) for k in NO_MULTICAST_ENV}
    os.environ.update(NO_MULTICAST_ENV)  # inherited by the spawned ranks
    try:
        for proc in procs:
            proc.start()
        per_rank: dict[int, dict] = {}
        deadline = time.monotonic() + timeout_s
        while len(per_rank) < world:
            rank, results, error = queue.get(timeout=max(1.0, deadline - time.monotonic()))
            if error:
                raise RuntimeError(f"rank {rank} failed:\n{error}")
            per_rank[rank] = results
        for proc in procs:
            proc.join(timeout=30)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    table: dict[str, list[dict[str, float]]] = {}
    for op in ops:
        rows = []
        for nbytes in sizes:
            time_us = max(per_rank[r][(op, nbytes)] for r in range(world))
            algbw = nbytes / (time_us * 1e-6) / 1e9
            rows.append({"bytes": nbytes, "time_us": _sig(time_us),
                         "algbw_gbps": _sig(algbw),
                         "busbw_gbps": _sig(algbw * bus_factor(op, world))})
        table[op] = rows
    return {"backend": backend, "world_size": world, "dtype": dtype_name,
            "method": "median per-rank iteration time, max over ranks; nccl-tests bus factors",
            "results": table}


def _sig(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def best_busbw(block: dict[str, Any]) -> float:
    return max((row["busbw_gbps"] for rows in block["results"].values() for row in rows),
               default=0.0)

"""``pkb probe``: measure this machine and write a hardware profile (schema 1.0).

A profile records what the roofline and the prompt need: link, memory and arithmetic ceilings
measured here, with the machine and software they were measured on. See docs/hardware.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from . import collectives, smi
from contract.gpu import NO_MULTICAST_ENV
from .timers import cuda_median_ms

SCHEMA_VERSION = "1.0"
GPU_SIZES = [2**10, 2**16, 2**20, 2**24, 2**27, 2**29]
CPU_SIZES = [2**10, 2**16, 2**20, 2**24]
MIB = 2**20


# ---------------------------------------------------------------------------- host

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> Optional[float]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def host_info() -> dict[str, Any]:
    return {"cpu_model": _cpu_model(), "cores": os.cpu_count(), "memory_gib": _memory_gib(),
            "memory_note": "MemTotal when probed; on the lent microVMs it grows with use",
            "hostname": platform.node(), "os": platform.platform()}


def software_info() -> dict[str, Optional[str]]:
    info: dict[str, Optional[str]] = {"python": platform.python_version(),
                                      "torch": torch.__version__,
                                      "cuda": torch.version.cuda, "nccl": None, "driver": None}
    if torch.cuda.is_available():
        try:
            version = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, version)) if isinstance(version, tuple) \
                else str(version)
        except Exception:
            pass
        text = smi.run_smi("--query-gpu=driver_version", "--format=csv,noheader")
        info["driver"] = text.splitlines()[0].strip() if text else None
    return info


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _median_time(fn: Callable[[], Any], sync: Callable[[], None], reps: int,
                 batches: int = 3) -> float:
    """Median over batches of (wall seconds of ``reps`` calls) / reps."""
    fn()
    sync()
    results = []
    for _ in range(batches):
        sync()
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        results.append((time.perf_counter() - start) / reps)
    return statistics.median(results)


# ---------------------------------------------------------------------------- GPU

def gpu_info(count: int) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0)
    return {"model": props.name, "count": count, "sms": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "l2_mib": round(l2 / MIB, 1) if l2 else None,
            "compute_capability": f"{props.major}.{props.minor}"}


def hbm_copy(nbytes: int = 2**30) -> dict[str, Any]:
    src = torch.randn(nbytes // 4, device="cuda:0")
    dst = torch.empty_like(src)
    ms = cuda_median_ms(lambda: dst.copy_(src), 3, 20)
    del src, dst
    return {"bytes": nbytes, "time_us": round(ms * 1e3, 1),
            "read_plus_written_gbps": round(2 * nbytes / ms / 1e6, 1),
            "bytes_once_gbps": round(nbytes / ms / 1e6, 1),
            "method": "torch copy_ of a 1 GiB fp32 tensor on GPU 0, median of 20 (CUDA events)"}


def matmul_tflops(n: int = 8192) -> dict[str, Any]:
    result: dict[str, Any] = {"shape": [n, n, n], "data": "torch.randn"}
    saved_tf32 = torch.backends.cuda.matmul.allow_tf32
    saved_precision = torch.get_float32_matmul_precision()
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        for dtype, iters in ((torch.bfloat16, 20), (torch.float32, 5)):
            a = torch.randn(n, n, device="cuda:0").to(dtype)
            b = torch.randn(n, n, device="cuda:0").to(dtype)
            ms = cuda_median_ms(lambda: a @ b, 3, iters)
            result[str(dtype).removeprefix("torch.")] = round(2 * n**3 / ms / 1e9, 1)
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved_tf32
        torch.set_float32_matmul_precision(saved_precision)
    result["float32_note"] = "tf32 off (allow_tf32=False, precision 'highest')"
    return result


def _sync_all(count: int) -> None:
    for d in range(count):
        torch.cuda.synchronize(d)


def p2p_bandwidth(count: int, nbytes: int = 256 * MIB) -> dict[str, Any]:
    """Copy-engine peer copies: each pair alone, then every GPU to all peers at once."""
    bufs = [torch.randn(nbytes // 4, device=f"cuda:{d}") for d in range(count)]
    recv = {(i, j): torch.empty(nbytes // 4, device=f"cuda:{j}")
            for i in range(count) for j in range(count) if i != j}
    streams = {key: (torch.cuda.Stream(device=key[0]), torch.cuda.Stream(device=key[1]))
               for key in recv}

    def copy(i: int, j: int) -> None:
        src_stream, dst_stream = streams[(i, j)]
        # Both devices' current streams are fresh per pair, so torch's cross-device copy does
        # not serialise it behind other copies into the same destination.
        with torch.cuda.stream(src_stream), torch.cuda.stream(dst_stream):
            recv[(i, j)].copy_(bufs[i])

    matrix: list[list[Optional[float]]] = [[None] * count for _ in range(count)]
    peer_access = [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(count)]
                   for i in range(count)]
    for (i, j) in recv:
        seconds = _median_time(lambda: copy(i, j), lambda: _sync_all(count), reps=8)
        matrix[i][j] = round(nbytes / seconds / 1e9, 1)

    def all_pairs() -> None:
        for key in recv:
            copy(*key)

    concurrent = None
    if count > 1:
        seconds = _median_time(all_pairs, lambda: _sync_all(count), reps=4)
        concurrent = round((count - 1) * nbytes / seconds / 1e9, 1)
    del bufs, recv
    return {"bytes": nbytes, "unidirectional_gbps": matrix, "peer_access": peer_access,
            "concurrent_all_peer_egress_gbps": concurrent,
            "method": "torch copy_ between devices (copy engine, peer access on), host clock "
                      "over 8 copies, median of 3; concurrent: every ordered pair at once on "
                      "its own streams, per-GPU egress = (n-1) x bytes / time"}


def probe_gpu(world_size: Optional[int] = None, profile_id: Optional[str] = None,
              sizes: Optional[list[int]] = None, command: str = "") -> dict[str, Any]:
    if not torch.cuda.is_available():
        raise RuntimeError("probe_gpu: no CUDA device visible")
    os.environ.update(NO_MULTICAST_ENV)  # never NVLink multicast, here or in children
    count = world_size or torch.cuda.device_count()
    started = time.perf_counter()
    nccl = collectives.measure("nccl", count, sizes or GPU_SIZES, torch.bfloat16) \
        if count > 1 else None
    topo_text = smi.run_smi("topo", "-m") or ""
    nvlink_text = smi.run_smi("nvlink", "-s") or ""
    nvlink = smi.parse_nvlink_status(nvlink_text)
    gpus = gpu_info(count)
    p2p = p2p_bandwidth(count) if count > 1 else None
    hbm = hbm_copy()
    mm = matmul_tflops()
    links = [g["links"] for g in nvlink.values()]
    interconnect = "nvlink" if links and min(links) > 0 else ("pcie" if count > 1 else "single")
    model = _slug(gpus["model"].replace("NVIDIA", "")).split("-")[0] or "gpu"
    profile: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": profile_id or f"{model}-x{count}-{interconnect}",
        "kind": "gpu",
        "measured_at": _now(),
        "command": command,
        "host": host_info(),
        "gpus": gpus,
        "topology": smi.parse_topology(topo_text),
        "nvlink": {"per_gpu": nvlink,
                   "per_link_gbps": max((g["per_link_gbps"] for g in nvlink.values()), default=None),
                   "nominal_gbps_per_direction": min(
                       (g["nominal_gbps_per_direction"] for g in nvlink.values()), default=None),
                   "raw": nvlink_text},
        "p2p_bandwidth_gbps": p2p,
        "nccl": nccl,
        "hbm_copy_gbps": hbm,
        "matmul_tflops": mm,
        "software": software_info(),
    }
    link_candidates = {"p2p concurrent all-peer egress": (p2p or {}).get(
        "concurrent_all_peer_egress_gbps") or 0.0,
        "best NCCL busbw": collectives.best_busbw(nccl) if nccl else 0.0}
    best = max(link_candidates, key=lambda k: link_candidates[k])
    profile["roofline"] = {
        "link_gbps": link_candidates[best],
        "hbm_gbps": hbm["read_plus_written_gbps"],
        "tflops": {"bfloat16": mm["bfloat16"], "float32": mm["float32"]},
        "note": f"link_gbps: per-GPU per-direction, the larger of {link_candidates} "
                f"(chose {best}); hbm_gbps: device copy counting bytes read + written; "
                "tflops: dense 8192^3 matmul on random data (float32 with tf32 off)",
    }
    profile["probe_seconds"] = round(time.perf_counter() - started, 1)
    return profile


# ---------------------------------------------------------------------------- CPU

def memcpy_gbps(nbytes: int = 256 * MIB) -> dict[str, Any]:
    src = torch.randn(nbytes // 4)
    dst = torch.empty_like(src)
    seconds = _median_time(lambda: dst.copy_(src), lambda: None, reps=5)
    return {"bytes": nbytes, "read_plus_written_gbps": round(2 * nbytes / seconds / 1e9, 2),
            "bytes_once_gbps": round(nbytes / seconds / 1e9, 2),
            "threads": torch.get_num_threads(),
            "method": "torch copy_ of a 256 MiB fp32 tensor, host clock, median of 3 x 5"}


def cpu_matmul_gflops(n: int = 2048) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": [n, n, n], "threads": torch.get_num_threads()}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        seconds = _median_time(lambda: a @ b, lambda: None, reps=2)
        out[str(dtype).removeprefix("torch.")] = round(2 * n**3 / seconds / 1e9, 1)
    return out


def probe_cpu(world_size: int = 2, profile_id: Optional[str] = None,
              sizes: Optional[list[int]] = None, command: str = "") -> dict[str, Any]:
    started = time.perf_counter()
    gloo = collectives.measure("gloo", world_size, sizes or CPU_SIZES, torch.float32,
                               ops=("all_reduce", "all_gather"))
    mem = memcpy_gbps()
    mm = cpu_matmul_gflops()
    host = host_info()
    model = _slug(host["cpu_model"]) or "cpu"
    profile: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": profile_id or f"cpu-gloo-{model}-{host['cores']}c",
        "kind": "cpu",
        "measured_at": _now(),
        "command": command,
        "host": host,
        "cores": host["cores"],
        "world_size": world_size,
        "memcpy_gbps": mem,
        "gloo": gloo,
        "matmul_gflops": mm,
        "software": software_info(),
    }
    best_link = collectives.best_busbw(gloo)
    profile["roofline"] = {
        "link_gbps": best_link,
        "hbm_gbps": mem["read_plus_written_gbps"],
        "tflops": {"bfloat16": round(mm["bfloat16"] / 1e3, 4),
                   "float32": round(mm["float32"] / 1e3, 4)},
        "note": "link_gbps: best gloo busbw over the sizes measured, per rank; hbm_gbps: memcpy "
                "counting bytes read + written; tflops: 2048^3 matmul on random data in the "
                "probe process (ranks share the cores, so these are generous ceilings)",
    }
    profile["probe_seconds"] = round(time.perf_counter() - started, 1)
    return profile


# ---------------------------------------------------------------------------- entry points

def default_out_path(profile: dict[str, Any]) -> Path:
    from .profiles import hardware_dir

    return hardware_dir() / f"{profile['id']}.json"


def probe(device: str = "cuda", out_path: Optional[str | Path] = None, *,
          world_size: Optional[int] = None, profile_id: Optional[str] = None,
          command: str = "") -> dict[str, Any]:
    """Measure this machine for ``device`` ("cuda"/"gpu" or "cpu") and write the profile JSON."""
    command = command or "pkb probe --device " + device
    if device in ("cuda", "gpu"):
        profile = probe_gpu(world_size, profile_id, command=command)
    elif device == "cpu":
        profile = probe_cpu(world_size or 2, profile_id, command=command)
    else:
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    path = Path(out_path) if out_path else default_out_path(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=2) + "\n")
    return profile


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pkb probe", description=__doc__)
    parser.add_argument("--device", choices=("cuda", "cpu"),
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", help="output path (default: hardware/<id>.json)")
    parser.add_argument("--id", dest="profile_id", help="profile id (default from model+count)")
    parser.add_argument("--world-size", type=int,
                        help="GPUs to use (default all) or gloo ranks on CPU (default 2)")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    command = "pkb probe " + " ".join(argv if argv is not None else sys.argv[1:])
    profile = probe(args.device, args.out, world_size=args.world_size,
                    profile_id=args.profile_id, command=command.strip())
    print(json.dumps({"id": profile["id"], "roofline": profile["roofline"],
                      "probe_seconds": profile["probe_seconds"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ranks of the benchmarks that time collectives outside the harness: each in a process group
of its own (no sandbox, no judge), NCCL on GPUs and gloo on the processor."""

from __future__ import annotations

import argparse
import socket

import torch
import torch.distributed as dist


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join(rank: int, device_kind: str, world_size: int, port: int) -> torch.device:
    """This rank's device, its process group initialised on it."""
    cuda = device_kind == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world_size, **({"device_id": device} if cuda else {}))
    return device


def setting_arguments(parser: argparse.ArgumentParser) -> None:
    """What a benchmark's ranks run: a problem, at a size, on so many ranks of a device kind."""
    parser.add_argument("--problem", default="all-reduce")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--size", default="small")

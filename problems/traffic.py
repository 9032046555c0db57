"""Roofline traffic of the standard collectives: bytes the busiest rank must move over links.

These are the lower bounds of the best known algorithms (bandwidth-optimal rings or direct
all-pairs exchange over a full NVLink mesh), the same counts nccl-tests turns into bus bandwidth.
``nbytes`` is always the size of the full (unsharded) buffer the formula names.
"""

from __future__ import annotations


def all_reduce(nbytes: float, n: int) -> float:
    return 2 * (n - 1) / n * nbytes


def all_gather(output_bytes: float, n: int) -> float:
    return (n - 1) / n * output_bytes


def reduce_scatter(input_bytes: float, n: int) -> float:
    return (n - 1) / n * input_bytes


def all_to_all(input_bytes: float, n: int) -> float:
    return (n - 1) / n * input_bytes


def broadcast(nbytes: float, n: int) -> float:
    # The root must send every byte at least once; relays through peers keep it at one copy.
    return nbytes if n > 1 else 0.0


def reduce(nbytes: float, n: int) -> float:
    return nbytes if n > 1 else 0.0


def gather(output_bytes: float, n: int) -> float:
    # The root receives every other rank's part.
    return (n - 1) / n * output_bytes


def scatter(input_bytes: float, n: int) -> float:
    return (n - 1) / n * input_bytes


def send_recv(nbytes: float) -> float:
    return nbytes

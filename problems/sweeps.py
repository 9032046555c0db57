"""Sweep axes the problems share (``Problem.sweep``; docs/sweeps.md).

Plain collectives vary their buffer from 4 KiB to 256 MiB; tensor-parallel GEMM problems vary
their token count M, the message being the tensor the collective moves.
"""

from __future__ import annotations

from problems.spec import SWEEP_BYTES, Setting, Sweep

# GEMM problems: below ~256 KiB of activations the matmul is a handful of rows per rank.
GEMM_SWEEP_BYTES: tuple[int, ...] = SWEEP_BYTES[3:]


def _itemsize(s: Setting) -> float:
    return float(s.itemsize)


def _world(s: Setting) -> int:
    return s.world_size


def elements(collective: str, *, sharded: bool = False, param: str = "numel") -> Sweep:
    """A flat buffer of ``param`` elements; ``sharded``: split evenly over the ranks."""
    return Sweep(param=param, collective=collective, unit_bytes=_itemsize,
                 multiple=_world if sharded else (lambda s: 1))


def rows(collective: str, *, param: str = "rows", width: str = "hidden") -> Sweep:
    """``param`` rows of ``width`` elements, split evenly over the ranks."""
    return Sweep(param=param, collective=collective, unit_bytes=lambda s: s[width] * s.itemsize,
                 multiple=_world)


def all_to_all_elements() -> Sweep:
    """One rank's send buffer: world size chunks of whole ``hidden``-wide rows."""
    return Sweep(param="numel", collective="all_to_all", unit_bytes=_itemsize,
                 multiple=lambda s: s.world_size * s["hidden"])


def gemm_tokens(collective: str, *, param: str, row_bytes: str, per: str | None = None) -> Sweep:
    """M of a tensor-parallel GEMM: ``param`` (tokens or sequence) in multiples of the world size,
    the message one ``row_bytes``-wide row per token (times ``per``, e.g. the batch, if given)."""
    def unit(s: Setting) -> float:
        return s[row_bytes] * s.itemsize * (s[per] if per else 1)
    return Sweep(param=param, collective=collective, unit_bytes=unit, multiple=_world,
                 bytes=GEMM_SWEEP_BYTES)

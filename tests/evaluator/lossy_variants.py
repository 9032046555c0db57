"""Candidates built from a problem's own reference, for testing the judge on every summing problem.

Each variant runs the reference on transformed copies of the rank's inputs, so it works for any
problem without writing 45 candidates by hand: ``fp32`` accumulates in float32 (the honest
implementation a kernel author would write for a 16-bit problem), the others are lossy in the
ways a "faster than NCCL" kernel could be. ``run_world`` runs every problem with every variant
in one gloo rank group per world size and saves, per rank, the native outputs, the evaluator's
own exact-answer records (``evaluator.exact``) and each variant's outputs.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import problems
from evaluator.exact import exact_outputs, residual_record
from evaluator.rank_runner import build_groups

Transform = Callable[[torch.Tensor, int], torch.Tensor]  # (floating input, rank) -> what the variant uses
SEED = 3
SCALE = 1 + 2**-7


def _fp32(t: torch.Tensor, rank: int) -> torch.Tensor:
    return t.to(torch.float32, copy=True)


def _grid(t: torch.Tensor, rank: int) -> torch.Tensor:
    return torch.round(_fp32(t, rank) * 8) / 8


def _fp8(t: torch.Tensor, rank: int) -> torch.Tensor:
    """float8 e4m3 with one scale per tensor, as a wire format would send it."""
    x = _fp32(t, rank)
    scale = float(x.abs().max()) / 448 or 1.0
    return (x / scale).to(torch.float8_e4m3fn).to(torch.float32) * scale


def _drop_bits(t: torch.Tensor, rank: int) -> torch.Tensor:
    """The lowest mantissa bits zeroed: 2 of a 16-bit type's, 8 of float32's (a 24-bit wire)."""
    if t.dtype == torch.float32:
        return (t.view(torch.int32) & ~0xFF).view(torch.float32).clone()
    if t.dtype in (torch.bfloat16, torch.float16):
        return (t.view(torch.int16) & ~0x3).view(t.dtype).to(torch.float32)
    return _fp32(t, rank)


def _scaled(t: torch.Tensor, rank: int) -> torch.Tensor:
    return _fp32(t, rank) * SCALE if rank == 0 else _fp32(t, rank)


def _bf16(t: torch.Tensor, rank: int) -> torch.Tensor:
    return t.to(torch.bfloat16, copy=True)


TRANSFORMS: dict[str, Transform] = {
    "fp32": _fp32, "grid": _grid, "fp8": _fp8, "drop_bits": _drop_bits, "scaled": _scaled, "bf16": _bf16,
}
LOSSY = ("grid", "fp8", "drop_bits", "scaled", "bf16")
WHAT = {
    "fp32": "inputs upcast to float32, computed, outputs cast back: an honest fp32 accumulation",
    "grid": "inputs rounded to multiples of 1/8",
    "fp8": "inputs through float8 e4m3 (one scale per tensor), as on an fp8 wire",
    "drop_bits": "the 2 lowest mantissa bits of 16-bit inputs (8 of float32 inputs) zeroed",
    "scaled": "rank 0's contribution scaled by 1 + 2^-7",
    "bf16": "everything in bfloat16, where the reference accumulates in float32",
}


class _AllBf16(TorchDispatchMode):
    """Every floating dtype the reference asks for becomes bfloat16. An op with no bf16 kernel
    (QR on CPU) runs in float32 and stores its result in bf16, as a bf16 kernel would."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if kwargs.get("dtype") in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            kwargs["dtype"] = torch.bfloat16
        try:
            return func(*args, **kwargs)
        except (NotImplementedError, RuntimeError) as error:
            if "BFloat16" not in str(error):
                raise
        wide = tree_map(lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 else v,
                        (args, kwargs))
        out = func(*wide[0], **wide[1])
        return tree_map(lambda v: v.bfloat16() if isinstance(v, torch.Tensor) and v.is_floating_point() else v, out)


def _transformed(value: Any, transform: Transform, rank: int) -> Any:
    if isinstance(value, torch.Tensor):
        return transform(value, rank) if value.is_floating_point() else value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_transformed(item, transform, rank) for item in value)
    if isinstance(value, dict):
        return {key: _transformed(item, transform, rank) for key, item in value.items()}
    return value


def _as_list(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _variant(name: str, call: Callable[[dict[str, Any]], Any], inputs: dict[str, Any],
             native: list[torch.Tensor], rank: int) -> list[torch.Tensor]:
    moved = _transformed(inputs, TRANSFORMS[name], rank)
    if name == "bf16":
        with _AllBf16():
            outputs = _as_list(call(moved))
    else:
        outputs = _as_list(call(moved))
    # Back to the dtypes the reference returns: the judge checks dtypes before values.
    return [o.to(n.dtype) if o.is_floating_point() and n.is_floating_point() else o
            for o, n in zip(outputs, native)]


def _rank(rank: int, world_size: int, slugs: list[str], out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(f"{out}/store", world_size), rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=300))
    saved: dict[str, Any] = {}
    for slug in slugs:
        problem = problems.get(slug)
        groups = build_groups(problem, world_size, rank)
        case = problem.case(world_size, "small", problem.default_dtype, rank=rank, seed=SEED, device="cpu")
        inputs = problem.make_inputs(case)
        call = lambda given: problem.reference(**given, **groups)  # noqa: E731
        exact = exact_outputs(call, inputs)  # first: references may overwrite inputs they own
        native = _as_list(call(_transformed(inputs, lambda t, r: t.clone(), rank)))
        variants = {name: _variant(name, call, inputs, native, rank) for name in TRANSFORMS}
        saved[slug] = {"native": native, "exact": residual_record(native, exact), "variants": variants}
    torch.save(saved, f"{out}/rank{rank}.pt")


def run_world(world_size: int, slugs: list[str], out: Path) -> list[dict[str, Any]]:
    """Every problem in ``slugs`` with every variant, in one gloo group; per rank: {slug: record}."""
    out.mkdir(parents=True, exist_ok=True)
    # Ranks forked from a server that imported torch and this module once per test process (as
    # the evaluator's zygote does for its ranks): eight spawned ranks were eight imports of torch.
    mp.set_forkserver_preload([__name__])
    mp.start_processes(_rank, args=(world_size, slugs, str(out)), nprocs=world_size, start_method="forkserver")
    return [torch.load(out / f"rank{rank}.pt", weights_only=False) for rank in range(world_size)]

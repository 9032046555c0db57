"""The problem format: what one module of the suite declares.

Every problem module defines ``PROBLEM = Problem(...)``. The harness (``evaluator``) reads
these fields and nothing else, so a problem never builds process groups, times anything or
compares outputs itself. See problems/README.md for the authoring guide.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

CATEGORIES = (
    "collective", "tensor", "sequence", "context", "pipeline", "data", "expert",
    "fsdp_zero", "vocab", "graph", "spatial", "other",
)
COLLECTIVES = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
    "gather", "scatter", "send_recv",
)
SIZE_PRESETS = ("small", "default")
DTYPE_NAMES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def dtype_name(dtype: torch.dtype) -> str:
    for name, value in DTYPE_NAMES.items():
        if value == dtype:
            return name
    raise ValueError(f"unsupported dtype {dtype}; use one of {sorted(DTYPE_NAMES)}")


@dataclass(frozen=True)
class Source:
    """The public code a problem is modeled on."""

    codebase: str  # e.g. "Megatron-LM"
    function: str  # file and function, e.g. "megatron/core/tensor_parallel/mappings.py: _gather_along_first_dim"
    url: str  # the codebase's public repository


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


def tolerances(**by_dtype: tuple[float, float]) -> dict[torch.dtype, Tolerance]:
    """``tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5))`` -> {dtype: Tolerance}."""
    return {DTYPE_NAMES[name]: Tolerance(*pair) for name, pair in by_dtype.items()}


@dataclass(frozen=True)
class Traffic:
    """Roofline traffic of the busiest rank for one call.

    link_bytes: bytes that rank must send or receive (the larger of the two) over the GPU
    interconnect with the best known algorithm; hbm_bytes: device-memory bytes it must read plus
    write at least once; flops: floating-point operations it must perform.
    """

    link_bytes: float
    hbm_bytes: float
    flops: float = 0.0


@dataclass(frozen=True)
class Setting:
    """Everything that fixes the shapes of one run: world size, size preset and dtype."""

    world_size: int
    size: str
    dtype: torch.dtype
    params: Mapping[str, Any]

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


def _derive_seed(*parts: object) -> int:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class Case(Setting):
    """One rank's view of one trial: the Setting plus rank, seed and device.

    The random helpers derive every tensor from (seed, stream name, rank) so that inputs are
    random, differ between trial seeds, and are identical when re-run with the same seed.
    ``shared=True`` draws the same values on every rank (replicated weights, or a global tensor
    that each rank slices). On the meta device they return empty tensors of the right shape,
    which is how the portal lists shapes without allocating.
    """

    rank: int = 0
    seed: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    # Mixed into this rank's own streams, never the shared ones: in an evaluation each rank gets a
    # secret of its own, so knowing the seed is not enough to rebuild a peer's inputs.
    salt: str = ""

    def generator(self, stream: str, *, shared: bool = False) -> torch.Generator:
        owner = "shared" if shared else f"rank{self.rank}" + (f":{self.salt}" if self.salt else "")
        gen = torch.Generator(device=self.device)
        gen.manual_seed(_derive_seed(self.seed, stream, owner))
        return gen

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    def randn(self, *shape: int, stream: str, shared: bool = False,
              dtype: torch.dtype | None = None, std: float = 1.0) -> torch.Tensor:
        dtype = dtype or self.dtype
        if self.is_meta:
            return torch.empty(shape, dtype=dtype, device="meta")
        values = torch.randn(shape, generator=self.generator(stream, shared=shared),
                             device=self.device, dtype=torch.float32)
        return (values * std).to(dtype) if std != 1.0 else values.to(dtype)

    def rand(self, *shape: int, stream: str, shared: bool = False,
             dtype: torch.dtype | None = None, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
        dtype = dtype or self.dtype
        if self.is_meta:
            return torch.empty(shape, dtype=dtype, device="meta")
        values = torch.rand(shape, generator=self.generator(stream, shared=shared),
                            device=self.device, dtype=torch.float32)
        return (low + (high - low) * values).to(dtype)

    def randint(self, low: int, high: int, *shape: int, stream: str, shared: bool = False,
                dtype: torch.dtype = torch.int64) -> torch.Tensor:
        if self.is_meta:
            return torch.empty(shape, dtype=dtype, device="meta")
        return torch.randint(low, high, shape, generator=self.generator(stream, shared=shared),
                             device=self.device, dtype=dtype)

    def randperm(self, n: int, *, stream: str, shared: bool = False) -> torch.Tensor:
        if self.is_meta:
            return torch.empty((n,), dtype=torch.int64, device="meta")
        return torch.randperm(n, generator=self.generator(stream, shared=shared), device=self.device)


GroupLayout = dict[str, list[list[int]]]


def world_group(world_size: int) -> GroupLayout:
    """The default: one group of every rank, passed to the reference as ``group``."""
    return {"group": [list(range(world_size))]}


@dataclass(frozen=True)
class Problem:
    id: int  # stable: never reused, never renumbered
    slug: str
    title: str
    description: str  # what the real code does and why its communication matters
    categories: tuple[str, ...]
    source: Source
    collectives: tuple[str, ...]
    reference: Callable[..., Any]
    make_inputs: Callable[[Case], dict[str, Any]]
    sizes: Mapping[str, Mapping[str, Any]]  # preset name -> shape parameters
    tolerances: Mapping[torch.dtype, Tolerance]
    traffic: Callable[[Setting], Traffic]
    dtypes: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float32)  # the first is the default
    world_sizes: tuple[int, ...] = (2, 4, 8)
    world_size_note: str = ""  # why a world size is missing, when one is
    process_groups: Callable[[int], GroupLayout] = world_group
    may_overwrite: tuple[str, ...] = ()  # inputs the real code updates in place
    tags: tuple[str, ...] = ()  # free-form: "backward", "inference", "latency", ...

    @property
    def default_dtype(self) -> torch.dtype:
        return self.dtypes[0]

    def setting(self, world_size: int, size: str = "default",
                dtype: torch.dtype | None = None) -> Setting:
        self.check_setting(world_size, size, dtype)
        return Setting(world_size, size, dtype or self.default_dtype, self.sizes[size])

    def case(self, world_size: int, size: str, dtype: torch.dtype | None, *, rank: int,
             seed: int, device: torch.device | str, salt: str = "") -> Case:
        self.check_setting(world_size, size, dtype)
        return Case(world_size, size, dtype or self.default_dtype, self.sizes[size],
                    rank=rank, seed=seed, device=torch.device(device), salt=salt)

    def check_setting(self, world_size: int, size: str, dtype: torch.dtype | None) -> None:
        if world_size not in self.world_sizes:
            why = f" ({self.world_size_note})" if self.world_size_note else ""
            raise ValueError(f"{self.slug} supports world sizes {list(self.world_sizes)}, "
                             f"not {world_size}{why}")
        if size not in self.sizes:
            raise ValueError(f"{self.slug} has size presets {sorted(self.sizes)}, not {size!r}")
        if dtype is not None and dtype not in self.dtypes:
            names = [dtype_name(d) for d in self.dtypes]
            raise ValueError(f"{self.slug} supports dtypes {names}, not {dtype_name(dtype)}")

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return self.tolerances[dtype]


def mib(n_bytes: float) -> float:
    return n_bytes / 2**20


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


__all__ = [
    "CATEGORIES", "COLLECTIVES", "DTYPE_NAMES", "SIZE_PRESETS", "Case", "GroupLayout", "Problem",
    "Setting", "Source", "Tolerance", "Traffic", "ceil_div", "dtype_name", "mib",
    "tolerances", "world_group",
]

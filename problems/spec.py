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


def secret_seed(seed: int, secret: str) -> int:
    """The seed a call's inputs are drawn from: its public seed (the report's, and the one in a
    rank's job) mixed with a secret of the evaluation (the judge's, which no candidate process
    receives; judged in the ranks, one every rank gets on its stdin, evaluator/rank_runner.py). The
    per-rank salts cover a rank's own streams only: a problem's shared streams (replicated weights,
    a global tensor each rank slices) are drawn from (seed, stream) alone, the same on every rank,
    and the seeds are in the candidate's job. A candidate rebuilt every input of every trial and
    timed call of such a problem at import and answered each call from a table, with no work: it
    passed every check at 4.4x (red team, predicts_shared_inputs). 63 bits of seed made from a
    secret leave nothing to rebuild or search for."""
    return _derive_seed(seed, "inputs", secret) if secret else seed


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

# A sweep's default message sizes: 4 KiB to 256 MiB in powers of 4 (nccl-tests' range for NVLink
# collectives, where latency dominates at the low end and bandwidth at the high end).
SWEEP_BYTES: tuple[int, ...] = tuple(4 * 2**10 * 4**i for i in range(9))
SWEEP_PREFIX = "sweep:"


def _one(_: Setting) -> int:
    return 1


@dataclass(frozen=True)
class Sweep:
    """The size axis a message-size sweep varies (``pkb sweep``, docs/sweeps.md).

    One shape parameter, ``param``, changes; every other parameter keeps its value from the
    ``base`` preset. A point of the sweep is named by its target message size in bytes; the
    parameter becomes ``target / unit_bytes(setting)`` rounded to a multiple of
    ``multiple(setting)`` (at least one multiple), so the point's actual message size is
    ``param * unit_bytes``. Message size means what nccl-tests' ``size`` column means for
    ``collective``: the full buffer (all-reduce, broadcast, reduce: the buffer; all-gather and
    gather: the gathered output; reduce-scatter and scatter: the unsharded input; all-to-all: one
    rank's send buffer). Its bus-bandwidth factor follows from ``collective`` too.
    """

    param: str
    collective: str  # one of COLLECTIVES: the convention for bytes and bus bandwidth
    unit_bytes: Callable[[Setting], float]  # message bytes per unit of ``param`` in a setting
    multiple: Callable[[Setting], int] = _one  # ``param`` is rounded to a multiple of this
    bytes: tuple[int, ...] = SWEEP_BYTES  # the default target message sizes
    base: str = "default"  # the preset whose other parameters stay fixed

    def param_value(self, setting: Setting, target_bytes: int) -> int:
        """The parameter's value for a target message size in ``setting`` (its base preset)."""
        step = max(1, int(self.multiple(setting)))
        units = target_bytes / self.unit_bytes(setting)
        return max(step, int(round(units / step)) * step)

    def message_bytes(self, setting: Setting) -> float:
        return setting[self.param] * self.unit_bytes(setting)


def sweep_size(target_bytes: int, base: str | None = None) -> str:
    """The size name of one sweep point: ``sweep:<bytes>``, or ``sweep:<bytes>:<base preset>``."""
    return f"{SWEEP_PREFIX}{int(target_bytes)}" + (f":{base}" if base else "")


def parse_sweep_size(size: str) -> tuple[int, str | None] | None:
    """(target bytes, base preset or None) of a sweep size name; None for a plain preset."""
    if not size.startswith(SWEEP_PREFIX):
        return None
    target, _, base = size[len(SWEEP_PREFIX):].partition(":")
    if not target.isdigit() or int(target) <= 0:
        raise ValueError(f"sweep size {size!r}: expected {SWEEP_PREFIX}<bytes>[:<base preset>] "
                         "with a positive whole number of bytes")
    return int(target), base or None


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
    sweep: Sweep | None = None  # the axis of `pkb sweep`; None: the problem has no sweep
    # ParallelKernelBench problem ids this problem is the equivalent of (the reference's id, not
    # the solution file's number): how a PKB-style output directory is imported against this suite.
    pkb_ids: tuple[int, ...] = ()
    # Where the answer hangs on a decision that rounding can tip (a top-p cut), the inputs with
    # the decision's threshold moved as far as an honest implementation's rounding can move it,
    # each way: the judge accepts any value between the exact answers at those inputs
    # (evaluator/accuracy.py). None: every decision is exact, or made from exact values.
    decision_band: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None

    @property
    def default_dtype(self) -> torch.dtype:
        return self.dtypes[0]

    def setting(self, world_size: int, size: str = "default",
                dtype: torch.dtype | None = None) -> Setting:
        self.check_setting(world_size, size, dtype)
        return Setting(world_size, size, dtype or self.default_dtype,
                       self.size_params(world_size, size, dtype))

    def case(self, world_size: int, size: str, dtype: torch.dtype | None, *, rank: int,
             seed: int, device: torch.device | str, salt: str = "") -> Case:
        self.check_setting(world_size, size, dtype)
        return Case(world_size, size, dtype or self.default_dtype, self.size_params(world_size, size, dtype),
                    rank=rank, seed=seed, device=torch.device(device), salt=salt)

    def check_setting(self, world_size: int, size: str, dtype: torch.dtype | None) -> None:
        if world_size not in self.world_sizes:
            why = f" ({self.world_size_note})" if self.world_size_note else ""
            raise ValueError(f"{self.slug} supports world sizes {list(self.world_sizes)}, "
                             f"not {world_size}{why}")
        if parse_sweep_size(size) is not None:
            self.size_params(world_size, size, dtype)  # says what is wrong with the sweep point
        elif size not in self.sizes:
            raise ValueError(f"{self.slug} has size presets {sorted(self.sizes)}, not {size!r}")
        if dtype is not None and dtype not in self.dtypes:
            names = [dtype_name(d) for d in self.dtypes]
            raise ValueError(f"{self.slug} supports dtypes {names}, not {dtype_name(dtype)}")

    def size_params(self, world_size: int, size: str,
                    dtype: torch.dtype | None = None) -> Mapping[str, Any]:
        """The shape parameters of a preset, or of a sweep point (``sweep:<bytes>[:<base>]``):
        the base preset's, with the sweep parameter set for that message size."""
        point = parse_sweep_size(size)
        if point is None:
            return self.sizes[size]
        if self.sweep is None:
            raise ValueError(f"{self.slug} declares no sweep axis, so it has no size {size!r}")
        target, base = point
        base = base or self.sweep.base
        if base not in self.sizes:
            raise ValueError(f"{self.slug} has size presets {sorted(self.sizes)}; the sweep base "
                             f"{base!r} is not one of them")
        params = self.sizes[base]
        setting = Setting(world_size, base, dtype or self.default_dtype, params)
        return {**params, self.sweep.param: self.sweep.param_value(setting, target)}

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return self.tolerances[dtype]


def mib(n_bytes: float) -> float:
    return n_bytes / 2**20


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


__all__ = [
    "CATEGORIES", "COLLECTIVES", "DTYPE_NAMES", "SIZE_PRESETS", "Case", "GroupLayout", "Problem",
    "SWEEP_BYTES", "Setting", "Source", "Sweep", "Tolerance", "Traffic", "ceil_div", "dtype_name",
    "mib", "parse_sweep_size", "sweep_size", "tolerances", "world_group",
]

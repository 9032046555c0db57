"""Per-problem adapters from our calling convention to ParallelKernelBench's.

Our ``solution`` takes the reference's inputs by keyword and its process group as ``group``;
PKB's takes positional tensors, works on the default process group, and returns its own
shapes. Each adapter is the body of a ``solution`` with our signature that calls PKB's
(``_pkb_solution``) and converts what differs. Every conversion runs inside the timed call
and is stated in ``cost`` (most cost nothing: a view). Keyed by (PKB id, our problem slug):
an adapter applies only where the problem's metadata maps that PKB id to that problem.
"""

from __future__ import annotations

from . import adapters_science, adapters_sequence, adapters_training
from .adapter import Adapter, root_lines as _root_lines

_COLLECTIVES_AND_TP: tuple[Adapter, ...] = (
    Adapter(1, "all-reduce", "same shapes", "none",
            "def solution(x, *, group):\n    return _pkb_solution(x)\n"),
    Adapter(2, "all-gather", "PKB returns (world, n); ours is the flat (world * n,)", "none (a view)",
            "def solution(x, *, group):\n    return _pkb_solution(x).reshape(-1)\n"),
    Adapter(3, "broadcast", "the source rank is passed as src", "none",
            "def solution(x, *, group):\n" + _root_lines() +
            "    return _pkb_solution(x, src=root)\n"),
    Adapter(4, "reduce", "PKB returns its reduce buffer on every rank; ours wants a non-root "
            "rank's own input back", "a copy of x on non-root ranks (as the reference makes)",
            "def solution(x, *, group):\n" + _root_lines() +
            "    out = _pkb_solution(x, dst=root)\n"
            "    return out if dist.get_rank(group) == 0 else x.clone()\n"),
    Adapter(5, "scatter", "PKB's non-source ranks pass a tensor of the output's shape; ours pass "
            "the (world, rows, hidden) stack everywhere", "none (a view)",
            "def solution(x, *, group):\n" + _root_lines() +
            "    mine = x if dist.get_rank(group) == 0 else x[0]\n"
            "    return _pkb_solution(mine, src=root)\n"),
    Adapter(6, "gather", "PKB's non-root ranks may return their input itself; ours want a fresh "
            "tensor", "a copy of x on non-root ranks when PKB returns the input itself",
            "def solution(x, *, group):\n" + _root_lines() +
            "    out = _pkb_solution(x, dst=root)\n"
            "    return x.clone() if out is x else out\n"),
    Adapter(7, "reduce-scatter", "same shapes", "none",
            "def solution(x, *, group):\n    return _pkb_solution(x)\n"),
    Adapter(8, "all-to-all", "same shapes", "none",
            "def solution(x, *, group):\n    return _pkb_solution(x)\n"),
    Adapter(13, "tp-row-linear-allreduce", "PKB multiplies A (M, K/tp) by B (K/tp, N) and "
            "all-reduces; ours is x (seq, batch, in/tp) times weight (out, in/tp) transposed, "
            "plus a bias after the reduction",
            "a transposed copy of the weight shard and the bias add",
            "def solution(x_parallel, weight_shard, bias, *, group):\n"
            "    seq, batch, k = x_parallel.shape\n"
            "    out = _pkb_solution(x_parallel.reshape(seq * batch, k), weight_shard.t().contiguous())\n"
            "    return out.reshape(seq, batch, -1) + bias\n"),
    Adapter(16, "tp-gemm-reducescatter", "PKB multiplies A (M, K/tp) by B (K/tp, N) and "
            "reduce-scatters rows; ours is x (seq, batch, in/tp) times weight (out, in/tp) "
            "transposed, scattered along seq, plus a bias",
            "a transposed copy of the weight shard and the bias add",
            "def solution(x_parallel, weight_shard, bias, *, group):\n"
            "    seq, batch, k = x_parallel.shape\n"
            "    world = dist.get_world_size(group)\n"
            "    out = _pkb_solution(x_parallel.reshape(seq * batch, k), weight_shard.t().contiguous())\n"
            "    return out.reshape(seq // world, batch, -1) + bias\n"),
    Adapter(73, "vocab-parallel-cross-entropy", "PKB subtracts the max from the logits in place "
            "and computes in their dtype; ours leaves inputs unchanged and computes in float32; "
            "the group is passed as PKB's `group`",
            "a float32 copy of the logits shard",
            "def solution(logits, target, *, tp_group):\n"
            "    return _pkb_solution(logits.to(torch.float32, copy=True), target, group=tp_group)\n"),
    Adapter(18, "tp-rmsnorm", "PKB takes the epsilon as an argument; ours fixes it at 1e-6",
            "none",
            "def solution(x_shard, weight_shard, *, group):\n"
            "    return _pkb_solution(x_shard, weight_shard, 1e-6)\n"),
)


ADAPTERS: tuple[Adapter, ...] = (_COLLECTIVES_AND_TP + adapters_sequence.ADAPTERS + adapters_training.ADAPTERS
                                 + adapters_science.ADAPTERS)

_BY_KEY = {(a.pkb_id, a.slug): a for a in ADAPTERS}
if len(_BY_KEY) != len(ADAPTERS):
    raise RuntimeError("two adapters for one (PKB id, problem) pair")


def adapter_for(pkb_id: int, slug: str) -> Adapter | None:
    return _BY_KEY.get((pkb_id, slug))

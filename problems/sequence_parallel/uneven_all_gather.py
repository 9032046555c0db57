"""Uneven all-gather of sequence shards whose lengths are only known at run time."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, length: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # x: [capacity, hidden], this rank's token buffer; only its first `length` rows are tokens
    # (packed sequences leave each rank a different number). Returns the valid rows of every
    # rank concatenated in rank order, [sum(lengths), hidden], and the lengths, [world].
    world = dist.get_world_size(group)
    # The size exchange: nobody knows its peers' lengths before this.
    lengths = torch.empty(world, dtype=length.dtype, device=length.device)
    dist.all_gather_into_tensor(lengths, length, group=group)
    sizes = lengths.tolist()
    # Pad every shard to the longest one so one equal-sized gather moves them all.
    longest = max(sizes)
    padded = torch.zeros((longest, x.shape[1]), dtype=x.dtype, device=x.device)
    padded[:sizes[dist.get_rank(group)]] = x[:sizes[dist.get_rank(group)]]
    gathered = torch.empty((world * longest, x.shape[1]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, padded, group=group)
    pieces = gathered.view(world, longest, x.shape[1])
    out = torch.cat([pieces[r, :sizes[r]] for r in range(world)], dim=0)
    return out, lengths


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    cap = case["capacity"]
    # Between half and all of the buffer is valid, so the traffic has a lower bound.
    return {"x": case.randn(cap, case["hidden"], stream="x"),
            "length": case.randint(cap // 2, cap + 1, 1, stream="length")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    row = s["hidden"] * s.itemsize
    least = s["capacity"] // 2  # the fewest valid rows a rank can hold
    return Traffic(link_bytes=(n - 1) * least * row, hbm_bytes=least * row + n * least * row)


PROBLEM = Problem(
    id=506,
    slug="uneven-sequence-all-gather",
    title="Uneven all-gather of sequence shards with a size exchange",
    description=(
        "When sequence-parallel training packs variable-length samples, each rank ends up with a "
        "different number of tokens, and gathering the sequence back (before a loss, a "
        "non-sharded layer or after Ulysses attention) cannot use a plain all-gather: the ranks "
        "first all-gather their lengths, then gather shards padded to the longest one and drop "
        "the padding (all_gather_variable_dim in ring-attention-pytorch; verl and VeOmni do the "
        "same for unpadded sequence dims). The length exchange is a tiny collective whose result "
        "the host must read before it can size the second one, and the padding wastes link "
        "bytes; a fast kernel pulls each peer's valid rows straight into place once the lengths "
        "are visible, without the host round trip or the padded copy."
    ),
    categories=("sequence", "collective"),
    source=Source("ring-attention-pytorch",
                  "ring_attention_pytorch/distributed.py: all_gather_variable_dim",
                  "https://github.com/lucidrains/ring-attention-pytorch"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"capacity": 48, "hidden": 40}, "default": {"capacity": 4096, "hidden": 2048}},
    # Data movement only: every valid row must arrive bit-exact.
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    tags=("variable-size",),
    pkb_ids=(35,),
)

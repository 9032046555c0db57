"""GraphBolt cooperative minibatching: the backward of the feature all-to-all, into seed rows."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.determinism import scatter_add_fixed_point
from problems.graph.graphbolt_counts import split_counts
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(grad_output: torch.Tensor, seed_inverse_ids: torch.Tensor,
              counts_sent: torch.Tensor, counts_received: torch.Tensor, seed_size: int, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # Forward (CooperativeConvFunction.forward): this rank answered counts_received[j] requests
    # of peer j with rows h[seed_inverse_ids] of its seed features and got counts_sent[j] rows
    # from each peer j. Backward: grad_output [sum(counts_sent), F] goes back to the peers that
    # sent each row, and the rows that come back are summed into the seed they were copied from.
    # Returns the seed-feature gradient [seed_size, F].
    received = torch.empty((int(counts_received.sum()), grad_output.shape[1]),
                           dtype=grad_output.dtype, device=grad_output.device)
    dist.all_to_all_single(received, grad_output, output_split_sizes=counts_received.tolist(),
                           input_split_sizes=counts_sent.tolist(), group=group)
    # A seed requested by several peers (or twice by one) collects several gradients.
    return scatter_add_fixed_point(received, seed_inverse_ids, seed_size)


def make_inputs(case: Case) -> dict[str, object]:
    sent, received = split_counts(case)
    return {"grad_output": case.randn(case["rows"], case["features"], stream="grad"),
            "seed_inverse_ids": case.randint(0, case["seeds"], case["rows"], stream="ids"),
            "counts_sent": sent, "counts_received": received, "seed_size": case["seeds"]}


def roofline(s: Setting) -> Traffic:
    n, row = s.world_size, s["features"] * s.itemsize
    # Every rank keeps rows // n of its rows; the rest crosses the links both ways.
    moved = (s["rows"] - s["rows"] // n) * row
    return Traffic(link_bytes=moved,
                   hbm_bytes=2 * s["rows"] * row + s["seeds"] * row,
                   flops=s["rows"] * s["features"])


PROBLEM = Problem(
    id=1108,
    slug="graphbolt-feature-exchange-backward",
    title="GraphBolt cooperative minibatching: feature exchange backward",
    description=(
        "In DGL GraphBolt's cooperative minibatching the GPUs sample one shared minibatch, each "
        "owning a slice of the seed vertices; CooperativeConvFunction moves vertex features "
        "between them with an uneven all-to-all, each rank answering its peers' requests with "
        "rows gathered by seed_inverse_ids. Its backward runs the exchange in reverse: the "
        "gradient rows travel back to the rank that supplied them (counts swapped), and every "
        "returned row is summed into the seed it was copied from, which GraphBolt does as a "
        "sparse matrix product. The all-to-all moves the whole per-layer gradient of the "
        "minibatch and its sizes vary per peer, and the duplicate-index reduction after it "
        "must be deterministic; a fast kernel reduces rows as they arrive from each peer."
    ),
    categories=("graph",),
    source=Source("DGL", "python/dgl/graphbolt/impl/cooperative_conv.py: "
                  "CooperativeConvFunction.backward", "https://github.com/dmlc/dgl"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"rows": 96, "features": 24, "seeds": 40},
           "default": {"rows": 131072, "features": 256, "seeds": 65536}},
    tolerances=tolerances(bfloat16=(1e-2, 1e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("backward", "variable-size"),
    pkb_ids=(66,),
)

"""GraphBolt cooperative minibatching: the feature all-to-all of CooperativeConvFunction.forward."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.graph.graphbolt_counts import split_counts
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(features: torch.Tensor, seed_inverse_ids: torch.Tensor, counts_sent: torch.Tensor,
              counts_received: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # features [seeds, F]: this rank's seed-vertex features. Peer j asked for counts_received[j]
    # of them; seed_inverse_ids [sum(counts_received)] says which, grouped by peer in rank order.
    # Returns the rows this rank asked for, counts_sent[j] from each peer j in rank order,
    # [sum(counts_sent), F].
    answer = features[seed_inverse_ids]
    out = torch.empty((int(counts_sent.sum()), features.shape[1]), dtype=features.dtype,
                      device=features.device)
    dist.all_to_all_single(out, answer, output_split_sizes=counts_sent.tolist(),
                           input_split_sizes=counts_received.tolist(), group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    sent, received = split_counts(case)
    return {"features": case.randn(case["seeds"], case["features"], stream="features"),
            "seed_inverse_ids": case.randint(0, case["seeds"], case["rows"], stream="ids"),
            "counts_sent": sent, "counts_received": received}


def roofline(s: Setting) -> Traffic:
    n, row = s.world_size, s["features"] * s.itemsize
    # Every rank keeps rows // n of the rows it answers; the rest crosses the links.
    return Traffic(link_bytes=(s["rows"] - s["rows"] // n) * row, hbm_bytes=3 * s["rows"] * row)


PROBLEM = Problem(
    id=1110,
    slug="graphbolt-feature-exchange",
    title="GraphBolt cooperative minibatching: feature exchange forward",
    description=(
        "In DGL GraphBolt's cooperative minibatching the GPUs sample one shared minibatch and "
        "each owns a slice of its seed vertices; before a layer runs, every rank needs the "
        "features of vertices owned by its peers. CooperativeConvFunction.forward answers the "
        "peers' requests: it gathers the requested rows of its seed features by "
        "seed_inverse_ids (a vertex asked for by several peers is copied several times) and "
        "sends them with one uneven all-to-all whose split sizes come from the sampler. It "
        "moves the layer's whole input feature traffic once per layer per minibatch; a fast "
        "kernel gathers rows straight from the feature table into peers' receive buffers "
        "instead of staging the gathered copy."
    ),
    categories=("graph",),
    source=Source("DGL", "python/dgl/graphbolt/impl/cooperative_conv.py: "
                  "CooperativeConvFunction.forward", "https://github.com/dmlc/dgl"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"rows": 96, "features": 24, "seeds": 40},
           "default": {"rows": 131072, "features": 256, "seeds": 65536}},
    # Data movement only: every row must arrive bit-exact.
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    tags=("variable-size",),
    pkb_ids=(65,),
)

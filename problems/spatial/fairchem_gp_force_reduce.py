"""fairchem graph parallelism: edges split by target atom, embeddings all-gathered, partial forces
and energy all-reduced over the graph-parallel group."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.determinism import scatter_add_fixed_point
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(pos: torch.Tensor, h_local: torch.Tensor, nbr: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # pos [N, 3]: positions, replicated. This rank owns atoms [rank * n, (rank + 1) * n), their
    # node embeddings h_local [n, D] and the edges into them: nbr [n, K] global source atoms.
    # Edge energy e_ij = c_ij * exp(-|x_i - x_j|^2 / 2) with c_ij = tanh(h_i . h_j / sqrt(D))
    # (the model's edge head; c is held fixed when differentiating). Returns the total energy
    # [1] and forces F = -dE/dx on all N atoms, identical on every rank.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    n, dim = h_local.shape
    n_total = pos.shape[0]
    # gather_from_model_parallel_region: every rank needs the embeddings of its edges' sources.
    h_full = torch.empty((n * world, dim), dtype=h_local.dtype, device=h_local.device)
    dist.all_gather_into_tensor(h_full, h_local, group=group)
    coef = torch.tanh((h_local.unsqueeze(1) * h_full[nbr]).sum(-1) * dim ** -0.5)  # [n, K]
    x_i = pos[rank * n:(rank + 1) * n]
    diff = x_i.unsqueeze(1) - pos[nbr]  # [n, K, 3]
    e = coef * torch.exp(-0.5 * (diff * diff).sum(-1))
    energy = e.sum().reshape(1)
    # dE/dx_i = -e * diff; force on the target is +e * diff, on the source -e * diff.
    f_edge = e.unsqueeze(-1) * diff
    forces = -scatter_add_fixed_point(f_edge.reshape(-1, 3), nbr.reshape(-1), n_total)
    forces[rank * n:(rank + 1) * n] += f_edge.sum(1)
    # reduce_from_model_parallel_region: partial energies and forces summed over the group.
    dist.all_reduce(energy, op=dist.ReduceOp.SUM, group=group)
    dist.all_reduce(forces, op=dist.ReduceOp.SUM, group=group)
    return energy, forces


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, k, world = case["atoms_per_rank"], case["neighbors"], case.world_size
    n_total = n * world
    targets = torch.arange(case.rank * n, (case.rank + 1) * n, device=case.device).unsqueeze(1)
    # Sources differ from the target (no self edges).
    nbr = (targets + 1 + case.randint(0, n_total - 1, n, k, stream="nbr")) % n_total
    return {
        "pos": case.rand(n_total, 3, stream="pos", shared=True, high=case["box"]),
        "h_local": case.randn(n, case["emb"], stream="h"),
        "nbr": nbr,
    }


def roofline(s: Setting) -> Traffic:
    nw = s.world_size
    n, k, dim = s["atoms_per_rank"], s["neighbors"], s["emb"]
    n_total = n * nw
    gathered = n_total * dim * 4
    forces = n_total * 3 * 4
    link = traffic.all_gather(gathered, nw) + traffic.all_reduce(forces, nw)
    hbm = gathered + n * k * (8 + dim * 4 + 12) + n_total * 12 + 2 * forces
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=n * k * (2 * dim + 30))


PROBLEM = Problem(
    id=1208,
    slug="fairchem-graph-parallel-forces",
    title="Graph-parallel interatomic potential: embedding all-gather and force all-reduce (fairchem)",
    description=(
        "fairchem's graph parallelism (used by eSCN, EquiformerV2 and UMA for systems too large "
        "for one GPU) gives each rank a slice of the atoms and the edges pointing into them. "
        "Node embeddings are all-gathered so each rank can read its edges' source atoms, each "
        "rank evaluates its edges' energies, and because positions are replicated the "
        "gradients w.r.t. every atom are partial: forces (and the energy) are summed over the "
        "group with an all-reduce (the backward of copy_to_model_parallel_region). The force "
        "accumulation onto source atoms is a scatter-add, done here in 64-bit fixed point so "
        "that it is deterministic. A fast kernel overlaps the gather with the local edges, reduces "
        "only the rows each rank touched, and fuses the scatter with the reduction. Float32 "
        "only: forces are taken by autograd in fp32."
    ),
    categories=("spatial", "graph"),
    source=Source("fairchem", "src/fairchem/core/common/gp_utils.py: "
                  "gather_from_model_parallel_region / reduce_from_model_parallel_region",
                  "https://github.com/FAIR-Chem/fairchem"),
    collectives=("all_gather", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"atoms_per_rank": 32, "neighbors": 4, "emb": 8, "box": 2.0},
           "default": {"atoms_per_rank": 65536, "neighbors": 32, "emb": 64, "box": 2.0}},
    tolerances=tolerances(float32=(1e-5, 1e-4)),
    dtypes=(torch.float32,),
    traffic=roofline,
)

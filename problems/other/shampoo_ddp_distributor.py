"""Distributed Shampoo (DDP distributor): per-rank preconditioning of owned blocks, all-gather of directions."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-8


def reference(grads: torch.Tensor, left_inv_root: torch.Tensor, right_inv_root: torch.Tensor,
              adagrad_state: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # grads (blocks, b, b): every block of the (replicated) gradient; the inverse-root factors
    # and the Adagrad grafting state are those of each block, replicated here as inputs.
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    blocks = grads.shape[0]
    per_rank = blocks // world
    # Equal-sized blocks are assigned round-robin: rank r owns blocks r, r + world, ...
    owned = torch.arange(rank, blocks, world, device=grads.device)
    g = grads[owned].float()
    # Shampoo direction L^{-1/4} G R^{-1/4} (fp32 math), grafted onto the Adagrad step norm.
    direction = left_inv_root[owned].float() @ g @ right_inv_root[owned].float()
    adagrad_dir = g / (adagrad_state[owned].float().sqrt() + EPS)
    graft = adagrad_dir.flatten(1).norm(dim=1) / (direction.flatten(1).norm(dim=1) + EPS)
    direction = direction * graft.view(-1, 1, 1)
    # Communicate the search directions in the problem dtype (Shampoo's communication_dtype).
    local = direction.to(grads.dtype).contiguous()
    gathered = torch.empty((world * per_rank,) + tuple(grads.shape[1:]), dtype=local.dtype,
                           device=grads.device)
    dist.all_gather_into_tensor(gathered, local, group=group)
    # gathered[r * per_rank + j] is block j * world + r: put blocks back in order.
    return gathered.view(world, per_rank, *grads.shape[1:]).transpose(0, 1).reshape(grads.shape)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    nb, b = case["blocks"], case["block"]
    f32 = torch.float32

    def spd(stream: str) -> torch.Tensor:
        a = case.randn(nb, b, b, stream=stream, shared=True, dtype=f32, std=b ** -0.5)
        return (a @ a.mT) * 0.5 + torch.eye(b, dtype=f32, device=case.device) * 0.5

    return {
        "grads": case.randn(nb, b, b, stream="g", shared=True, dtype=f32).to(case.dtype),
        "left_inv_root": spd("l").to(case.dtype),
        "right_inv_root": spd("r").to(case.dtype),
        "adagrad_state": case.rand(nb, b, b, stream="ada", shared=True, dtype=f32, low=0.5,
                                   high=2.0).to(case.dtype),
    }


def roofline(s: Setting) -> Traffic:
    n, nb, b = s.world_size, s["blocks"], s["block"]
    blk = b * b * s.itemsize
    mine = nb // n
    return Traffic(link_bytes=traffic.all_gather(nb * blk, n),
                   hbm_bytes=4 * mine * blk + nb * blk,
                   flops=mine * (4 * b ** 3 + 6 * b * b))


PROBLEM = Problem(
    id=1309,
    slug="shampoo-ddp-distributor",
    title="Distributed Shampoo: sharded block preconditioning + all-gather of search directions",
    description=(
        "Distributed Shampoo splits every parameter into blocks with their own Kronecker-factor "
        "preconditioners. Its DDP distributor gives each data-parallel rank a share of the "
        "blocks (round-robin for equal blocks): the rank computes the preconditioned direction "
        "L^{-1/4} G R^{-1/4} of its blocks, grafts it onto the Adagrad step norm, writes it "
        "into a flat communication buffer, and an all-gather hands every rank the directions "
        "of all blocks, which it then applies locally. The two GEMMs per block and the "
        "all-gather (hundreds of MiB) sit on the optimizer's critical path; a fast "
        "implementation streams each finished block to the peers while the next is computed, "
        "and writes the gathered blocks in block order directly."
    ),
    categories=("other",),
    source=Source("Distributed Shampoo",
                  "distributed_shampoo/utils/shampoo_ddp_distributor.py: DDPDistributor.update_params",
                  "https://github.com/facebookresearch/optimizers"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"blocks": 8, "block": 16}, "default": {"blocks": 64, "block": 1024}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)

"""DeePMD-kit / LAMMPS spatial decomposition: ghost atoms exchanged with slab neighbours, then a
message-passing update of the local atoms over local + ghost neighbours."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

RCUT = 1.0


def _swap(send: torch.Tensor, dst: int, src: int, group) -> torch.Tensor:
    # One LAMMPS-style swap: send rows to `dst`, receive rows from `src`; the count goes first.
    n_send = torch.tensor([send.shape[0]], dtype=torch.int64, device=send.device)
    n_recv = torch.empty_like(n_send)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, n_send, dst, group=group),
                                   dist.P2POp(dist.irecv, n_recv, src, group=group)])
    for r in reqs:
        r.wait()
    recv = torch.empty((int(n_recv.item()), send.shape[1]), dtype=send.dtype, device=send.device)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, send.contiguous(), dst, group=group),
                                   dist.P2POp(dist.irecv, recv, src, group=group)])
    for r in reqs:
        r.wait()
    return recv


def reference(coord: torch.Tensor, feat: torch.Tensor, box: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # The periodic box [Lx, Ly, Lz] (box) is cut into world slabs along x; this rank owns atoms
    # with x in [rank * Lx / p, (rank + 1) * Lx / p): coord [n, 3], per-atom features feat [n, F].
    # Atoms within RCUT of a slab face are sent to the neighbour across it (periodic in x, with
    # the box shift applied at the wrap); then every local atom aggregates its neighbours within
    # RCUT (local and ghost, minimum image in y and z) with a smooth switch
    # s(r) = (1 - r / RCUT)^2: out_i = sum_j s(r_ij) feat_j.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    lx = box[0]
    lo = rank * lx / world
    hi = (rank + 1) * lx / world
    left = dist.get_global_rank(group, (rank - 1) % world)
    right = dist.get_global_rank(group, (rank + 1) % world)
    packed = torch.cat([coord, feat], dim=1)
    shift = torch.zeros(3 + feat.shape[1], dtype=coord.dtype, device=coord.device)
    # Swap 1: atoms near the upper face go right; what arrives comes from the left neighbour.
    to_right = packed[coord[:, 0] >= hi - RCUT].clone()
    if rank == world - 1:
        shift[0] = lx
        to_right -= shift
    from_left = _swap(to_right, right, left, group)
    # Swap 2: atoms near the lower face go left; what arrives comes from the right neighbour.
    to_left = packed[coord[:, 0] < lo + RCUT].clone()
    if rank == 0:
        shift[0] = lx
        to_left += shift
    from_right = _swap(to_left, left, right, group)
    all_atoms = torch.cat([packed, from_left, from_right], dim=0)
    pos, g = all_atoms[:, :3], all_atoms[:, 3:]
    d = coord.unsqueeze(1) - pos.unsqueeze(0)  # [n, n_all, 3]
    d_yz = d[..., 1:] - box[1:] * torch.round(d[..., 1:] / box[1:])
    r2 = d[..., 0] * d[..., 0] + (d_yz * d_yz).sum(-1)
    r = torch.sqrt(r2)
    sw = torch.where(r < RCUT, (1.0 - r / RCUT) ** 2, torch.zeros_like(r))
    n = coord.shape[0]
    sw[torch.arange(n, device=coord.device), torch.arange(n, device=coord.device)] = 0.0
    return sw @ g


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, world, rank = case["atoms_per_rank"], case.world_size, case.rank
    slab, lyz = case["slab_width"], case["yz_length"]
    # The box edges vary by up to 10% between trials (same on every rank); atoms are uniform
    # in this rank's slab.
    stretch = case.rand(3, stream="box", shared=True, low=1.0, high=1.1)
    u = case.rand(n, 3, stream="coord")
    nominal = torch.tensor([slab * world, lyz, lyz], dtype=u.dtype, device=u.device)
    box = stretch * nominal
    slab_box = box / torch.tensor([float(world), 1.0, 1.0], dtype=u.dtype, device=u.device)
    offset = torch.tensor([float(rank), 0.0, 0.0], dtype=u.dtype, device=u.device) * slab_box
    return {
        "coord": u * slab_box + offset,
        "feat": case.randn(n, case["feat"], stream="feat"),
        "box": box,
    }


def roofline(s: Setting) -> Traffic:
    n, feat, slab = s["atoms_per_rank"], s["feat"], s["slab_width"]
    ghosts = 2 * n * RCUT / slab  # expected atoms within RCUT of either face
    row = (3 + feat) * 4
    link = ghosts * row
    hbm = n * row + 2 * ghosts * row + n * feat * 4
    # Dense pairs as in the reference; a cell list would visit only ~ 4/3 pi RCUT^3 rho per atom.
    flops = n * (n + ghosts) * (12 + 2 * feat)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=flops)


PROBLEM = Problem(
    id=1207,
    slug="deepmd-ghost-atom-exchange",
    title="Ghost-atom exchange for spatially decomposed molecular dynamics (DeePMD-kit border op)",
    description=(
        "Running a DeePMD (DPA-2 style message-passing) potential inside LAMMPS splits the box "
        "into slabs, one per GPU. Before each message-passing layer every rank sends the atoms "
        "within the cutoff of a slab face (coordinates and current features) to the neighbour "
        "across it, one swap per direction with the counts exchanged first, applying the "
        "periodic shift at the box edge; DeePMD-kit's border op does this with MPI "
        "send/receive of LAMMPS' send lists. Each local atom then aggregates its neighbours "
        "within the cutoff, local or ghost. The exchange is small but latency-bound and "
        "repeated every layer of every MD step; a fast kernel builds the send lists on the GPU, "
        "writes ghosts straight into the neighbour's buffer and overlaps them with the "
        "interior atoms' work. Float32 only: MD coordinates in bfloat16 would change neighbour lists."
    ),
    categories=("spatial",),
    source=Source("DeePMD-kit", "source/op/pt/comm.cc: Border::forward (border_op)",
                  "https://github.com/deepmodeling/deepmd-kit"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"atoms_per_rank": 48, "slab_width": 2.5, "yz_length": 3.0, "feat": 8},
           "default": {"atoms_per_rank": 4096, "slab_width": 4.0, "yz_length": 12.0,
                       "feat": 128}},
    tolerances=tolerances(float32=(1e-4, 1e-4)),
    dtypes=(torch.float32,),
    traffic=roofline,
    tags=("inference", "latency"),
)

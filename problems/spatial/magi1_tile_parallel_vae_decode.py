"""MAGI-1 tile-parallel VAE decode: overlapping latent tiles decoded across ranks, then blended."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _decode(tile: torch.Tensor, weight: torch.Tensor, up_t: int, up_s: int) -> torch.Tensor:
    # Stand-in for the VAE decoder, with its shape behaviour: a per-voxel projection of the
    # latent channels to RGB and a trilinear upsampling to pixel resolution. Each tile is decoded
    # on its own, so tile borders disagree and must be blended.
    rgb = torch.einsum("oc,bcthw->bothw", weight, tile)
    return F.interpolate(rgb, scale_factor=(up_t, up_s, up_s), mode="trilinear",
                         align_corners=False)


def _blend(prev: torch.Tensor, cur: torch.Tensor, dim: int, extent: int) -> torch.Tensor:
    # Linear cross-fade over the overlap: the start of `cur` fades in over the end of `prev`.
    shape = [1] * cur.dim()
    shape[dim] = extent
    ramp = (torch.arange(extent, device=cur.device, dtype=torch.float32) / extent).view(shape)
    head = cur.narrow(dim, 0, extent)
    tail = prev.narrow(dim, prev.shape[dim] - extent, extent)
    mixed = (tail.float() * (1 - ramp) + head.float() * ramp).to(cur.dtype)
    return torch.cat([mixed, cur.narrow(dim, extent, cur.shape[dim] - extent)], dim=dim)


def _gather_tiles(mine: torch.Tensor, count: int, group: dist.ProcessGroup) -> torch.Tensor:
    # Ranks hold ceil or floor of count / world tiles; pad to the larger so one equal gather
    # moves them, then put tile q + s * world (rank q's slot s) back at its index.
    world = dist.get_world_size(group)
    slots = math.ceil(count / world)
    padded = mine.new_zeros((slots,) + tuple(mine.shape[1:]))
    padded[: mine.shape[0]] = mine
    gathered = mine.new_empty((world * slots,) + tuple(mine.shape[1:]))
    dist.all_gather_into_tensor(gathered, padded, group=group)
    by_rank = gathered.view(world, slots, *mine.shape[1:])
    return torch.stack([by_rank[i % world, i // world] for i in range(count)])


def reference(z: torch.Tensor, weight: torch.Tensor, tile: tuple[int, int, int],
              stride: tuple[int, int, int], upsample: tuple[int, int], *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # z [1, C, T, H, W]: the denoised latent video, the same on every rank; weight [3, C].
    # Tiles of `tile` latent voxels start every `stride` voxels along (T, H, W) and the latent
    # is exactly covered. Returns the decoded video [1, 3, T * up_t, H * up_s, W * up_s] on every
    # rank.
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    up_t, up_s = upsample
    scale = (up_t, up_s, up_s)
    grid = [(z.shape[2 + d] - tile[d]) // stride[d] + 1 for d in range(3)]
    index = [(a, b, c) for a in range(grid[0]) for b in range(grid[1]) for c in range(grid[2])]
    count = len(index)

    def latent_tile(i: int) -> torch.Tensor:
        a, b, c = index[i]
        return z[:, :, a * stride[0]: a * stride[0] + tile[0], b * stride[1]: b * stride[1] + tile[1],
                 c * stride[2]: c * stride[2] + tile[2]]

    # Round-robin split of the tiles; every rank decodes only its own.
    own = list(range(rank, count, world))
    decoded = _gather_tiles(torch.stack([_decode(latent_tile(i), weight, up_t, up_s)
                                         for i in own]), count, group)
    # Each rank blends its tiles with the (unblended) previous tile along t, h and w.
    position = {ix: i for i, ix in enumerate(index)}
    blended = []
    for i in own:
        cur = decoded[i]
        for d in range(3):
            if index[i][d] > 0:
                prev_ix = list(index[i])
                prev_ix[d] -= 1
                extent = (tile[d] - stride[d]) * scale[d]
                cur = _blend(decoded[position[tuple(prev_ix)]], cur, 2 + d, extent)
        blended.append(cur)
    tiles = _gather_tiles(torch.stack(blended), count, group)
    # Each tile keeps its stride's worth of pixels; the last along a dimension keeps all.
    out = z.new_empty((1, 3) + tuple(z.shape[2 + d] * scale[d] for d in range(3)))
    for i, ix in enumerate(index):
        starts = [ix[d] * stride[d] * scale[d] for d in range(3)]
        keep = [tile[d] * scale[d] if ix[d] == grid[d] - 1 else stride[d] * scale[d]
                for d in range(3)]
        out[:, :, starts[0]: starts[0] + keep[0], starts[1]: starts[1] + keep[1],
            starts[2]: starts[2] + keep[2]] = tiles[i][:, :, :keep[0], :keep[1], :keep[2]]
    return out


def _latent_shape(p) -> list[int]:
    return [p["stride"][d] * (p["grid"][d] - 1) + p["tile"][d] for d in range(3)]


def make_inputs(case: Case) -> dict[str, object]:
    t, h, w = _latent_shape(case)
    return {"z": case.randn(1, case["channels"], t, h, w, stream="z", shared=True),
            "weight": case.randn(3, case["channels"], stream="weight", shared=True,
                                 std=case["channels"] ** -0.5),
            "tile": tuple(case["tile"]), "stride": tuple(case["stride"]),
            "upsample": tuple(case["upsample"])}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    up_t, up_s = s["upsample"]
    t, h, w = _latent_shape(s)
    out_bytes = 3 * t * up_t * h * up_s * w * up_s * s.itemsize
    tiles = math.prod(s["grid"])
    tile_voxels = math.prod(s["tile"])
    tile_bytes = 3 * tile_voxels * up_t * up_s * up_s * s.itemsize
    mine = math.ceil(tiles / n)
    # Every rank ends with the whole video and computed at most ceil(tiles / n) tiles of it.
    return Traffic(link_bytes=max(out_bytes - mine * tile_bytes, traffic.all_gather(out_bytes, n)),
                   hbm_bytes=out_bytes + mine * tile_bytes,
                   flops=mine * tile_voxels * 3 * 2 * s["channels"])


PROBLEM = Problem(
    id=1211,
    slug="magi1-tile-parallel-vae-decode",
    title="MAGI-1 tile-parallel VAE decode with overlap blending",
    description=(
        "Decoding a generated video's latent back to pixels is too large for one pass, so "
        "MAGI-1 (like the tiled decoders of diffusers) cuts the latent into overlapping "
        "spatio-temporal tiles, decodes each tile separately, cross-fades every tile with its "
        "predecessor along time, height and width over the overlap, and stitches the crops. "
        "With tile parallelism the tiles are dealt round-robin to the ranks: each decodes its "
        "share, the decoded tiles are gathered so that neighbours can be blended, each rank "
        "blends its own tiles, and a second gather assembles the full video on every rank. "
        "The gathers move the whole decoded video (tens of MiB of pixels) twice, where only "
        "the overlaps are needed for blending; a fast implementation fetches neighbour "
        "borders and writes final pixels straight into peers' output buffers."
    ),
    categories=("spatial",),
    source=Source("MAGI-1", "inference/model/vae/vae_model.py: ViTVAE.tiled_decode "
                  "(tile-parallel decode)", "https://github.com/SandAI-org/MAGI-1"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"channels": 4, "tile": (2, 4, 4), "stride": (1, 3, 3), "grid": (2, 2, 2),
                     "upsample": (2, 2)},
           "default": {"channels": 16, "tile": (4, 16, 16), "stride": (3, 12, 12),
                       "grid": (2, 4, 4), "upsample": (4, 8)}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("inference", "video"),
    pkb_ids=(),
)

"""gsplat distributed rasterization: project local Gaussians into every camera, all-to-all to owners."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

NEAR = 0.01
EPS2D = 0.3


def _project(means, quats, scales, viewmats, ks):
    # Perspective (EWA) projection of N Gaussians into C cameras, as in gsplat's
    # fully_fused_projection: returns means2d [C, N, 2], conics [C, N, 3], depths [C, N],
    # and a validity mask [C, N].
    q = quats / quats.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    rot = torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(-1, 3, 3)
    m = rot * scales.unsqueeze(-2)
    covar = m @ m.transpose(-1, -2)  # [N, 3, 3]
    r_cam, t_cam = viewmats[:, :3, :3], viewmats[:, :3, 3]
    p = torch.einsum("cij,nj->cni", r_cam, means) + t_cam[:, None, :]  # [C, N, 3]
    cov_c = torch.einsum("cij,njk,clk->cnil", r_cam, covar, r_cam)
    valid = p[..., 2] > NEAR
    tz = torch.where(valid, p[..., 2], torch.ones_like(p[..., 2]))
    fx, fy = ks[:, 0, 0][:, None], ks[:, 1, 1][:, None]
    cx, cy = ks[:, 0, 2][:, None], ks[:, 1, 2][:, None]
    tx, ty = p[..., 0], p[..., 1]
    zeros = torch.zeros_like(tz)
    jac = torch.stack([fx / tz, zeros, -fx * tx / (tz * tz),
                       zeros, fy / tz, -fy * ty / (tz * tz)], dim=-1).reshape(*tz.shape, 2, 3)
    cov2d = jac @ cov_c @ jac.transpose(-1, -2)
    a = cov2d[..., 0, 0] + EPS2D
    b = cov2d[..., 0, 1]
    c = cov2d[..., 1, 1] + EPS2D
    det = a * c - b * b
    valid = valid & (det > 0)
    det = torch.where(valid, det, torch.ones_like(det))
    conics = torch.stack([c / det, -b / det, a / det], dim=-1)
    means2d = torch.stack([fx * tx / tz + cx, fy * ty / tz + cy], dim=-1)
    return means2d, conics, tz, valid


def _rasterize(means2d, conics, depths, opacities, colors, background, pixel_chunk=128):
    # Front-to-back alpha compositing of all Gaussians at every pixel centre of one camera
    # (dense, in chunks of pixels), over the background image [H, W, 3].
    height, width = background.shape[:2]
    order = torch.argsort(depths, stable=True)
    means2d, conics = means2d[order], conics[order]
    opacities, colors = opacities[order], colors[order]
    ys, xs = torch.meshgrid(torch.arange(height, dtype=means2d.dtype, device=means2d.device) + 0.5,
                            torch.arange(width, dtype=means2d.dtype, device=means2d.device) + 0.5,
                            indexing="ij")
    xs, ys = xs.reshape(-1, 1), ys.reshape(-1, 1)
    rgb, acc = [], []
    for start in range(0, height * width, pixel_chunk):
        dx = xs[start:start + pixel_chunk] - means2d[:, 0]
        dy = ys[start:start + pixel_chunk] - means2d[:, 1]
        sigma = 0.5 * (conics[:, 0] * dx * dx + conics[:, 2] * dy * dy) + conics[:, 1] * dx * dy
        alpha = torch.clamp(opacities * torch.exp(-sigma), max=0.999)
        alpha = torch.where((sigma >= 0) & (alpha >= 1.0 / 255.0), alpha, torch.zeros_like(alpha))
        trans = torch.cumprod(1.0 - alpha, dim=1)
        trans = torch.cat([torch.ones_like(trans[:, :1]), trans[:, :-1]], dim=1)
        weights = alpha * trans  # [pixels, N]
        rgb.append(weights @ colors)
        acc.append(weights.sum(1))
    alphas = torch.cat(acc).reshape(height, width)
    image = torch.cat(rgb).reshape(height, width, 3) + (1.0 - alphas).unsqueeze(-1) * background
    return image, alphas


def reference(means: torch.Tensor, quats: torch.Tensor, scales: torch.Tensor,
              opacities: torch.Tensor, colors: torch.Tensor, viewmats: torch.Tensor,
              ks: torch.Tensor, backgrounds: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # Each rank holds N_local Gaussians (means, quats, scales, opacities, colors) and C_local
    # cameras (viewmats [C_local, 4, 4], ks [C_local, 3, 3], backgrounds [C_local, H, W, 3]).
    # Output: this rank's renders [C_local, H, W, 3] and alphas [C_local, H, W].
    world = dist.get_world_size(group)
    c_local = viewmats.shape[0]
    n_local = means.shape[0]
    # Every rank needs every camera (gsplat's _dist_gather_camera).
    all_view = torch.empty((world * c_local, 4, 4), dtype=viewmats.dtype, device=viewmats.device)
    dist.all_gather_into_tensor(all_view, viewmats.contiguous(), group=group)
    all_k = torch.empty((world * c_local, 3, 3), dtype=ks.dtype, device=ks.device)
    dist.all_gather_into_tensor(all_k, ks.contiguous(), group=group)
    # Project the local Gaussians into all cameras; invisible ones get zero opacity.
    means2d, conics, depths, valid = _project(means, quats, scales, all_view, all_k)
    opac = torch.where(valid, opacities.unsqueeze(0), torch.zeros_like(depths))
    cols = colors.unsqueeze(0).expand(world * c_local, -1, -1)
    packed = torch.cat([means2d, conics, depths.unsqueeze(-1), opac.unsqueeze(-1), cols], dim=-1)
    # [camera owner, C_local, N_local, 10] -> everyone's projections for my cameras.
    send = packed.reshape(world, c_local, n_local, 10).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    mine = recv.permute(1, 0, 2, 3).reshape(c_local, world * n_local, 10)
    images, alphas = [], []
    for cam in range(c_local):
        g = mine[cam]
        img, alp = _rasterize(g[:, 0:2], g[:, 2:5], g[:, 5], g[:, 6], g[:, 7:10], backgrounds[cam])
        images.append(img)
        alphas.append(alp)
    return torch.stack(images), torch.stack(alphas)


def _look_at_viewmats(pos: torch.Tensor) -> torch.Tensor:
    # World-to-camera matrices of cameras at `pos` looking at the origin (+z forward).
    fwd = -pos / pos.norm(dim=-1, keepdim=True)
    up = torch.zeros_like(pos)
    up[:, 1] = 1.0
    right = torch.linalg.cross(up, fwd)
    right = right / right.norm(dim=-1, keepdim=True)
    down = torch.linalg.cross(fwd, right)
    rot = torch.stack([right, down, fwd], dim=1)  # rows: camera axes in world coordinates
    view = torch.zeros((pos.shape[0], 4, 4), dtype=pos.dtype, device=pos.device)
    view[:, :3, :3] = rot
    view[:, :3, 3] = -(rot @ pos.unsqueeze(-1)).squeeze(-1)
    view[:, 3, 3] = 1.0
    return view


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, c_local, h, w = case["gaussians_per_rank"], case["cameras_per_rank"], case["h"], case["w"]
    direction = case.randn(c_local, 3, stream="cam_dir")
    dist_ = case.rand(c_local, 1, stream="cam_dist", low=3.5, high=4.5)
    focal = case.rand(c_local, stream="focal", low=0.9 * w, high=1.1 * w)
    if case.is_meta:
        viewmats = torch.empty((c_local, 4, 4), device="meta")
        ks = torch.empty((c_local, 3, 3), device="meta")
    else:
        viewmats = _look_at_viewmats(direction / direction.norm(dim=-1, keepdim=True) * dist_)
        ks = torch.zeros((c_local, 3, 3), device=direction.device)
        ks[:, 0, 0] = focal
        ks[:, 1, 1] = focal
        ks[:, 0, 2] = w / 2
        ks[:, 1, 2] = h / 2
        ks[:, 2, 2] = 1.0
    return {
        "means": case.rand(n, 3, stream="means", low=-1.0, high=1.0),
        "quats": case.randn(n, 4, stream="quats"),
        "scales": torch.exp(case.randn(n, 3, stream="scales", std=0.3) - 3.0),
        "opacities": case.rand(n, stream="opacities", low=0.05, high=0.95),
        "colors": case.rand(n, 3, stream="colors"),
        "viewmats": viewmats,
        "ks": ks,
        "backgrounds": case.rand(c_local, h, w, 3, stream="backgrounds"),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    n_local, c_local, h, w = s["gaussians_per_rank"], s["cameras_per_rank"], s["h"], s["w"]
    projected = n * c_local * n_local * 10 * 4  # this rank's projections into all cameras
    link = traffic.all_to_all(projected, n) + traffic.all_gather(n * c_local * 25 * 4, n)
    out = c_local * h * w * 4 * 4
    hbm = n_local * 14 * 4 + 2 * projected + c_local * h * w * 3 * 4 + out
    # Dense compositing: every pixel against every Gaussian (a tiled rasterizer does far less).
    flops = c_local * h * w * n * n_local * 20 + n * c_local * n_local * 100
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=flops)


PROBLEM = Problem(
    id=1206,
    slug="gsplat-distributed-rasterization",
    title="Distributed Gaussian splatting: projections all-to-all to camera owners (gsplat)",
    description=(
        "gsplat trains large 3D Gaussian Splatting scenes on several GPUs by giving each rank a "
        "shard of the Gaussians and a shard of the training cameras. Each step gathers every "
        "rank's cameras, projects the local Gaussians into all of them (EWA splatting: 2D "
        "means, conics, depths, opacities, colours), and an all-to-all delivers to each camera's "
        "owner the projections of every Gaussian, which it depth-sorts and alpha-composites. "
        "This is the non-packed path, where every Gaussian is sent to every camera with "
        "invisible ones given zero opacity, so sizes are fixed. The exchange is proportional to "
        "Gaussians x cameras and precedes all rendering; a fast kernel culls and packs visible "
        "Gaussians per destination, overlaps the exchange with projection, and rasterizes by "
        "tiles rather than densely. Float32 only, as gsplat's projection and rasterization are fp32."
    ),
    categories=("spatial",),
    source=Source("gsplat", "gsplat/rendering.py: rasterization (distributed=True, packed=False)",
                  "https://github.com/nerfstudio-project/gsplat"),
    collectives=("all_gather", "all_to_all"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"gaussians_per_rank": 32, "cameras_per_rank": 2, "h": 8, "w": 8},
           "default": {"gaussians_per_rank": 32768, "cameras_per_rank": 4, "h": 32, "w": 32}},
    tolerances=tolerances(float32=(1e-4, 1e-3)),
    dtypes=(torch.float32,),
    traffic=roofline,
)

"""Oracles for the spatial (12xx) and other (13xx) families, computed in one process.

Each one rebuilds the global object the problem shards (the whole field, the whole batch, the
whole set of atoms, Gaussians, keys or matrices) from every rank's inputs, applies the dense math
in float64 (autograd for gradients, a global sort or a brute-force search for the selection
problems) and slices out what each rank should hold.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import problems

from . import WORLD, Inputs, each, xs

f64 = torch.float64


def cat(inputs: Inputs, name: str, dim: int = 0) -> torch.Tensor:
    return torch.cat(xs(inputs, name), dim=dim).double()


def ri(z: torch.Tensor) -> torch.Tensor:
    """Complex as trailing real/imaginary pairs."""
    return torch.view_as_real(z.contiguous())


# ------------------------------------------------------------------------------------ spatial


def rfft2(inputs: Inputs):
    # The whole real field [B, C, H, W] (split along W), its orthonormal 2D real FFT, rows of H
    # per rank.
    x = cat(inputs, "x", dim=-1)
    spec = torch.fft.rfft2(x, norm="ortho")  # [B, C, H, W // 2 + 1]
    return each(lambda r: ri(spec.chunk(WORLD, dim=-2)[r]))


def _grid_position(slug: str) -> tuple[dict[int, int], dict[int, int], int, int]:
    # Each rank's index inside its h group and w group, from the problem's group layout.
    layout = problems.get(slug).process_groups(WORLD)
    h_pos = {r: g.index(r) for g in layout["h_group"] for r in g}
    w_pos = {r: g.index(r) for g in layout["w_group"] for r in g}
    return h_pos, w_pos, len(layout["h_group"][0]), len(layout["w_group"][0])


def makani_fft2(inputs: Inputs):
    h_pos, w_pos, ph, pw = _grid_position("makani-distributed-fft2-pencil")
    # Reassemble the global lat-lon grid from the (h, w) tiles.
    tiles = {(h_pos[r], w_pos[r]): inputs[r]["x"].double() for r in range(WORLD)}
    x = torch.cat([torch.cat([tiles[(i, j)] for j in range(pw)], dim=-1) for i in range(ph)],
                  dim=-2)
    nlat, nlon = x.shape[-2:]
    lmax, mmax = nlat // 2, nlon // 4
    spec = torch.fft.fft(torch.fft.rfft(x, dim=-1, norm="ortho"), dim=-2, norm="ortho")
    spec = spec[..., :mmax]
    # Lowest meridional wavenumbers: 0 .. ceil(lmax/2)-1 and the floor(lmax/2) most negative.
    keep = list(range(math.ceil(lmax / 2))) + list(range(nlat - lmax // 2, nlat))
    spec = spec[..., keep, :]
    return each(lambda r: ri(spec.chunk(ph, dim=-2)[h_pos[r]].chunk(pw, dim=-1)[w_pos[r]]))


def halo_conv2d(inputs: Inputs):
    x = cat(inputs, "x", dim=2)
    w, b = inputs[0]["weight"].double(), inputs[0]["bias"].double()
    y = F.conv2d(x, w, b, padding=w.shape[-1] // 2)
    return each(lambda r: y.chunk(WORLD, dim=2)[r])


def causal_conv3d(inputs: Inputs):
    # The whole clip, causally padded in time by repeating the first frame, zero-padded in space.
    x = cat(inputs, "x", dim=2)
    w, b = inputs[0]["weight"].double(), inputs[0]["bias"].double()
    kt, kh, kw = w.shape[-3:]
    x = torch.cat([x[:, :, :1]] * (kt - 1) + [x], dim=2)
    y = F.conv3d(x, w, b, padding=(0, kh // 2, kw // 2))
    return each(lambda r: y.chunk(WORLD, dim=2)[r])


def sht(inputs: Inputs):
    x = cat(inputs, "x", dim=-1)  # [B, C, nlat, nlon]
    weights = cat(inputs, "weights")  # [mmax, lmax, nlat]
    mmax = weights.shape[0]
    # Fourier coefficients along each latitude ring (2 pi / nlon sum), first mmax orders, then
    # the Legendre quadrature sum over latitude for each order.
    fourier = 2 * math.pi * torch.fft.rfft(x, dim=-1, norm="forward")[..., :mmax]
    coeff = torch.einsum("bckm,mlk->bclm", fourier, weights.to(fourier.dtype))
    return each(lambda r: ri(coeff.chunk(WORLD, dim=-1)[r]))


# gsplat: the scene (every rank's Gaussians) rendered into every camera by one process.
GS_NEAR, GS_EPS2D = 0.01, 0.3


def _quat_to_rot(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = (q / q.norm(dim=-1, keepdim=True)).unbind(-1)
    return torch.stack([
        torch.stack([w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z], -1),
    ], dim=-2)


def _render(means, rot, scales, opac, colors, view, k, background):
    # One camera, every Gaussian, composited front to back over all pixels in float64.
    height, width = background.shape[:2]
    cov = rot @ torch.diag_embed(scales * scales) @ rot.mT  # world covariance
    r_w, t_w = view[:3, :3], view[:3, 3]
    p = means @ r_w.T + t_w
    cov_c = r_w @ cov @ r_w.T
    splats = []
    for g in range(means.shape[0]):
        x, y, z = p[g].tolist()
        if z <= GS_NEAR:
            continue
        jac = torch.tensor([[k[0, 0] / z, 0.0, -k[0, 0] * x / z ** 2],
                            [0.0, k[1, 1] / z, -k[1, 1] * y / z ** 2]], dtype=f64)
        cov2 = jac @ cov_c[g] @ jac.T + GS_EPS2D * torch.eye(2, dtype=f64)
        if torch.linalg.det(cov2) <= 0:
            continue
        center = torch.stack([k[0, 0] * x / z + k[0, 2], k[1, 1] * y / z + k[1, 2]])
        splats.append((z, g, center, torch.linalg.inv(cov2)))
    splats.sort(key=lambda s: (s[0], s[1]))  # front to back, ties in scene order
    ys, xs_ = torch.meshgrid(torch.arange(height, dtype=f64) + 0.5,
                             torch.arange(width, dtype=f64) + 0.5, indexing="ij")
    trans = torch.ones(height, width, dtype=f64)
    rgb = torch.zeros(height, width, 3, dtype=f64)
    for _, g, center, conic in splats:
        dx, dy = xs_ - center[0], ys - center[1]
        sigma = 0.5 * (conic[0, 0] * dx * dx + conic[1, 1] * dy * dy) + conic[0, 1] * dx * dy
        alpha = (opac[g] * torch.exp(-sigma)).clamp(max=0.999)
        alpha = torch.where((sigma >= 0) & (alpha >= 1 / 255), alpha, torch.zeros_like(alpha))
        rgb += (trans * alpha).unsqueeze(-1) * colors[g]
        trans = trans * (1 - alpha)
    alphas = 1 - trans
    image = rgb + trans.unsqueeze(-1) * background
    return image, alphas


def gsplat(inputs: Inputs):
    means, quats, scales = cat(inputs, "means"), cat(inputs, "quats"), cat(inputs, "scales")
    opac, colors = cat(inputs, "opacities"), cat(inputs, "colors")
    rot = _quat_to_rot(quats)
    outs = []
    for i in inputs:
        renders = [_render(means, rot, scales, opac, colors, i["viewmats"][c].double(),
                           i["ks"][c].double(), i["backgrounds"][c].double())
                   for c in range(i["viewmats"].shape[0])]
        outs.append([torch.stack([img for img, _ in renders]),
                     torch.stack([alp for _, alp in renders])])
    return outs


DP_RCUT = 1.0


def deepmd(inputs: Inputs):
    # All atoms of the periodic box; each local atom sums the switched features of every other
    # atom within the cutoff, minimum image in all three directions.
    box = inputs[0]["box"].double()
    pos, feat = cat(inputs, "coord"), cat(inputs, "feat")
    d = pos.unsqueeze(1) - pos.unsqueeze(0)
    d = d - box * torch.round(d / box)
    r = d.norm(dim=-1)
    sw = torch.where(r < DP_RCUT, (1 - r / DP_RCUT) ** 2, torch.zeros_like(r))
    sw.fill_diagonal_(0.0)
    out = sw @ feat
    return each(lambda r: out.chunk(WORLD)[r])


def fairchem(inputs: Inputs):
    # Total energy of every rank's edges, forces by autograd (edge coefficients held fixed).
    pos = inputs[0]["pos"].double().requires_grad_(True)
    h = cat(inputs, "h_local")
    n, dim = inputs[0]["h_local"].shape
    target = torch.arange(WORLD * n).unsqueeze(1).expand(-1, inputs[0]["nbr"].shape[1])
    source = torch.cat(xs(inputs, "nbr"))
    coef = torch.tanh((h[target] * h[source]).sum(-1) / math.sqrt(dim))
    energy = (coef * torch.exp(-0.5 * (pos[target] - pos[source]).pow(2).sum(-1))).sum()
    (grad,) = torch.autograd.grad(energy, pos)
    return [[energy.detach().reshape(1), -grad] for _ in range(WORLD)]


def instance_norm(inputs: Inputs):
    x = cat(inputs, "x", dim=2)
    w, b = inputs[0]["weight"].double(), inputs[0]["bias"].double()
    y = F.instance_norm(x, weight=w, bias=b, eps=1e-5)
    return each(lambda r: y.chunk(WORLD, dim=2)[r])


# -------------------------------------------------------------------------------------- other


def sinkhorn(inputs: Inputs):
    temp, iters = 0.07, 3
    q = torch.exp(cat(inputs, "teacher_output") / temp)  # [global batch, prototypes]
    batch, k = q.shape
    q = q / q.sum()
    for _ in range(iters):
        q = q / q.sum(0, keepdim=True) / k  # every prototype gets mass 1 / K
        q = q / q.sum(1, keepdim=True) / batch  # every sample gets mass 1 / B
    q = q * batch
    return each(lambda r: q.chunk(WORLD)[r])


def moco(inputs: Inputs):
    keys = cat(inputs, "keys")
    perm = inputs[0]["perm"]  # group rank 0's permutation
    w, b = inputs[0]["weight"].double(), inputs[0]["bias"].double()
    bsz = keys.shape[0] // WORLD
    # Shuffled slot j holds sample perm[j]; slot j is normalised with the other samples of its
    # rank's slice; each sample returns to its own position.
    out = torch.empty_like(keys)
    for s in range(WORLD):
        ids = perm[s * bsz:(s + 1) * bsz]
        out[ids] = F.batch_norm(keys[ids], None, None, w, b, training=True, eps=1e-5)
    return each(lambda r: out.chunk(WORLD)[r])


def clip(inputs: Inputs):
    img = cat(inputs, "image_features").requires_grad_(True)
    txt = cat(inputs, "text_features").requires_grad_(True)
    s = inputs[0]["logit_scale"].double()
    bsz = img.shape[0] // WORLD
    losses = []
    for r in range(WORLD):
        rows = slice(r * bsz, (r + 1) * bsz)
        labels = torch.arange(r * bsz, (r + 1) * bsz)
        losses.append((F.cross_entropy(s * img[rows] @ txt.T, labels)
                       + F.cross_entropy(s * txt[rows] @ img.T, labels)) / 2)
    g_img, g_txt = torch.autograd.grad(sum(losses), (img, txt))
    return [[losses[r].detach().reshape(1), g_img.chunk(WORLD)[r], g_txt.chunk(WORLD)[r]]
            for r in range(WORLD)]


def knn(inputs: Inputs):
    k, temp, classes = 20, 0.07, 1000
    train, labels = cat(inputs, "train_features"), torch.cat(xs(inputs, "train_labels"))
    outs = []
    for i in inputs:
        sims = i["queries"].double() @ train.T
        # Brute force: descending similarity, ties to the lower global train index.
        order = torch.sort(-sims, dim=1, stable=True).indices[:, :k]
        top = torch.gather(sims, 1, order)
        nbr_labels = labels[order]
        probs = torch.zeros(sims.shape[0], classes, dtype=f64)
        probs.scatter_add_(1, nbr_labels, torch.softmax(top / temp, dim=1))
        outs.append([probs, top, nbr_labels])
    return outs


def torchrec(inputs: Inputs):
    tables = cat(inputs, "tables")  # [features, rows, dim], rank r's tables in order
    ids = torch.cat(xs(inputs, "ids"))  # [global batch, features, pooling]
    f = torch.arange(tables.shape[0]).view(1, -1, 1)
    pooled = tables[f, ids].sum(dim=2)  # [global batch, features, dim]
    out = pooled.reshape(pooled.shape[0], -1)
    return each(lambda r: out.chunk(WORLD)[r])


def sample_sort(inputs: Inputs):
    keys, payload = torch.cat(xs(inputs, "keys")), torch.cat(xs(inputs, "payload"))
    n = inputs[0]["keys"].shape[0]
    # Splitters by the stated convention: 4 * world regular samples of each rank's sorted keys
    # at (j + 1) * n // (s + 1), splitters at sorted sample positions (i + 1) * s.
    s = 4 * WORLD
    samples = torch.cat([torch.sort(x).values[[(j + 1) * n // (s + 1) for j in range(s)]]
                         for x in xs(inputs, "keys")])
    splitters = torch.sort(samples).values[[(i + 1) * s for i in range(WORLD - 1)]].tolist()
    # One global stable sort; rank r holds the keys in [splitter r - 1, splitter r).
    order = torch.sort(keys, stable=True).indices
    sk = keys[order]
    bounds = [-math.inf] + splitters + [math.inf]
    outs = []
    for r in range(WORLD):
        sel = (sk >= bounds[r]) & (sk < bounds[r + 1])
        outs.append([sk[sel], payload[order[sel]], order[sel]])
    return outs


def grpo(inputs: Inputs):
    clip_eps, adv_eps = 0.2, 1e-6
    r_local = inputs[0]["rewards"].shape[0]
    gsize = 4 if r_local * WORLD < 256 else 16
    # Global sample g = i * world + r (round-robin deal); prompt p owns samples p*G .. p*G+G-1.
    rewards = torch.stack(xs(inputs, "rewards"), dim=1).reshape(-1).double()
    grouped = rewards.view(-1, gsize)
    adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + adv_eps))
    adv = adv.reshape(r_local, WORLD)  # [local index, rank]
    logp = [i["logprobs"].double().requires_grad_(True) for i in inputs]
    total_tokens = sum(int(i["lengths"].sum()) for i in inputs)
    loss = 0.0
    for r, i in enumerate(inputs):
        seq = i["logprobs"].shape[1]
        mask = (torch.arange(seq).unsqueeze(0) < i["lengths"].unsqueeze(1)).double()
        ratio = torch.exp(logp[r] - i["old_logprobs"].double())
        a = adv[:, r].unsqueeze(1)
        per_token = torch.maximum(-a * ratio, -a * ratio.clamp(1 - clip_eps, 1 + clip_eps))
        loss = loss + (per_token * mask).sum() / total_tokens
    grads = torch.autograd.grad(loss, logp)
    return [[loss.detach().reshape(1), grads[r], adv[:, r]] for r in range(WORLD)]


def muon(inputs: Inputs):
    # Single-process Muon (KellerJordan/Muon muon.py) on every matrix: Nesterov momentum, the
    # bf16 quintic Newton-Schulz orthogonalisation, shape scaling, decoupled weight decay.
    lr, wd, beta = 0.02, 0.01, 0.95
    params, grads, mom = inputs[0]["params"], inputs[0]["grads"], inputs[0]["momentum"]

    def zeropower(g: torch.Tensor) -> torch.Tensor:
        a, b, c = (3.4445, -4.7750, 2.0315)
        x = g.bfloat16()
        if g.size(-2) > g.size(-1):
            x = x.mT
        x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
        for _ in range(5):
            aa = x @ x.mT
            x = a * x + (b * aa + c * aa @ aa) @ x
        return x.mT if g.size(-2) > g.size(-1) else x

    new = []
    for p, g, m in zip(params, grads, mom):
        m = m + (1 - beta) * (g.double() - m.double())
        update = g.double() + beta * (m - g.double())
        ortho = zeropower(update.float()).double() * max(1, p.shape[0] / p.shape[1]) ** 0.5
        new.append(p.double() * (1 - lr * wd) - lr * ortho)
    out = torch.stack(new)
    return each(lambda r: out)


def shampoo(inputs: Inputs):
    eps = 1e-8
    g = inputs[0]["grads"].double()
    left, right = inputs[0]["left_inv_root"].double(), inputs[0]["right_inv_root"].double()
    ada = inputs[0]["adagrad_state"].double()
    direction = left @ g @ right
    adagrad_dir = g / (ada.sqrt() + eps)
    scale = adagrad_dir.flatten(1).norm(dim=1) / (direction.flatten(1).norm(dim=1) + eps)
    out = direction * scale.view(-1, 1, 1)
    return each(lambda r: out)


ORACLES = {
    "physicsnemo-distributed-rfft2": (rfft2, 1e-5),
    "makani-distributed-fft2-pencil": (makani_fft2, 1e-5),
    "halo-exchange-conv2d": (halo_conv2d, 1e-5),
    "cogvideo-cp-causal-conv3d": (causal_conv3d, 1e-5),
    "torch-harmonics-distributed-sht": (sht, 1e-5),
    "gsplat-distributed-rasterization": (gsplat, 1e-5),
    "deepmd-ghost-atom-exchange": (deepmd, 1e-5),
    "fairchem-graph-parallel-forces": (fairchem, 1e-5),
    "makani-distributed-instance-norm": (instance_norm, 1e-5),
    "dino-sinkhorn-knopp": (sinkhorn, 1e-6),
    "moco-shuffle-bn": (moco, 1e-5),
    "clip-gather-contrastive-loss": (clip, 5e-7),
    "dinov2-knn-eval": (knn, 1e-6),
    "torchrec-tw-pooled-embedding": (torchrec, 1e-6),
    "distributed-sample-sort": (sample_sort, 0.0),
    "grpo-policy-loss": (grpo, 1e-6),
    "muon-distributed-step": (muon, 1e-6),
    "shampoo-ddp-distributor": (shampoo, 1e-5),
}

SKIPPED: dict[str, str] = {}

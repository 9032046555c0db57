"""OpenCLIP contrastive loss with all-gathered features, forward and backward (local loss)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(image_features: torch.Tensor, text_features: torch.Tensor,
              logit_scale: torch.Tensor, *, group: dist.ProcessGroup):
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    b, d = image_features.shape
    img, txt = image_features.float(), text_features.float()
    # gather_features (gather_with_grad=True): every rank sees the global batch.
    all_img = torch.empty((world * b, d), dtype=torch.float32, device=img.device)
    all_txt = torch.empty_like(all_img)
    dist.all_gather_into_tensor(all_img, img, group=group)
    dist.all_gather_into_tensor(all_txt, txt, group=group)
    s = logit_scale.float()
    # local_loss=True: this rank's rows against every column; its positives sit at rank * b.
    logits_per_image = s * img @ all_txt.t()
    logits_per_text = s * txt @ all_img.t()
    labels = torch.arange(b, device=img.device) + rank * b
    lpi = torch.log_softmax(logits_per_image, dim=1)
    lpt = torch.log_softmax(logits_per_text, dim=1)
    rows = torch.arange(b, device=img.device)
    loss = -(lpi[rows, labels].mean() + lpt[rows, labels].mean()) / 2
    # Backward of this rank's loss (softmax - one-hot) / (2 b).
    g_pi = lpi.exp()
    g_pi[rows, labels] -= 1
    g_pi.mul_(1.0 / (2 * b))
    g_pt = lpt.exp()
    g_pt[rows, labels] -= 1
    g_pt.mul_(1.0 / (2 * b))
    grad_img = s * (g_pi @ all_txt)
    grad_txt = s * (g_pt @ all_img)
    # Gradients w.r.t. the gathered copies flow back to their owners: the backward of
    # all_gather is a reduce-scatter (sum over every rank's loss).
    grad_all_img = s * (g_pt.t() @ txt)
    grad_all_txt = s * (g_pi.t() @ img)
    both = torch.stack([grad_all_img.view(world, b, d), grad_all_txt.view(world, b, d)], dim=1)
    mine = torch.empty((2 * b, d), dtype=torch.float32, device=img.device)
    dist.reduce_scatter_tensor(mine, both.reshape(world * 2 * b, d).contiguous(),
                               op=dist.ReduceOp.SUM, group=group)
    mine = mine.view(2, b, d)
    grad_img = grad_img + mine[0]
    grad_txt = grad_txt + mine[1]
    return (loss.reshape(1), grad_img.to(image_features.dtype),
            grad_txt.to(text_features.dtype))


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, d = case["batch"] // case.world_size, case["dim"]
    f32 = torch.float32
    img = torch.nn.functional.normalize(case.randn(b, d, stream="img", dtype=f32), dim=-1)
    # Text features correlated with their image so the positives stand out, as mid-training:
    # with much stronger correlation (or a large scale) the softmax is one-hot, and the loss and
    # gradients are so small that zeros would pass the tolerance.
    txt = torch.nn.functional.normalize(img + 0.5 * case.randn(b, d, stream="txt", dtype=f32), dim=-1)
    return {
        "image_features": img.to(case.dtype),
        "text_features": txt.to(case.dtype),
        # logit_scale.exp() as the model returns it: 1/0.07 at initialisation, growing in training.
        "logit_scale": case.rand(1, stream="scale", shared=True, dtype=f32, low=10.0, high=30.0),
    }


def roofline(s: Setting) -> Traffic:
    n, bg, d = s.world_size, s["batch"], s["dim"]
    b = bg // n
    feat = bg * d * s.itemsize
    # Forward: gather both feature sets; backward: reduce-scatter both gradients (fp32 sums).
    link = 2 * traffic.all_gather(feat, n) + traffic.reduce_scatter(2 * bg * d * 4, n)
    logits = 2 * b * bg * 4
    return Traffic(link_bytes=link, hbm_bytes=2 * feat + 2 * logits + 2 * b * d * s.itemsize,
                   flops=6 * 2 * b * bg * d + 10 * 2 * b * bg)


PROBLEM = Problem(
    id=1303,
    slug="clip-gather-contrastive-loss",
    title="CLIP contrastive loss over all-gathered features (forward + backward)",
    description=(
        "OpenCLIP's ClipLoss trains on the global batch: image and text embeddings are "
        "all-gathered from every data-parallel rank (gather_with_grad), each rank scores its own "
        "rows against all gathered columns (local_loss), and the symmetric cross-entropy puts "
        "the positives on the diagonal block of that rank. In the backward the gradient "
        "reaching the gathered copies is reduce-scattered back to their owners and added to "
        "the direct gradient. With 8k-32k batches the all-gathers and the reduce-scatter sit "
        "between large GEMMs; a fast kernel overlaps them chunk by chunk with the logit GEMMs "
        "and fuses the softmax into them without materialising the logits. The reference "
        "computes in fp32 from the given features; it returns the rank's loss and the "
        "gradients of the summed loss of all ranks w.r.t. the local features."
    ),
    categories=("other",),
    source=Source("OpenCLIP", "src/open_clip/loss.py: ClipLoss.forward",
                  "https://github.com/mlfoundations/open_clip"),
    collectives=("all_gather", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 32, "dim": 16}, "default": {"batch": 8192, "dim": 512}},
    # Gradients are ~1e-4 at the default size (softmax minus one-hot, over 2 x the local batch):
    # atol stays well below them, so a missing term cannot hide inside it.
    tolerances=tolerances(bfloat16=(1e-6, 2e-2), float32=(1e-7, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)

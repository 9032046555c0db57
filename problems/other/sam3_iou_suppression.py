"""SAM 3 video tracking: masklets spread over GPUs, gathered, overlapping ones suppressed."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

NO_OBJ_SCORE = -1024.0  # the logit SAM writes for "no object here"
IOU_THRESHOLD = 0.7  # suppress_overlapping_based_on_recent_occlusion_threshold in the video config


def _gather_uneven(x: torch.Tensor, counts: list[int], group: dist.ProcessGroup) -> torch.Tensor:
    # Pad to the largest count, gather equal blocks, keep each rank's valid rows.
    world, longest = len(counts), max(counts)
    padded = x.new_zeros((longest,) + tuple(x.shape[1:]))
    padded[: x.shape[0]] = x
    out = x.new_empty((world * longest,) + tuple(x.shape[1:]))
    dist.all_gather_into_tensor(out, padded, group=group)
    blocks = out.view(world, longest, *x.shape[1:])
    return torch.cat([blocks[r, : counts[r]] for r in range(world)])


def reference(masks: torch.Tensor, scores: torch.Tensor, num_obj_per_gpu: torch.Tensor,
              last_occluded: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # masks [n, H, W]: low-res mask logits of the n masklets this GPU tracks; scores [n, 1];
    # num_obj_per_gpu [world] and last_occluded [sum n] (frame of each masklet's latest
    # occlusion, -1 if never) are the same on every rank. Returns every masklet's mask logits
    # with suppressed ones overwritten, every score, and the suppression flags [sum n] (bool).
    counts = num_obj_per_gpu.tolist()
    all_masks = _gather_uneven(masks, counts, group)
    all_scores = _gather_uneven(scores, counts, group)
    # Pairwise IoU of the binarised masks; the pixel counts are integers, exact in float32.
    binary = (all_masks > 0).flatten(1).float()
    inter = binary @ binary.T
    area = binary.sum(dim=1)
    iou = inter / (area[:, None] + area[None, :] - inter).clamp_min(1.0)
    overlap = torch.triu(iou >= IOU_THRESHOLD, diagonal=1)
    # Of two overlapping masklets, the one occluded more recently is the likelier duplicate.
    last_i, last_j = last_occluded[:, None], last_occluded[None, :]
    drop_i = overlap & (last_i > last_j) & (last_j > -1)
    drop_j = overlap & (last_j > last_i) & (last_i > -1)
    suppressed = drop_i.any(dim=1) | drop_j.any(dim=0)
    out_masks = torch.where(suppressed[:, None, None],
                            torch.full_like(all_masks, NO_OBJ_SCORE), all_masks)
    return out_masks, all_scores, suppressed


def _counts(s: Setting) -> list[int]:
    # The tracker balances masklets over GPUs; odd ranks carry one more.
    return [s["objects"] + r % 2 for r in range(s.world_size)]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    counts = _counts(case)
    mine, first = counts[case.rank], sum(counts[: case.rank])
    side = case["side"]
    # Masklets of one physical object come from shared prototypes plus per-masklet noise, so
    # some pairs overlap above the threshold (duplicates) and most do not.
    prototypes = case.randn(case["prototypes"], side, side, stream="prototypes", shared=True,
                            dtype=torch.float32)
    which = (torch.arange(first, first + mine, device=prototypes.device) * 7) % case["prototypes"]
    noise = case.randn(mine, side, side, stream="noise", dtype=torch.float32, std=0.2)
    return {"masks": (prototypes[which] + noise).to(case.dtype),
            "scores": case.randn(mine, 1, stream="scores"),
            "num_obj_per_gpu": torch.tensor(counts, dtype=torch.int64, device=prototypes.device),
            "last_occluded": case.randint(-1, 6, sum(counts), stream="occluded", shared=True)}


def roofline(s: Setting) -> Traffic:
    n, total = s.world_size, sum(_counts(s))
    mask = s["side"] ** 2 * s.itemsize
    return Traffic(link_bytes=traffic.all_gather(total * (mask + s.itemsize), n),
                   hbm_bytes=2 * total * mask,
                   flops=2 * total * total * s["side"] ** 2)


PROBLEM = Problem(
    id=1310,
    slug="sam3-masklet-iou-suppression",
    title="SAM 3 multi-GPU masklet gather and occlusion-based overlap suppression",
    description=(
        "SAM 3's video predictor tracks many masklets at once and spreads them over GPUs "
        "(num_obj_per_gpu), each GPU propagating its own through the memory tracker. Every "
        "frame the per-GPU low-resolution mask logits and scores are all-gathered so that the "
        "planner sees all objects, and masklets that overlap another above an IoU threshold "
        "are suppressed when they were occluded more recently than their partner (a "
        "duplicate re-acquired after an occlusion), their logits overwritten with the "
        "no-object score. The gather is uneven (objects per GPU differ) and sits on the "
        "per-frame latency path, followed by an all-pairs IoU over 256x256 masks; a fast "
        "kernel overlaps the pairwise counts with the arrival of peers' masks."
    ),
    categories=("other",),
    source=Source("SAM 3", "sam3/model/sam3_video_base.py: Sam3VideoBase "
                  "(suppress_overlapping_based_on_recent_occlusion over num_obj_per_gpu)",
                  "https://github.com/facebookresearch/sam3"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"objects": 3, "side": 16, "prototypes": 4},
           "default": {"objects": 16, "side": 256, "prototypes": 32}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    tags=("inference", "latency", "video", "variable-size"),
    pkb_ids=(81,),
)

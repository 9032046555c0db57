# Follows ParallelKernelBench reference/81_sam3_allgather_iou_suppression.py: masks and scores of
# every rank are gathered in rank order as float32; of two masks overlapping at IoU >= threshold,
# the one occluded later (not if the other never was) is suppressed and its logits set to -10.
from typing import List, Optional

import torch
import torch.distributed as dist


def _gathered(rows: torch.Tensor, counts: List[int], group: dist.ProcessGroup) -> torch.Tensor:
    padded = rows.new_zeros((max(counts),) + tuple(rows.shape[1:]))
    padded[: rows.shape[0]] = rows
    parts = [torch.empty_like(padded) for _ in counts]
    dist.all_gather(parts, padded, group=group)
    return torch.cat([part[:n] for part, n in zip(parts, counts)])


@torch.no_grad()
def solution(low_res_masks_local: torch.Tensor, obj_scores_local: torch.Tensor,
             num_obj_per_gpu: List[int], last_occluded: torch.Tensor, iou_threshold: float = 0.7,
             reverse: bool = False, group: Optional[dist.ProcessGroup] = None):
    group = group or dist.group.WORLD
    counts = [int(n) for n in num_obj_per_gpu]
    masks = _gathered(low_res_masks_local.float(), counts, group)
    scores = _gathered(obj_scores_local.float(), counts, group)
    on = (masks > 0).flatten(1).float()
    shared = on @ on.T
    area = on.sum(dim=1)
    iou = shared / (area[:, None] + area[None, :] - shared).clamp_min(1.0)
    pairs = torch.triu(iou >= iou_threshold, diagonal=1)
    occluded = last_occluded.long()
    later = occluded[:, None] < occluded[None, :] if reverse else occluded[:, None] > occluded[None, :]
    first_goes = (pairs & later & (occluded[None, :] > -1)).any(dim=1)
    second_goes = (pairs & later.T & (occluded[:, None] > -1)).any(dim=0)
    suppressed = first_goes | second_goes
    masks[suppressed] = -10.0
    return masks, scores, suppressed

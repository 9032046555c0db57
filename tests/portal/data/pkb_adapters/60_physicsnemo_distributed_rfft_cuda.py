# Follows ParallelKernelBench reference/59_physicsnemo_distributed_rfft.py: x is split along
# dim[1]; FFT along dim[0] (length s[0]), an all-to-all so that dim[0] is split instead, FFT along
# dim[1] (length s[1]), then the s[1] // 2 + 1 non-negative frequencies, as complex.
from typing import Optional, Sequence

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(x: torch.Tensor, s: Sequence[int], dim: Sequence[int], norm: str = "ortho",
             group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    first, second = (int(d) % x.ndim for d in dim)
    spectrum = torch.fft.fft(x, n=int(s[0]), dim=first, norm=norm)
    # Piece j of the first dimension goes to rank j; real pairs, since gloo has no complex.
    send = torch.view_as_real(torch.stack(spectrum.chunk(world, dim=first))).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    slab = torch.cat(torch.view_as_complex(recv).unbind(0), dim=second)
    out = torch.fft.fft(slab, n=int(s[1]), dim=second, norm=norm)
    return out.narrow(second, 0, out.shape[second] // 2 + 1).contiguous()

# Follows ParallelKernelBench reference/66_gnn_feature_exchange_all2all_backward.py (GraphBolt's
# convention): block m of the counts and rows belongs to peer (rank + m) % world. Gradient rows
# go back by counts_sent, come in by counts_received and are summed into seed_inverse_ids' rows.
from typing import List, Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(grad_output: torch.Tensor, seed_inverse_ids: torch.Tensor, seed_size: int,
             counts_sent: List[int], counts_received: List[int],
             group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    peer_block = [(peer - rank) % world for peer in range(world)]
    blocks = grad_output.split(counts_sent)
    send = torch.cat([blocks[m] for m in peer_block])
    recv = grad_output.new_empty((sum(counts_received), grad_output.shape[1]))
    dist.all_to_all_single(recv, send, [counts_received[m] for m in peer_block],
                           [counts_sent[m] for m in peer_block], group=group)
    by_peer = recv.split([counts_received[m] for m in peer_block])
    back = torch.cat([by_peer[(rank + m) % world] for m in range(world)])
    total = torch.zeros((seed_size, grad_output.shape[1]), dtype=torch.float32, device=back.device)
    total.index_add_(0, seed_inverse_ids, back.float())
    return total.to(grad_output.dtype)

# Follows ParallelKernelBench reference/65_gnn_feature_exchange_all2all.py (GraphBolt's
# convention): block m of the counts and of the rows belongs to peer (rank + m) % world, both for
# the answers sent (counts_received, rows local_features[seed_inverse_ids]) and the rows received.
from typing import List, Optional

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(local_features: torch.Tensor, seed_inverse_ids: torch.Tensor, counts_sent: List[int],
             counts_received: List[int], group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    peer_block = [(peer - rank) % world for peer in range(world)]  # this rank's block of each peer
    answers = local_features[seed_inverse_ids].split(counts_received)
    send = torch.cat([answers[m] for m in peer_block])
    recv = local_features.new_empty((sum(counts_sent), local_features.shape[1]))
    dist.all_to_all_single(recv, send, [counts_sent[m] for m in peer_block],
                           [counts_received[m] for m in peer_block], group=group)
    by_peer = recv.split([counts_sent[m] for m in peer_block])
    return torch.cat([by_peer[(rank + m) % world] for m in range(world)])

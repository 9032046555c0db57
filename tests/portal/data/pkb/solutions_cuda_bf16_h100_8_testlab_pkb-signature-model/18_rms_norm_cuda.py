# ParallelKernelBench signature (reference/18_tp_rms_norm.py), under the name the generated
# files use (18_rms_norm): the importer matches it through its alias.
import torch
import torch.distributed as dist


def solution(local_hidden_states: torch.Tensor, local_weight: torch.Tensor,
             variance_epsilon: float) -> torch.Tensor:
    x = local_hidden_states.float()
    sq = x.pow(2).sum(dim=-1, keepdim=True)
    dist.all_reduce(sq)
    variance = sq / (x.shape[-1] * dist.get_world_size())
    y = x * torch.rsqrt(variance + variance_epsilon)
    return (y * local_weight.float()).to(local_hidden_states.dtype)

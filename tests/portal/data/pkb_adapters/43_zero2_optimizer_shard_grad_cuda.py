# ParallelKernelBench signature (reference/42_zero2_optimizer_shard_grad.py): W1, b1, W2, b2 apart
# (rank 0's authoritative), moments as this rank's slice of their unpadded concatenation; plain
# Adam after a reduce-scatter. Returns the 4 parameters (all-gathered) and this rank's moment slices.
import torch
import torch.distributed as dist
import torch.nn.functional as F


def solution(X_local, y_local, W1, b1, W2, b2, exp_avg_part, exp_avg_sq_part,
             lr, beta1, beta2, eps, step):
    world, rank = dist.get_world_size(), dist.get_rank()
    shapes = [W1, b1, W2, b2]
    flat = torch.cat([t.reshape(-1) for t in shapes])
    dist.broadcast(flat, src=0)
    part = exp_avg_part.numel()
    assert flat.numel() == part * world

    params = [piece.view_as(t).detach().requires_grad_(True)
              for piece, t in zip(flat.split([t.numel() for t in shapes]), shapes)]
    with torch.enable_grad():
        hidden = F.relu(F.linear(X_local, params[0], params[1]))
        F.mse_loss(F.linear(hidden, params[2], params[3]), y_local).backward()

    grad = torch.cat([p.grad.reshape(-1) for p in params])
    g = torch.empty(part, dtype=grad.dtype, device=grad.device)
    dist.reduce_scatter_tensor(g, grad)
    g /= world
    mine = slice(rank * part, (rank + 1) * part)

    m = exp_avg_part * beta1 + g * (1 - beta1)
    v = exp_avg_sq_part * beta2 + g * g * (1 - beta2)
    step_part = (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps)
    new_part = flat[mine] - lr * step_part

    updated = torch.empty_like(flat)
    dist.all_gather_into_tensor(updated, new_part.contiguous())
    news = [piece.view_as(t) for piece, t in zip(updated.split([t.numel() for t in shapes]), shapes)]
    return (*news, m, v)

# ParallelKernelBench signature (reference/47_fsdp_step_e2e.py): this rank's slice of the
# unpadded flat parameters and Adam moments, the parameter shapes (W1, b1, W2, b2) and the AdamW
# hyperparameters as arguments; returns the updated shard and both moment shards.
import torch
import torch.distributed as dist
import torch.nn.functional as F


def solution(X_local, y_local, flat_param_shard, param_shapes, exp_avg_shard, exp_avg_sq_shard,
             lr, beta1, beta2, eps, weight_decay, step):
    world = dist.get_world_size()
    full = torch.empty(world * flat_param_shard.numel(), dtype=flat_param_shard.dtype,
                       device=flat_param_shard.device)
    dist.all_gather_into_tensor(full, flat_param_shard.contiguous())

    sizes = [torch.Size(s).numel() for s in param_shapes]
    params = [piece.view(s).detach().requires_grad_(True)
              for piece, s in zip(full[:sum(sizes)].split(sizes), param_shapes)]
    with torch.enable_grad():
        hidden = F.relu(F.linear(X_local, params[0], params[1]))
        F.mse_loss(F.linear(hidden, params[2], params[3]), y_local).backward()

    grad = torch.cat([p.grad.reshape(-1) for p in params])
    g = torch.empty_like(flat_param_shard)
    dist.reduce_scatter_tensor(g, grad)
    g /= world

    m = exp_avg_shard * beta1 + g * (1 - beta1)
    v = exp_avg_sq_shard * beta2 + g * g * (1 - beta2)
    update = (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps)
    new_shard = flat_param_shard * (1 - lr * weight_decay) - lr * update
    return new_shard, m, v

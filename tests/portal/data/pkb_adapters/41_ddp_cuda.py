# ParallelKernelBench signature (reference/40_ddp.py): W1, b1, W2, b2 and each one's Adam moments
# as separate tensors, rank 0's copy authoritative (broadcast first); plain Adam, no weight decay.
# Returns the 4 parameters, the 4 first moments, then the 4 second moments.
import torch
import torch.distributed as dist
import torch.nn.functional as F


def _broadcast_from_rank0(tensors):
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.broadcast(flat, src=0)
    return [piece.view_as(t) for piece, t in zip(flat.split([t.numel() for t in tensors]), tensors)]


def solution(X_local, y_local, W1, b1, W2, b2,
             exp_avg_W1, exp_avg_b1, exp_avg_W2, exp_avg_b2,
             exp_avg_sq_W1, exp_avg_sq_b1, exp_avg_sq_W2, exp_avg_sq_b2,
             lr, beta1, beta2, eps, step):
    params = [p.detach().requires_grad_(True) for p in _broadcast_from_rank0([W1, b1, W2, b2])]
    firsts = _broadcast_from_rank0([exp_avg_W1, exp_avg_b1, exp_avg_W2, exp_avg_b2])
    seconds = _broadcast_from_rank0([exp_avg_sq_W1, exp_avg_sq_b1, exp_avg_sq_W2, exp_avg_sq_b2])

    with torch.enable_grad():
        hidden = F.relu(F.linear(X_local, params[0], params[1]))
        F.mse_loss(F.linear(hidden, params[2], params[3]), y_local).backward()

    # One all-reduce for the whole gradient, averaged as DDP's reducer does.
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(grad)
    grad /= dist.get_world_size()
    grads = [g.view_as(p) for g, p in zip(grad.split([p.numel() for p in params]), params)]

    correction1, correction2 = 1 - beta1 ** step, 1 - beta2 ** step
    new_params = []
    for p, m, v, g in zip(params, firsts, seconds, grads):
        m.mul_(beta1).add_(g, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        update = (m / correction1) / ((v / correction2).sqrt() + eps)
        new_params.append(p.detach() - lr * update)
    return (*new_params, *firsts, *seconds)

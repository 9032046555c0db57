# ParallelKernelBench signature (reference/84_vocab_parallel_log_prob_topk_chunked_backward.py):
# grad_output [B, S] comes third and the group fourth; chunks as in 83. Returns the float32
# gradient of this rank's logits [B, S, V/P]: g * (onehot(target) - softmax) on kept tokens only.
import torch
import torch.distributed as dist


def _filter(logits, top_k, top_p):
    # Keep the top_k largest, then drop the low tail holding at most 1 - top_p of the mass (the
    # largest always stays). Summed in ascending order as vLLM's sampler does: a token whose
    # cumulative mass sits on the top-p boundary then falls the same way as in the problem's
    # reference (summed in another order it can round to the other side; one such token made
    # this test fail now and then).
    ordered, where = logits.sort(dim=-1, stable=True)
    vocab = ordered.shape[-1]
    kept = torch.ones_like(ordered, dtype=torch.bool)
    if top_k is not None and top_k > 0:
        k = min(int(top_k), vocab)
        kept = ordered >= ordered[:, vocab - k:vocab - k + 1]
    ordered = ordered.masked_fill(~kept, float("-inf"))
    if top_p is not None and top_p < 1.0:
        nucleus = ordered.float().softmax(-1).cumsum(-1) > 1 - top_p
        nucleus[:, -1] = True
        kept = kept & nucleus
        ordered = ordered.masked_fill(~kept, float("-inf"))
    return (torch.empty_like(ordered).scatter_(-1, where, ordered),
            torch.empty_like(kept).scatter_(-1, where, kept))


def _token_rows(flat_logits, group):
    world = dist.get_world_size(group)
    tokens, part = flat_logits.shape
    received = torch.empty(world, tokens // world, part, dtype=flat_logits.dtype,
                           device=flat_logits.device)
    dist.all_to_all_single(received, flat_logits.contiguous(), group=group)
    return received.transpose(0, 1).reshape(tokens // world, world * part)


def _vocab_slices(rows, group):
    world = dist.get_world_size(group)
    local, vocab = rows.shape
    send = rows.reshape(local, world, vocab // world).transpose(0, 1).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group)
    return received.reshape(world * local, vocab // world)


@torch.no_grad()
def solution(vocab_parallel_logits, target, grad_output, tp_group=None, top_k=None, top_p=1.0,
             chunk_size=1):
    group = tp_group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    batch, seq, part = vocab_parallel_logits.shape
    flat = vocab_parallel_logits.reshape(batch * seq, part)
    ids, upstream = target.reshape(-1), grad_output.reshape(-1)
    step = batch * max(1, int(chunk_size))
    grads = []
    for begin in range(0, batch * seq, step):
        chunk = flat[begin:begin + step]
        share = chunk.shape[0] // world
        mine = slice(begin + rank * share, begin + (rank + 1) * share)
        filtered, kept = _filter(_token_rows(chunk, group), top_k, top_p)
        grad = filtered.float().softmax(-1).neg_()
        grad[torch.arange(share, device=grad.device), ids[mine]] += 1.0
        grad *= upstream[mine].float()[:, None]
        grad *= kept
        grads.append(_vocab_slices(grad, group))
    return torch.cat(grads).view(batch, seq, part)

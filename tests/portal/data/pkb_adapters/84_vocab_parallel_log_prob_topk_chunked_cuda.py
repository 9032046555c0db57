# ParallelKernelBench signature (reference/83_vocab_parallel_log_prob_topk_chunked.py): as 82,
# the group third, then top_k, top_p and chunk_size; the flattened B*S tokens are walked
# batch * chunk_size at a time, rank r scoring the r-th 1/P of each chunk.
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


@torch.no_grad()
def solution(vocab_parallel_logits, target, tp_group=None, top_k=None, top_p=1.0, chunk_size=1):
    group = tp_group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    batch, seq, part = vocab_parallel_logits.shape
    flat = vocab_parallel_logits.reshape(batch * seq, part)
    ids = target.reshape(-1)
    step = batch * max(1, int(chunk_size))
    scores = []
    for begin in range(0, batch * seq, step):
        chunk = flat[begin:begin + step]
        share = chunk.shape[0] // world
        rows = _token_rows(chunk, group)
        log_probs = _filter(rows, top_k, top_p)[0].float().log_softmax(-1)
        mine = ids[begin:begin + step][rank * share:(rank + 1) * share]
        picked = log_probs.gather(-1, mine[:, None])[:, 0].contiguous()
        every = torch.empty(chunk.shape[0], dtype=picked.dtype, device=picked.device)
        dist.all_gather_into_tensor(every, picked, group=group)
        scores.append(every)
    return torch.cat(scores).view(batch, seq)

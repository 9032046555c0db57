# ParallelKernelBench signature (reference/82_vocab_parallel_log_prob_topk.py): logits [B, S, V/P]
# and global target ids [B, S]; the group comes third, then top_k and top_p. Rank r scores the
# r-th contiguous 1/P of the flattened B*S tokens; returns float32 log-probs [B, S] on every rank.
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
def solution(vocab_parallel_logits, target, tp_group=None, top_k=None, top_p=1.0):
    group = tp_group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    batch, seq, part = vocab_parallel_logits.shape
    share = batch * seq // world
    rows = _token_rows(vocab_parallel_logits.reshape(batch * seq, part), group)
    log_probs = _filter(rows, top_k, top_p)[0].float().log_softmax(-1)
    mine = target.reshape(-1)[rank * share:(rank + 1) * share]
    picked = log_probs.gather(-1, mine[:, None])[:, 0].contiguous()
    every = torch.empty(batch * seq, dtype=picked.dtype, device=picked.device)
    dist.all_gather_into_tensor(every, picked, group=group)
    return every.view(batch, seq)

"""ParallelKernelBench adapters: data-parallel, ZeRO and FSDP training steps, FSDP x TP, the MoE
combine, and NeMo-RL's vocab-parallel log-probs under top-k/top-p.

See adapter.py for what an adapter is; adapters.py gathers every family's."""

from __future__ import annotations

from problems.training_step import BETA1, BETA2, EPS, LR, WEIGHT_DECAY

from .adapter import Adapter

# PKB's training steps take the optimizer's hyperparameters as arguments; our problems fix them
# (problems/training_step.py). The values are written into the generated source so that the
# wrapped file stands alone.
_HYPER = f"lr={LR!r}, beta1={BETA1!r}, beta2={BETA2!r}, eps={EPS!r}"
_ADAM_ARGS = f"{LR!r}, {BETA1!r}, {BETA2!r}, {EPS!r}"

# PKB passes W1, b1, W2, b2 (and, for DDP, each moment) as separate tensors; ours are one flat
# buffer in that order. Views, no copy.
_MLP_VIEWS = (
    "def _mlp_views(flat, x, y, hidden):\n"
    "    d_in, d_out = x.shape[1], y.shape[1]\n"
    "    sizes = [hidden * d_in, hidden, d_out * hidden, d_out]\n"
    "    w1, b1, w2, b2 = flat[:sum(sizes)].split(sizes)\n"
    "    return [w1.view(hidden, d_in), b1, w2.view(d_out, hidden), b2]\n\n\n"
)

# PKB's 40-42 run Adam without weight decay; ours is AdamW. Decoupled decay is a term of its
# own, p * (1 - lr * wd) - lr * u = (p - lr * u) - lr * wd * p, so it is added after PKB's
# update from the (unmodified) input parameters.
_DECAY = f"    new_params.add_(params, alpha={-LR * WEIGHT_DECAY!r})\n"
_NO_DECAY_NOTE = (f"PKB's Adam has no weight decay: the adapter adds our decoupled decay "
                  f"(lr * {WEIGHT_DECAY}) after PKB's update; PKB's lr/betas/eps are passed ours "
                  f"({_HYPER})")


def _flat(names: str) -> str:
    return f"torch.cat([t.reshape(-1) for t in ({names})])"


_DATA_PARALLEL: tuple[Adapter, ...] = (
    Adapter(40, "ddp-training-step",
            "PKB takes W1, b1, W2, b2 and each Adam moment as separate tensors and returns them "
            "so; ours are flat buffers. " + _NO_DECAY_NOTE,
            "flattening the returned parameters and moments (three copies of the model's "
            "size) and the weight-decay term (one pass over the parameters)",
            _MLP_VIEWS +
            "def solution(x, y, params, exp_avg, exp_avg_sq, hidden, step, *, group):\n"
            "    out = _pkb_solution(x, y, *_mlp_views(params, x, y, hidden),\n"
            "                        *_mlp_views(exp_avg, x, y, hidden),\n"
            "                        *_mlp_views(exp_avg_sq, x, y, hidden),\n"
            f"                        {_ADAM_ARGS}, step)\n"
            f"    new_params = {_flat('out[0:4]')}\n" + _DECAY +
            f"    return new_params, {_flat('out[4:8]')}, {_flat('out[8:12]')}\n"),
)


def _zero_adapter(pkb_id: int, stage: int) -> Adapter:
    return Adapter(
        pkb_id, f"zero{stage}-training-step",
        "PKB takes W1, b1, W2, b2 as separate tensors and returns them so; ours are one flat "
        "buffer (PKB's has no padding: it needs the parameter count divisible by the world "
        "size, as both our sizes are). " + _NO_DECAY_NOTE,
        "flattening the returned parameters (a copy of the model's size) and the weight-decay "
        "term (one pass over the parameters)",
        _MLP_VIEWS +
        "def solution(x, y, params, exp_avg, exp_avg_sq, hidden, step, *, group):\n"
        "    w1, b1, w2, b2, m, v = _pkb_solution(x, y, *_mlp_views(params, x, y, hidden),\n"
        f"                                         exp_avg, exp_avg_sq, {_ADAM_ARGS}, step)\n"
        f"    new_params = {_flat('w1, b1, w2, b2')}\n" + _DECAY +
        "    return new_params, m, v\n")


_FSDP: tuple[Adapter, ...] = (
    Adapter(47, "fsdp-training-step",
            f"PKB takes the parameter shapes and the optimizer's hyperparameters as arguments; "
            f"ours fix them ({_HYPER}, weight_decay={WEIGHT_DECAY!r}). PKB's flat buffer has no "
            f"padding (both our sizes need none)",
            "none",
            "def solution(x, y, param_shard, exp_avg, exp_avg_sq, hidden, step, *, group):\n"
            "    d_in, d_out = x.shape[1], y.shape[1]\n"
            "    shapes = ((hidden, d_in), (hidden,), (d_out, hidden), (d_out,))\n"
            "    return _pkb_solution(x, y, param_shard, shapes, exp_avg, exp_avg_sq,\n"
            f"                         {_ADAM_ARGS}, {WEIGHT_DECAY!r}, step)\n"),
)

_CHUNKS = ("; PKB walks the flattened tokens batch * chunk_size at a time where ours takes "
           "chunk_size positions of every row: the same number of tokens per chunk, and each "
           "token's result is its own")
# The one difference in what is computed: PKB's reference sums the top-p mass in the logits'
# dtype, ours in float32 (sampling_filter.TOP_P_MARGIN says why).
_MASS = ("; PKB's reference sums the top-p mass in the logits' dtype (bfloat16 by default), ours "
         "in float32: a PKB output that sums it in bfloat16 fails the rows whose cut falls within "
         "bfloat16 rounding")
_VOCAB_PARALLEL: tuple[Adapter, ...] = (
    Adapter(82, "vocab-parallel-logprobs-top-k-top-p",
            "PKB takes the group positionally before top_k and top_p" + _MASS, "none",
            "def solution(logits, target, top_k, top_p, *, tp_group):\n"
            "    return _pkb_solution(logits, target, tp_group, top_k, top_p)\n"),
    Adapter(83, "vocab-parallel-logprobs-top-k-top-p-chunked",
            "PKB takes the group positionally before top_k, top_p and chunk_size" + _CHUNKS + _MASS,
            "none",
            "def solution(logits, target, top_k, top_p, chunk_size, *, tp_group):\n"
            "    return _pkb_solution(logits, target, tp_group, top_k, top_p, chunk_size)\n"),
    Adapter(84, "vocab-parallel-logprobs-top-k-top-p-backward",
            "PKB takes the group positionally after grad_output, before top_k, top_p and "
            "chunk_size" + _CHUNKS + _MASS,
            "none",
            "def solution(logits, target, grad_output, top_k, top_p, chunk_size, *, tp_group):\n"
            "    return _pkb_solution(logits, target, grad_output, tp_group, top_k, top_p, "
            "chunk_size)\n"),
)

# PKB's combine takes the dispatch's handle as inputs (splits, per-expert counts, routing map,
# permutation); ours rebuilds it from the routing with a count all-to-all, as our reference does.
_MOE: tuple[Adapter, ...] = (
    Adapter(29, "moe-combine-all-to-all",
            "PKB takes the dispatch handle (splits, the [source rank, local expert] counts, the "
            "[expert, token] routing map, the expert-major token permutation) as inputs, where "
            "ours rebuilds it from topk_idx with a count all-to-all as our reference does; "
            "PKB's expert rows are ordered by local expert then source rank and are exactly "
            "the received ones, ours by source rank then local expert inside a worst-case "
            "buffer; PKB's output takes the dtype its rows and router weights promote to "
            "(float32 for our float32 weights), ours the rows' dtype",
            "the count all-to-all and the handle's index tensors (as our reference builds), a "
            "reordering copy of the received expert rows, and a cast of the [T, H] result to the "
            "rows' dtype where PKB's is float32",
            "def solution(expert_out, topk_idx, topk_weights, num_experts, *, group):\n"
            "    world = dist.get_world_size(group)\n"
            "    tokens = topk_idx.shape[0]\n"
            "    local = num_experts // world\n"
            "    counts = torch.bincount(topk_idx.reshape(-1), minlength=num_experts)\n"
            "    recv_counts = torch.empty_like(counts)\n"
            "    dist.all_to_all_single(recv_counts, counts, group=group)\n"
            "    per_source = recv_counts.view(world, local)  # [source rank, local expert]\n"
            "    home_splits = counts.view(world, local).sum(1).tolist()\n"
            "    away_splits = per_source.sum(1).tolist()\n"
            "    chunks = expert_out[:sum(away_splits)].split(per_source.reshape(-1).tolist())\n"
            "    by_expert = torch.cat([chunks[s * local + e] for e in range(local)\n"
            "                           for s in range(world)])\n"
            "    routing_map = torch.zeros(num_experts, tokens, dtype=torch.bool,\n"
            "                              device=topk_idx.device)\n"
            "    routing_map.scatter_(0, topk_idx.t(), True)\n"
            "    permutation = routing_map.nonzero()[:, 1].contiguous()\n"
            "    out = _pkb_solution(by_expert, topk_weights, topk_idx, num_experts, home_splits,\n"
            "                        away_splits, per_source, routing_map, permutation,\n"
            "                        torch.Size([tokens, expert_out.shape[1]]), group)\n"
            "    return out.to(expert_out.dtype)\n"),
)

# The same full weights on both sides, but PKB's FSDP shard of the gate and up projections holds
# other entries than ours (D rows of its input-major layout, where ours has F rows as FSDP2 cuts
# nn.Linear weights): no view or local copy gets from one to the other, an exchange must.
_FSDP_TP = Adapter(
    48, "fsdp-tp-swiglu-mlp",
    "PKB stores the gate/up weights input-major ([D, F/tp]) and FSDP-shards them along D; ours "
    "are [F/tp, D] shards along F, so the adapter re-shards them with an all-to-all over the "
    "FSDP group; PKB's W3 shard is our w2 shard transposed; PKB builds its TP and FSDP groups "
    "itself (the same rank layout as ours) from n_tp and n_fsdp",
    "an all-to-all over the FSDP group of the gate and up shards (two thirds of the weights "
    "this rank holds; (fsdp-1)/fsdp of them cross links) and transposed copies of all three "
    "shards",
    "def solution(x, w1, w3, w2, *, tp_group, fsdp_group):\n"
    "    fsdp = dist.get_world_size(fsdp_group)\n"
    "    rows, dim = w1.shape\n"
    "    # send[j] holds the D columns of FSDP rank j's block of both weights.\n"
    "    send = (torch.stack([w1, w3]).view(2, rows, fsdp, dim // fsdp).permute(2, 0, 1, 3)\n"
    "            .contiguous())\n"
    "    recv = torch.empty_like(send)\n"
    "    dist.all_to_all_single(recv, send, group=fsdp_group)\n"
    "    # recv[i, :, f, d] = source i's row f at this rank's column d: PKB's [D/fsdp, F/tp].\n"
    "    gate, up = recv.permute(1, 3, 0, 2).reshape(2, dim // fsdp, fsdp * rows).unbind(0)\n"
    "    return _pkb_solution(x, gate.contiguous(), up.contiguous(), w2.t().contiguous(),\n"
    "                         dist.get_world_size(tp_group), fsdp)\n",
)

ADAPTERS: tuple[Adapter, ...] = (_MOE + _DATA_PARALLEL + (_zero_adapter(41, 1), _zero_adapter(42, 2))
                                 + _FSDP + (_FSDP_TP,) + _VOCAB_PARALLEL)

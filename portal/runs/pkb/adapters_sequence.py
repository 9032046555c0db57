"""ParallelKernelBench adapters: sequence and context parallelism (Ulysses all-to-alls, the uneven
all-gather, ring attention) and the column-parallel linear with its output gathered.

See adapter.py for what an adapter is; adapters.py gathers every family's.

PKB's harness calls these solutions positionally and with ``group=None`` (the default group); the
adapters pass the same positions, with our group in the group's place, since several model outputs
return their input untouched when the group is None.
"""

from __future__ import annotations

from .adapter import Adapter

_ULYSSES: tuple[Adapter, ...] = (
    Adapter(33, "ulysses-all-to-all", "PKB takes the scatter and gather dims as arguments; ours "
            "fixes them for [seq/P, batch, heads, head_dim]: scatter the heads (2), gather the "
            "sequence (0); our group is passed as PKB's `group`", "none",
            "def solution(x, *, group):\n    return _pkb_solution(x, 2, 0, group)\n"),
    Adapter(34, "all-gather", "same shapes (a 1-D shard gathered along dim 0); our group is "
            "passed as PKB's `group`", "none",
            "def solution(x, *, group):\n    return _pkb_solution(x, group)\n"),
    Adapter(35, "uneven-sequence-all-gather", "PKB gathers whole tensors of differing length "
            "along gather_dim (0 here) and returns only their concatenation; ours holds a "
            "[capacity, hidden] buffer whose first `length` rows are valid and also returns the "
            "lengths [world]", "a host read of this rank's length to slice its valid rows (a "
            "view) and an all-gather of the lengths (one integer per rank)",
            "def solution(x, length, *, group):\n"
            "    lengths = length.new_empty(dist.get_world_size(group))\n"
            "    dist.all_gather_into_tensor(lengths, length, group=group)\n"
            "    return _pkb_solution(x[:int(length.item())], 0, group), lengths\n"),
    Adapter(36, "ulysses-all-to-all", "PKB takes the sequence and head dims and an unpadded "
            "length; ours is [seq/P, batch, heads, head_dim] (seq_dim 0, head_dim 2) with no "
            "padding, so unpadded_dim_size stays at PKB's default 0; our group is passed as "
            "PKB's `group`", "none",
            "def solution(x, *, group):\n    return _pkb_solution(x, 0, 2, group)\n"),
    Adapter(37, "ulysses-all-to-all-inverse", "PKB takes the sequence and head dims; ours is "
            "[seq, batch, heads/P, head_dim] (seq_dim 0, head_dim 2) with the sequence a "
            "multiple of P, so PKB's padding never applies; our group is passed as PKB's `group`",
            "none",
            "def solution(context, *, group):\n    return _pkb_solution(context, 0, 2, group)\n"),
    Adapter(38, "ulysses-qkv-packed", "PKB takes the sequence dim (1 in our [batch, seq_pad/P, "
            "3 * heads * head_dim]), our unpadded_seq as unpadded_dim_size, and restore_shape at "
            "its default True; our group is passed as PKB's `group`", "none",
            "def solution(qkv, *, unpadded_seq, group):\n"
            "    return _pkb_solution(qkv, 1, group, unpadded_seq, True)\n"),
)

_RING_ATTENTION: tuple[Adapter, ...] = (
    Adapter(54, "ring-attention-forward", "PKB's causal flag is passed as True and its "
            "softmax_scale left at its default head_dim ** -0.5 (ours); our cp_group is passed "
            "as PKB's `group`", "none",
            "def solution(q, k, v, *, cp_group):\n"
            "    return _pkb_solution(q, k, v, None, True, cp_group)\n"),
    Adapter(55, "ring-attention-tp", "the same weight shards (w_qkv rows [3, heads/tp, "
            "head_dim], w_o [hidden, heads/tp * head_dim]) and TP-innermost groups; PKB's causal "
            "flag is passed as True and its softmax_scale left at its default head_dim ** -0.5 "
            "(ours)", "none",
            "def solution(hidden, w_qkv, w_o, num_heads, *, tp_group, cp_group):\n"
            "    return _pkb_solution(hidden, w_qkv, w_o, num_heads, None, True, tp_group, "
            "cp_group)\n"),
)

_TENSOR_PARALLEL: tuple[Adapter, ...] = (
    Adapter(14, "tp-column-linear-gather-output", "PKB multiplies A (M, K) by B (K, N/P) and "
            "all-gathers the column blocks on the default group; ours is x (tokens, hidden) "
            "times weight_shard (vocab/P, hidden) transposed",
            "a transposed copy of the weight shard",
            "def solution(x, weight_shard, *, group):\n"
            "    return _pkb_solution(x, weight_shard.t().contiguous())\n"),
)

ADAPTERS: tuple[Adapter, ...] = _ULYSSES + _RING_ATTENTION + _TENSOR_PARALLEL

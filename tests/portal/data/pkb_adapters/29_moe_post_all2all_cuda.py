# ParallelKernelBench signature (reference/29_moe_post_all2all.py): expert rows arrive by local
# expert, then source rank; the dispatch's splits, [E, T] routing map and expert-major token
# permutation are given. The result takes the dtype its rows and router weights promote to.
import torch
import torch.distributed as dist


def solution(expert_outputs, routing_weights, selected_experts, num_experts, input_splits,
             output_splits, num_global_tokens_per_local_expert, routing_map,
             local_input_permutation_mapping, org_hidden_states_shape, group=None):
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    local = num_experts // world
    counts = num_global_tokens_per_local_expert
    # Back to source-rank-major order, so that each destination's rows are contiguous.
    pieces = expert_outputs.split(counts.t().reshape(-1).tolist())
    by_source = torch.cat([pieces[e * world + s] for s in range(world) for e in range(local)])

    homecoming = expert_outputs.new_empty((sum(input_splits), expert_outputs.shape[1]))
    dist.all_to_all_single(homecoming, by_source.contiguous(), list(input_splits),
                           list(output_splits), group=group)

    # Row i is token permutation[i] under the i-th (expert, token) pair in expert-major order.
    experts_of_rows = routing_map.nonzero()[:, 0]
    tokens_of_rows = local_input_permutation_mapping
    slot = (selected_experts[tokens_of_rows] == experts_of_rows[:, None]).float().argmax(-1)
    weight = routing_weights[tokens_of_rows, slot]
    # Weighted in the promoted dtype of rows and weights, as PKB's reference does.
    weighted = homecoming * weight[:, None]
    result = torch.zeros(org_hidden_states_shape, dtype=weighted.dtype, device=weighted.device)
    return result.index_add_(0, tokens_of_rows, weighted)

"""Process-group layouts in the rank order of the real code.

A layout maps a keyword name to the list of rank groups; the harness creates every group once
(all ranks call ``new_group`` for each, in order) and passes each rank the group it belongs to.
"""

from __future__ import annotations

from .spec import GroupLayout


def grid(world_size: int, inner: int) -> tuple[list[list[int]], list[list[int]]]:
    """Split ranks into a 2-D grid whose inner dimension holds consecutive ranks.

    Returns (inner groups, outer groups). Megatron-LM builds tensor-parallel groups from
    consecutive ranks and data-parallel groups strided by the TP size, so for tp=2 on 4 ranks:
    TP [[0, 1], [2, 3]] and DP [[0, 2], [1, 3]].
    """
    if inner < 1 or world_size % inner:
        raise ValueError(f"inner size {inner} must divide world size {world_size}")
    outer = world_size // inner
    inner_groups = [list(range(o * inner, (o + 1) * inner)) for o in range(outer)]
    outer_groups = [list(range(i, world_size, inner)) for i in range(inner)]
    return inner_groups, outer_groups


def tp_dp(world_size: int, tp: int) -> GroupLayout:
    """Megatron-LM order: tensor-parallel ranks are consecutive, data-parallel ranks strided."""
    tp_groups, dp_groups = grid(world_size, tp)
    return {"tp_group": tp_groups, "dp_group": dp_groups}


def cp_tp(world_size: int, tp: int) -> GroupLayout:
    """Megatron-LM order for context parallelism: TP innermost, then CP."""
    tp_groups, cp_groups = grid(world_size, tp)
    return {"tp_group": tp_groups, "cp_group": cp_groups}


def ep_tp(world_size: int, tp: int) -> GroupLayout:
    """Expert parallelism across TP groups: TP innermost, EP strided (Megatron MoE layout)."""
    tp_groups, ep_groups = grid(world_size, tp)
    return {"tp_group": tp_groups, "ep_group": ep_groups}


def half_tp(world_size: int) -> int:
    """A TP size that leaves a second dimension of at least 2 (2 on 4 ranks, 4 on 8, 1 on 2)."""
    return max(1, world_size // 2)

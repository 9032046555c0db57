"""The routing logic of the MoE kernels (solutions/symm_mem/moe_*.py) against the reference's
order, on CPU. The kernels move bytes to where these torch functions say; the functions are the
part that can be wrong in ways a GPU run would only show as a value mismatch.

The references' all-to-alls are emulated here by concatenating per-rank pieces in rank order.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
CASES = [(2, 24, 16, 4), (4, 24, 16, 4), (4, 77, 64, 6), (4, 5, 8, 8), (2, 100, 8, 8)]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "solutions" / "symm_mem" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def routing(world: int, tokens: int, experts: int, k: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    idxs, weights = [], []
    for _ in range(world):
        w, i = torch.topk(torch.softmax(torch.randn(tokens, experts, generator=gen), -1), k, -1)
        idxs.append(i)
        weights.append(w / w.sum(-1, keepdim=True))
    return idxs, weights


def dispatch_reference(xs, idxs, weights, experts):
    """moe-dispatch-all-to-all's reference on every rank at once."""
    world, (tokens, k) = len(xs), idxs[0].shape
    local = experts // world
    sends = []
    for r in range(world):
        flat = idxs[r].reshape(-1)
        order = torch.argsort(flat * tokens + torch.arange(tokens * k) // k)
        token = (torch.arange(tokens * k) // k)[order]
        sends.append((xs[r][token], weights[r].reshape(-1)[order].float(), token + r * tokens,
                      flat[order] // local, torch.bincount(flat, minlength=experts)))
    return [(torch.cat([s[0][s[3] == me] for s in sends]), torch.cat([s[1][s[3] == me] for s in sends]),
             sum(s[4].view(world, local)[me] for s in sends), torch.cat([s[2][s[3] == me] for s in sends]))
            for me in range(world)]


@pytest.mark.parametrize("world,tokens,experts,k", CASES)
def test_dispatch_rows_and_their_deduplicated_gather_match_the_reference(world, tokens, experts, k):
    dispatch = load("moe_dispatch_pull")
    idxs, weights = routing(world, tokens, experts, k, seed=world * 1000 + tokens)
    xs = [torch.randn(tokens, 16) for _ in range(world)]
    all_idx, all_w = torch.stack(idxs), torch.stack(weights)
    for me, want in enumerate(dispatch_reference(xs, idxs, weights, experts)):
        src, tok, slot, expert = dispatch.receive_plan(all_idx, me, experts // world)
        recv_x = torch.full((src.numel(), 16), float("nan"))
        if src.numel():
            g_src, g_tok, first, dest = dispatch.row_groups(src, tok, tokens)
            assert len(set(zip(g_src.tolist(), g_tok.tolist()))) == g_src.numel()  # each row read once
            for g in range(g_src.numel()):  # what gather_rows does, group by group
                recv_x[dest[first[g]:first[g + 1]]] = xs[g_src[g]][g_tok[g]]
        got = (recv_x, all_w[src, tok, slot], torch.bincount(expert, minlength=experts // world),
               src * tokens + tok)
        for mine, theirs in zip(got, want):
            assert torch.equal(mine, theirs)


@pytest.mark.parametrize("world,tokens,experts,k", CASES)
def test_combine_sends_every_row_to_its_token_slot(world, tokens, experts, k):
    combine = load("moe_combine_push")
    idxs, weights = routing(world, tokens, experts, k, seed=world * 7 + tokens)
    hidden = 8
    local = experts // world
    expert_out = [torch.randn(world * tokens * min(k, local), hidden, dtype=torch.float64)
                  for _ in range(world)]
    # The reference's order: rank d's rows come from source s at the offset of the rows that
    # sources before s sent to d, in s's (expert, token) order.
    counts = [torch.bincount(i.reshape(-1), minlength=experts).view(world, local).sum(1) for i in idxs]
    recv = [torch.full((tokens * k, hidden), float("nan"), dtype=torch.float64) for _ in range(world)]
    for d in range(world):
        src, tok, slot = combine.dispatch_order(torch.stack(idxs), d, local)
        for r in range(src.numel()):  # what scatter_rows does
            recv[src[r]][tok[r] * k + slot[r]] = expert_out[d][r]
    for s in range(world):
        flat = idxs[s].reshape(-1)
        order = torch.argsort(flat * tokens + torch.arange(tokens * k) // k)
        pieces = [expert_out[d][sum(int(counts[s2][d]) for s2 in range(s)):][:int(counts[s][d])]
                  for d in range(world)]
        by_pair = torch.empty(tokens * k, hidden, dtype=torch.float64)
        by_pair[order] = torch.cat(pieces)
        assert torch.equal(recv[s], by_pair)

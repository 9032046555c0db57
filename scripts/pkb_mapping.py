"""Print how every ParallelKernelBench problem maps onto this suite, as a Markdown table.

The equivalents come from the registry (each problem's ``pkb_ids``), so the table cannot go stale;
what stays hand-kept here is ParallelKernelBench's own list of problems (its ``reference/``
directory at commit dab0830); for the PKB problems whose closest problem here differs in
substance, which problem that is and how it differs is in portal/runs/pkb/variants.py.

    .venv/bin/python scripts/pkb_mapping.py > docs/pkb-mapping.md   # the table
    .venv/bin/python scripts/pkb_mapping.py --check    # exit 1 unless every PKB problem maps exactly once
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import problems  # noqa: E402
from portal.runs.pkb.variants import VARIANTS  # noqa: E402  (the importer's refusals name them too)

PKB_REPO = "https://github.com/togethercomputer/ParallelKernelBench"
PKB_COMMIT = "dab0830"

# reference/<id>_<name>.py at dab0830. A solution file is numbered id + 1 from id 33 on, and four
# solution names differ from the reference's (SOLUTION_NAMES).
PKB_PROBLEMS: dict[int, str] = {
    1: "allreduce", 2: "allgather", 3: "broadcast", 4: "reduce", 5: "scatter", 6: "gather",
    7: "reducescatter", 8: "alltoall", 9: "layernorm_backward", 10: "embedding_lookup",
    11: "allgather_gemm_AT", 12: "allgather_gemm", 13: "gemm_allreduce", 14: "gemm_allgather",
    15: "combined_sharded_gemms", 16: "gemm_reducescatter", 17: "rope_allgather",
    18: "tp_rms_norm", 19: "blocked_fp8_quantize", 20: "blocked_fp8_dequantize",
    21: "clip_grad_norm_no_ep", 22: "clip_grad_norm_ep", 23: "grad_acc_loss",
    24: "load_balancing_loss_fn", 25: "importance_sampling_loss", 26: "moe_token_preprocess",
    27: "moe_all2all_primitive", 28: "moe_pre_all2all", 29: "moe_post_all2all",
    30: "moe_epgroupgemm_lora_backward", 31: "fused_moe_fwd", 32: "fused_moe_fwd_lora",
    33: "ulysses_all_to_all_tensor_primitive", 34: "ulysses_all_gather_into_tensor_primitive",
    35: "ulysses_all_gather_variable_primitive", 36: "ulysses_gather_seq_scatter_heads",
    37: "ulysses_gather_heads_scatter_seq", 38: "ulysses_gather_seq_scatter_heads_qkv",
    39: "ulysses_attention_e2e", 40: "ddp", 41: "zero1_optimizer_shard",
    42: "zero2_optimizer_shard_grad", 43: "fused_adam_grad_unshard_allgather",
    44: "quantized_grad_allreduce", 45: "reducescatter_fused_rmsnorm", 46: "fsdp_adamw_sharded",
    47: "fsdp_step_e2e", 48: "fsdp_and_tp", 49: "moe_ep_balanced", 50: "moe_ep_wide",
    51: "moe_ep_narrow", 52: "fp8_reduce_scatter_grads", 53: "fp8_allgather_params",
    54: "ring_attention", 55: "ring_attention_tp", 56: "ring_attention_pp",
    57: "ring_attention_backward_dp", 58: "openclip_contrastive_loss",
    59: "physicsnemo_distributed_rfft", 60: "physicsnemo_distributed_irfft",
    61: "gsplat_3d_gaussian_splatting", 62: "torchharmonics_spherical_convolution",
    63: "deepmd_kalman_filter_optimizer", 64: "gnn_neighbor_sampling",
    65: "gnn_feature_exchange_all2all", 66: "gnn_feature_exchange_all2all_backward",
    67: "gnn_sparse_embedding_all2all", 68: "gnn_sparse_feature_fetch_projection",
    69: "gnn_negative_scoring", 70: "torchrec_kjt_all2all", 71: "hyena_conv1d_boundary_exchange",
    72: "hyena_forward_cp", 73: "vocab_parallel_cross_entropy_loss",
    74: "fla_kimi_delta_attention_cp_tp", 75: "fla_gated_deltanet_cp",
    76: "opensora_conv3d_allreduce", 77: "magi1_cso_async_attention",
    78: "magi1_tile_parallel_vae_decode", 79: "dinov2_distributed_knn",
    80: "dinov2_distributed_sinkhorn_knopp", 81: "sam3_allgather_iou_suppression",
    82: "vocab_parallel_log_prob_topk", 83: "vocab_parallel_log_prob_topk_chunked",
    84: "vocab_parallel_log_prob_topk_chunked_backward", 85: "distributed_sample_sort",
    86: "tp_muon_orthogonalization", 87: "conv2d_boundary_exchange",
}
# Where the model-output files of dab0830 name a problem differently from its reference.
SOLUTION_NAMES: dict[int, str] = {11: "gemm_allgather_AT", 12: "gemm_allgather",
                                  14: "gemm_allscatter", 18: "rms_norm"}
# Later commits replaced reference 46 (a sharded AdamW with no communication) with a
# different problem under the same number; the ids here are dab0830's.
LATER_RENUMBERING = ("reference/46 became gemv_decode (a column-parallel logits GEMM with an "
                     "all-gather) after dab0830; it is tp-column-linear-gather-output here plus a "
                     "bias, a variant.")

# Problems written so that PKB problems have an equivalent here. Two written for PKB turned out to
# differ from it once adapters were written (ring-attention-pp: 56, magi1-tile-parallel-vae-decode:
# 78) and are variants, listed above, not here.
WRITTEN_FOR_PKB = frozenset({
    "uneven-sequence-all-gather", "deepmd-kalman-optimizer-step",
    "graphbolt-feature-exchange-backward", "graphbolt-feature-exchange",
    "graphstorm-negative-ranking",
    "sam3-masklet-iou-suppression", "vocab-parallel-logprobs-top-k-top-p",
    "vocab-parallel-logprobs-top-k-top-p-chunked", "vocab-parallel-logprobs-top-k-top-p-backward",
    "ring-attention-forward", "ring-attention-tp", "fsdp-tp-swiglu-mlp",
    "ddp-training-step", "fsdp-training-step", "zero1-training-step", "zero2-training-step",
    "tp-column-linear-gather-output", "ibot-patch-sinkhorn-knopp",
})


def solution_number(pkb_id: int) -> int:
    return pkb_id + 1 if pkb_id >= 33 else pkb_id


def mapping() -> list[dict[str, object]]:
    """One row per PKB problem: id, name, our slug, relation (equivalent / new / variant / none)
    and a note."""
    equivalents: dict[int, list[str]] = {}
    for problem in problems.all_problems():
        for pkb_id in problem.pkb_ids:
            equivalents.setdefault(pkb_id, []).append(problem.slug)
    known = {p.slug for p in problems.all_problems()}
    rows = []
    for pkb_id, name in sorted(PKB_PROBLEMS.items()):
        slugs = equivalents.get(pkb_id, [])
        if slugs:
            slug = ", ".join(slugs)
            relation = "new" if all(s in WRITTEN_FOR_PKB for s in slugs) else "equivalent"
            note = ""
        elif pkb_id in VARIANTS:
            slug, note = VARIANTS[pkb_id]
            relation = "variant"
            if slug not in known:
                raise SystemExit(f"PKB {pkb_id}: variant slug {slug!r} is not a problem")
        else:
            slug, relation, note = "", "none", "no comparable problem"
        rows.append({"id": pkb_id, "name": name, "solution": solution_number(pkb_id),
                     "slug": slug, "relation": relation, "note": note,
                     "listed_as_variant": pkb_id in VARIANTS})
    return rows


def problems_of_unknown_pkb_ids() -> list[str]:
    return [f"{p.slug}: {i}" for p in problems.all_problems() for i in p.pkb_ids
            if i not in PKB_PROBLEMS]


def render(rows: list[dict[str, object]]) -> str:
    counts = Counter(r["relation"] for r in rows)
    lines = [
        "# ParallelKernelBench problems in this suite",
        "",
        f"Generated by `.venv/bin/python scripts/pkb_mapping.py > docs/pkb-mapping.md` from the problem registry (each problem's "
        f"`pkb_ids`) and the script's hand-kept list of PKB's problems ({PKB_REPO}, "
        f"`reference/` at commit `{PKB_COMMIT}`). Do not edit by hand; rerun the script.",
        "",
        "- **equivalent**: a problem that was already here computes the same thing with the same "
        "communication; its `pkb_ids` names the PKB id, so PKB output files import against it.",
        "- **new**: the same, for a problem written to cover the PKB problem.",
        "- **variant**: the nearest problem here differs in substance (the note says how); PKB "
        "files for it are not imported.",
        "- **none**: nothing comparable.",
        "",
        "The bar for *equivalent* is that a PKB solution's outputs can be judged against the "
        "problem here once its calling convention is adapted (argument names, layouts, a "
        "`[world, ...]` versus a flat buffer) or a term the adapter can add after PKB's result "
        "inside the timed call (13 and 16: our bias, added after PKB's all-reduce or "
        "reduce-scatter); where the math differs otherwise (a projection included, another "
        "gather dimension, a different quantization) the PKB problem is a variant, even when the "
        "communication pattern is the same. That is stricter than the issue's first "
        "estimate (47 equivalent, 34 variant, 6 none).",
        "",
        f"Summary: {counts['equivalent']} equivalent, {counts['new']} new, "
        f"{counts['variant']} variant, {counts['none']} none, of {len(rows)}.",
        "",
        "PKB's numbering: a solution file `<n>_<name>_<backend>.py` in the model-output "
        "directories is numbered like the reference up to 32 and reference id + 1 from 33 on; "
        "four names differ (" + ", ".join(f"{i}: `{n}`" for i, n in SOLUTION_NAMES.items())
        + "). " + LATER_RENUMBERING,
        "",
        "| PKB id | PKB name | solution no. | our slug | relation | note |",
        "|---:|---|---:|---|---|---|",
    ]
    for r in rows:
        slug = ", ".join(f"`{s}`" for s in str(r["slug"]).split(", ")) if r["slug"] else ""
        lines.append(f"| {r['id']} | `{r['name']}` | {r['solution']} | {slug} | {r['relation']} "
                     f"| {r['note']} |")
    return "\n".join(lines) + "\n"


def check_mapping(rows: list[dict[str, object]]) -> list[str]:
    """What is wrong with the mapping, if anything."""
    errors = [f"PKB {r['id']} has an equivalent and is also listed as a variant"
              for r in rows if r["listed_as_variant"] and r["relation"] in ("equivalent", "new")]
    errors += [f"PKB {r['id']} ({r['name']}) maps to nothing" for r in rows if r["relation"] == "none"]
    errors += [f"unknown PKB id on {x}" for x in problems_of_unknown_pkb_ids()]
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every PKB problem maps to exactly one relation")
    args = parser.parse_args()
    rows = mapping()
    if args.check:
        errors = check_mapping(rows)
        for error in errors:
            print(error, file=sys.stderr)
        counts = Counter(r["relation"] for r in rows)
        print(", ".join(f"{k} {counts[k]}" for k in ("equivalent", "new", "variant", "none")))
        return 1 if errors else 0
    sys.stdout.write(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

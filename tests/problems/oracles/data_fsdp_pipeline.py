"""Oracles for data parallelism (2xx), FSDP/ZeRO (3xx) and pipeline parallelism (8xx).

Each oracle rebuilds the unsharded quantity the problem distributes (the global batch, the
averaged gradient, the full parameter, the layer chain of the whole pipeline) from every rank's
inputs and computes what each rank must end with, in float64 where rounding is not part of the
contract. Optimizer steps use torch.optim, backward passes use autograd. Where the description
fixes a lossy encoding bit for bit (int8 block quantization, float8 casts, 1-bit signs), the
encoding is applied in the precision the description names, directly on the global view.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import problems

from . import WORLD, Inputs, xs

Outputs = list[list[torch.Tensor]]
f64 = torch.float64


def _stack(inputs: Inputs, name: str) -> torch.Tensor:
    """Every rank's ``name`` stacked along a new leading rank dimension, in float64."""
    return torch.stack([t.double() for t in xs(inputs, name)])


def _mean(inputs: Inputs, name: str) -> torch.Tensor:
    return _stack(inputs, name).mean(0)


def _groups(slug: str, keyword: str) -> list[list[int]]:
    return problems.get(slug).process_groups(WORLD)[keyword]


def _group_of(slug: str, keyword: str, rank: int) -> list[int]:
    return next(g for g in _groups(slug, keyword) if rank in g)


# ---------------------------------------------------------------------------------------------
# Data parallel (2xx)
# ---------------------------------------------------------------------------------------------

def ddp_bucketed(inputs: Inputs) -> Outputs:
    # Bucketing is an implementation detail: every gradient ends up averaged over the ranks.
    from problems.data_parallel.ddp_bucketed_allreduce import NAMES
    means = [_mean(inputs, name) for name in NAMES]
    return [list(means) for _ in range(WORLD)]


def bf16_compress(inputs: Inputs) -> Outputs:
    # The average of the fp32 buckets; the bf16 wire format only costs precision.
    avg = _mean(inputs, "bucket")
    return [[avg] for _ in range(WORLD)]


def fp16_found_inf_adam(inputs: Inputs) -> Outputs:
    from problems.data_parallel import fp16_found_inf_step as p
    loss_scale = inputs[0]["loss_scale"].double()
    # The averaged, unscaled gradient of the whole buffer; rank r owns the r-th shard.
    grad = _mean(inputs, "grad_buffer") / loss_scale
    found_inf = not bool(torch.isfinite(grad).all())
    # Megatron's DynamicGradScaler.update, on Python scalars.
    scale = float(loss_scale.item())
    growth = int(inputs[0]["growth_tracker"].item())
    hyst = int(inputs[0]["hysteresis_tracker"].item())
    if found_inf:
        growth = 0
        hyst -= 1
        if hyst <= 0:
            scale = max(scale * p.BACKOFF, p.MIN_SCALE)
    else:
        growth += 1
        if growth == p.GROWTH_INTERVAL:
            growth = 0
            hyst = p.HYSTERESIS
            scale *= p.GROWTH
    out = []
    for r in range(WORLD):
        param = inputs[r]["main_param"].double().clone()
        m = inputs[r]["exp_avg"].double().clone()
        v = inputs[r]["exp_avg_sq"].double().clone()
        if not found_inf:
            param = param.requires_grad_()
            opt = torch.optim.Adam([param], lr=p.LR, betas=(p.BETA1, p.BETA2), eps=p.EPS,
                                   foreach=False)
            opt.state[param] = {"step": torch.tensor(float(p.STEP - 1)), "exp_avg": m,
                                "exp_avg_sq": v}
            param.grad = grad.chunk(WORLD)[r].clone()
            opt.step()
            param = param.detach()
        out.append([param, m, v, torch.tensor([float(found_inf)], dtype=f64),
                    torch.tensor([scale], dtype=f64), torch.tensor([growth]),
                    torch.tensor([hyst])])
    return out


def _onebit_scale(x: torch.Tensor) -> torch.Tensor:
    # ||x|| / sqrt(n) accumulated in float64 and rounded once to float32, as described.
    return (x.double().norm() / x.numel() ** 0.5).float().double()


def _pm1(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x >= 0, 1.0, -1.0).to(f64)  # zero counts as positive


def onebit(inputs: Inputs) -> Outputs:
    comp = [i["buffer_m"].double() + i["worker_error"].double() for i in inputs]
    w_scale = [_onebit_scale(c) for c in comp]
    w_dec = [w_scale[r] * _pm1(comp[r]) for r in range(WORLD)]  # what each worker sends
    server, s_dec = [], []
    for j in range(WORLD):
        # Server j averages chunk j of every worker's decompressed momentum, adds its error.
        sm = sum(w_dec[r].chunk(WORLD)[j] for r in range(WORLD)) / WORLD
        sm = sm + inputs[j]["server_error"].double()
        server.append(sm)
        s_dec.append(_onebit_scale(sm) * _pm1(sm))
    result = torch.cat(s_dec)
    return [[result, comp[r] - w_dec[r], server[r] - s_dec[r]] for r in range(WORLD)]


def powersgd(inputs: Inputs) -> Outputs:
    m = [i["weight_grads"].double() + i["error_w"].double() for i in inputs]
    b = [i["bias_grads"].double() + i["error_b"].double() for i in inputs]
    m_sum = sum(m)
    b_avg = sum(b) / WORLD
    # One warm-started power iteration projects the averaged gradient onto the column space of
    # (sum of M) @ Q_prev: approx = Pi @ mean(M), Pi the orthogonal projector onto that space.
    basis = m_sum @ inputs[0]["q_memory"].double()
    proj = basis @ torch.linalg.pinv(basis)
    approx = proj @ (m_sum / WORLD)
    return [[approx, b_avg, m[r] - approx, b[r] - b_avg] for r in range(WORLD)]


def syncbn_forward(inputs: Inputs) -> Outputs:
    from problems.data_parallel.syncbn_forward import EPS, MOMENTUM
    xs_ = [x.double() for x in xs(inputs, "x")]
    full = torch.cat(xs_)  # the global batch
    w, b = inputs[0]["weight"].double(), inputs[0]["bias"].double()
    rm, rv = inputs[0]["running_mean"].double(), inputs[0]["running_var"].double()
    # F.batch_norm in training mode over the global batch (updates the running stats too).
    y = F.batch_norm(full, rm, rv, w, b, training=True, momentum=MOMENTUM, eps=EPS)
    ys = y.split([x.shape[0] for x in xs_])
    return [[ys[r], rm, rv] for r in range(WORLD)]


def syncbn_backward(inputs: Inputs) -> Outputs:
    # Autograd of batch norm over the global batch, with the saved statistics (mean, invstd)
    # standing in for the batch statistics: the forward values are the saved ones, and the
    # derivatives are those of a batch mean and of (biased variance + eps)^-1/2.
    x = torch.cat([t.double() for t in xs(inputs, "x")]).requires_grad_()
    mu0 = inputs[0]["mean"].double().view(1, -1, 1, 1)
    s0 = inputs[0]["invstd"].double().view(1, -1, 1, 1)
    dims = (0, 2, 3)
    mean = x.mean(dims, keepdim=True)
    mu = mu0 + (mean - mean.detach())
    var = (x - mu0).square().mean(dims, keepdim=True)
    invstd = s0 - 0.5 * s0 ** 3 * (var - var.detach())
    xhat = (x - mu) * invstd
    sizes = [t.shape[0] for t in xs(inputs, "x")]
    weights = [inputs[r]["weight"].double().view(1, -1, 1, 1).clone().requires_grad_()
               for r in range(WORLD)]
    biases = [torch.zeros_like(weights[0]).requires_grad_() for _ in range(WORLD)]
    loss = sum(((xh * weights[r] + biases[r]) * inputs[r]["grad_output"].double()).sum()
               for r, xh in enumerate(xhat.split(sizes)))
    loss.backward()
    dx = x.grad.split(sizes)
    # Weight and bias gradients stay local (DDP averages parameter gradients afterwards).
    return [[dx[r], weights[r].grad.reshape(-1), biases[r].grad.reshape(-1)]
            for r in range(WORLD)]


def per_token_loss(inputs: Inputs) -> Outputs:
    total_tokens, loss_sum = 0, torch.zeros((), dtype=f64)
    for i in inputs:
        for row, length in enumerate(i["lengths"].tolist()):
            total_tokens += length
            loss_sum = loss_sum + i["token_losses"][row, :length].double().sum()
    grads = _stack(inputs, "grad_buffer").sum(0) / total_tokens
    return [[grads, (loss_sum / total_tokens).reshape(1)] for _ in range(WORLD)]


def dist_opt_clip(inputs: Inputs) -> Outputs:
    avg = _mean(inputs, "grad_buffer")
    norm = avg.norm()
    max_norm = inputs[0]["max_norm"].double()
    coeff = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return [[avg.chunk(WORLD)[r] * coeff, norm.reshape(1)] for r in range(WORLD)]


def _int8_roundtrip(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """Symmetric int8 per contiguous group in fp32: scale = absmax / 127, q = round-half-even
    (x / scale), value = q * scale (the encoding the descriptions fix bit for bit)."""
    g = x.float().reshape(-1, group_size)
    scale = g.abs().amax(dim=1, keepdim=True) / 127.0
    q = torch.round(g / scale).clamp(-127, 127)
    return (q * scale).reshape(x.shape)


def zeropp_qgz(inputs: Inputs) -> Outputs:
    from problems.data_parallel.zeropp_qgz import GROUP_SIZE
    slug = "zeropp-qgz-quantized-reduce-scatter"
    grads = [g.float() for g in xs(inputs, "grad")]
    gs = GROUP_SIZE[grads[0].numel() < 2**16]
    local_groups = _groups(slug, "local_group")  # the nodes, in node order
    out = []
    for owner in range(WORLD):
        # Rank r ends with shard r of the sum. Hop 1: in every node, the GPU with the owner's
        # local index sums (in source order) the quantized shard from each GPU of its node.
        # Hop 2: the owner sums (in node order) those node partials, quantized once more.
        total = None
        for node in local_groups:
            partial = None
            for src in node:
                piece = _int8_roundtrip(grads[src].chunk(WORLD)[owner], gs)
                partial = piece if partial is None else partial + piece
            piece = _int8_roundtrip(partial, gs)
            total = piece if total is None else total + piece
        out.append([total / WORLD])
    return out


# ---------------------------------------------------------------------------------------------
# FSDP / ZeRO (3xx)
# ---------------------------------------------------------------------------------------------

def _cat0(inputs: Inputs, name: str, ranks: list[int] | None = None) -> torch.Tensor:
    ranks = list(range(WORLD)) if ranks is None else ranks
    return torch.cat([inputs[r][name] for r in ranks])


def float8_all_gather(inputs: Inputs) -> Outputs:
    from problems.fsdp_zero.float8_fsdp_all_gather import linear_shapes
    names = [name for name, _, _ in linear_shapes(1, 1, 1)]
    bits, scales = [], []
    for name in names:
        full = _cat0(inputs, name).float()  # the unsharded weight
        # Tensor-wise scale fp8_max / amax in fp32; scale, saturate, cast to e4m3 in fp32.
        scale = torch.tensor(448.0) / full.abs().max()
        fp8 = (full * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        bits.append(fp8.view(torch.uint8))
        scales.append(scale)
    return [[*bits, torch.stack(scales)] for _ in range(WORLD)]


_BLOCK = ("attention_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w3", "w2")
_LAYER = ("input_layernorm", "q_proj", "k_proj", "v_proj", "o_proj", "post_attention_layernorm",
          "gate_proj", "up_proj", "down_proj")


def fsdp2_all_gather(inputs: Inputs) -> Outputs:
    dtype = inputs[0]["param_dtype"]
    full = [_cat0(inputs, name).to(dtype) for name in _BLOCK]
    return [list(full) for _ in range(WORLD)]


def fsdp2_reduce_scatter(inputs: Inputs) -> Outputs:
    means = [_mean(inputs, name) for name in _BLOCK]
    return [[m.chunk(WORLD)[r] for m in means] for r in range(WORLD)]


def hsdp(inputs: Inputs) -> Outputs:
    slug = "hsdp-reduce-scatter-all-reduce"
    means = [_mean(inputs, name) for name in _BLOCK]  # averaged over every rank
    out = []
    for r in range(WORLD):
        group = _group_of(slug, "shard_group", r)
        out.append([m.chunk(len(group))[group.index(r)] for m in means])
    return out


def megatron_param_all_gather(inputs: Inputs) -> Outputs:
    buckets = inputs[0]["bucket_numels"]
    dtype = inputs[0]["param_buffer"].dtype
    pieces, offset = [], 0
    for numel in buckets:
        shard = numel // WORLD
        # Bucket b of the buffer: rank 0's shard of it, then rank 1's, ...
        pieces += [inputs[r]["main_param_shard"][offset:offset + shard] for r in range(WORLD)]
        offset += shard
    full = torch.cat(pieces).to(dtype)
    return [[full] for _ in range(WORLD)]


def sharded_clip(inputs: Inputs) -> Outputs:
    names = ("grad_attn", "grad_mlp", "grad_embed", "grad_norms")
    norm = torch.cat([inputs[r][n].double() for r in range(WORLD) for n in names]).norm()
    coeff = inputs[0]["max_norm"] / (norm.item() + 1e-6)
    coeff = min(coeff, 1.0)
    return [[inputs[r][n].double() * coeff for n in names] + [norm.reshape(1)]
            for r in range(WORLD)]


def zero1_adam(inputs: Inputs) -> Outputs:
    from problems.fsdp_zero.zero1_sharded_adam_step import BETA1, BETA2, EPS
    grad = inputs[0]["grad"].double()
    new = []
    for r, i in enumerate(inputs):
        param = i["master_shard"].double().clone().requires_grad_()
        m, v = i["exp_avg"].double().clone(), i["exp_avg_sq"].double().clone()
        opt = torch.optim.AdamW([param], lr=i["lr"], betas=(BETA1, BETA2), eps=EPS,
                                weight_decay=i["weight_decay"], foreach=False)
        opt.state[param] = {"step": torch.tensor(float(i["step"] - 1)), "exp_avg": m,
                            "exp_avg_sq": v}
        param.grad = grad.chunk(WORLD)[r].clone()
        opt.step()
        new.append((param.detach(), m, v))
    full = torch.cat([p for p, _, _ in new]).to(inputs[0]["param_buffer"].dtype)
    return [[full, *new[r]] for r in range(WORLD)]


def zero2_reduce(inputs: Inputs) -> Outputs:
    avg = _mean(inputs, "grads")
    return [[inputs[r]["fp32_grad_partition"].double() + avg.chunk(WORLD)[r]]
            for r in range(WORLD)]


def _zero3_weight(inputs: Inputs) -> torch.Tensor:
    in_features = inputs[0]["x"].shape[-1]
    return _cat0(inputs, "weight_part").double().view(-1, in_features)


def zero3_forward(inputs: Inputs) -> Outputs:
    w = _zero3_weight(inputs)
    b = _cat0(inputs, "bias_part").double()
    return [[F.linear(inputs[r]["x"].double(), w, b)] for r in range(WORLD)]


def zero3_backward(inputs: Inputs) -> Outputs:
    w = _zero3_weight(inputs).requires_grad_()
    b = torch.zeros(w.shape[0], dtype=f64, requires_grad=True)
    x = [i["x"].double().requires_grad_() for i in inputs]
    # Data parallelism: the loss is the sum of every rank's micro-batch loss; the gradients
    # are averaged over the ranks, and rank r keeps the r-th flat partition.
    loss = sum((F.linear(x[r], w, b) * inputs[r]["grad_output"].double()).sum()
               for r in range(WORLD))
    loss.backward()
    gw, gb = w.grad.reshape(-1) / WORLD, b.grad / WORLD
    return [[x[r].grad, gw.chunk(WORLD)[r], gb.chunk(WORLD)[r]] for r in range(WORLD)]


def hpz_all_gather(inputs: Inputs) -> Outputs:
    from problems.fsdp_zero.zeropp_hpz_secondary_all_gather import layer_shapes
    slug = "zeropp-hpz-secondary-all-gather"
    s = problems.get(slug).sizes["small"]
    shapes = [(rows, cols) if cols else (rows,)
              for _, rows, cols in layer_shapes(s["hidden"], s["kv_dim"], s["ffn"])]
    out = []
    for r in range(WORLD):
        node = _group_of(slug, "hpz_group", r)
        out.append([_cat0(inputs, name, node).reshape(shape)
                    for name, shape in zip(_LAYER, shapes)])
    return out


def qwz_all_gather(inputs: Inputs) -> Outputs:
    gs = inputs[0]["group_size"]
    dtype = inputs[0]["q_proj"].dtype
    per_rank = []
    for i in inputs:
        # Each rank's partitions, concatenated flat and quantized in groups across boundaries.
        flat = torch.cat([i[name].reshape(-1) for name in _LAYER])
        deq = _int8_roundtrip(flat, gs).to(dtype)
        parts, offset = {}, 0
        for name in _LAYER:
            n = i[name].numel()
            parts[name] = deq[offset:offset + n].view(i[name].shape)
            offset += n
        per_rank.append(parts)
    full = [torch.cat([per_rank[r][name] for r in range(WORLD)]) for name in _LAYER]
    return [list(full) for _ in range(WORLD)]


# ---------------------------------------------------------------------------------------------
# Pipeline (8xx): stage s is rank s
# ---------------------------------------------------------------------------------------------

def pp_send_forward_recv_forward(inputs: Inputs) -> Outputs:
    return [[inputs[(r - 1) % WORLD]["output_tensor"]] for r in range(WORLD)]


def pp_send_recv_forward_backward(inputs: Inputs) -> Outputs:
    return [[inputs[(r - 1) % WORLD]["output_tensor"], inputs[(r + 1) % WORLD]["input_tensor_grad"]]
            for r in range(WORLD)]


def pp_1f1b(inputs: Inputs) -> Outputs:
    weights = [i["weight"].double() for i in inputs]
    last = WORLD - 1
    # Gradients flow back from the last stage, whose loss is 0.5 ||x_last W_last^T||^2 on its
    # current micro-batch; each earlier stage backpropagates the gradient its successor sends
    # through its own layer, applied to its stashed input.
    results: list[list[torch.Tensor]] = [[] for _ in range(WORLD)]
    upstream = None  # gradient w.r.t. the output of the stage being processed
    for s in range(last, -1, -1):
        stash = inputs[s]["input_tensor" if s == last else "saved_input"].double().requires_grad_()
        w = weights[s].clone().requires_grad_()
        y = F.linear(stash, w)
        if s == last:
            (0.5 * y.square().sum()).backward()
        else:
            y.backward(upstream)
        upstream = stash.grad
        results[s] = [stash.grad, w.grad]
    for s in range(WORLD):
        # The next input: the data loader's on stage 0, the previous stage's forward output.
        nxt = (inputs[0]["next_microbatch"].double() if s == 0
               else F.linear(inputs[s - 1]["input_tensor"].double(), weights[s - 1]))
        results[s].append(nxt)
    return results


def pp_interleaved_forward(inputs: Inputs) -> Outputs:
    stages = WORLD
    weights = [i["weights"].double() for i in inputs]
    chunks = weights[0].shape[0]
    data = inputs[0]["microbatches"].double()
    outs = [torch.empty(chunks, *data.shape, dtype=f64) for _ in range(stages)]
    # The model is the chain of layers 0 .. chunks * stages - 1; layer l is chunk l // P of
    # stage l % P. Every micro-batch runs through the whole chain.
    for mb in range(data.shape[0]):
        h = data[mb]
        for layer in range(chunks * stages):
            stage, chunk = layer % stages, layer // stages
            h = F.linear(h, weights[stage][chunk])
            outs[stage][chunk, mb] = h
    return [[o] for o in outs]


ORACLES = {
    # data parallel
    "ddp-bucketed-grad-allreduce": (ddp_bucketed, 1e-5),
    "ddp-bf16-compress-hook": (bf16_compress, 1e-2),
    # Seed 5 takes the skip path (exact); on update-path seeds (7, 12, 14, 16, 18) the fp16 sums
    # of the reduce-scatter move the Adam update by up to ~3e-6 where v is tiny.
    "fp16-grad-reduce-found-inf-adam": (fp16_found_inf_adam, 1e-5),
    "onebit-compressed-allreduce": (onebit, 1e-6),
    "powersgd-grad-compression": (powersgd, 1e-5),
    "syncbn-forward": (syncbn_forward, 1e-5),
    "syncbn-backward": (syncbn_backward, 1e-5),
    "per-token-loss-grad-allreduce": (per_token_loss, 1e-5),
    "dist-opt-grad-norm-clip": (dist_opt_clip, 1e-5),
    "zeropp-qgz-quantized-reduce-scatter": (zeropp_qgz, 1e-6),
    # FSDP / ZeRO
    "zero1-sharded-adam-step": (zero1_adam, 1e-7),
    "zero2-bucketed-grad-reduce": (zero2_reduce, 1e-5),
    "fsdp2-foreach-all-gather": (fsdp2_all_gather, 0.0),
    "fsdp2-foreach-reduce-scatter": (fsdp2_reduce_scatter, 1e-5),
    "float8-fsdp-all-gather": (float8_all_gather, 0.0),
    "zeropp-quantized-weight-all-gather": (qwz_all_gather, 0.0),
    "zeropp-hpz-secondary-all-gather": (hpz_all_gather, 0.0),
    "sharded-grad-clip": (sharded_clip, 1e-6),
    "zero3-linear-forward": (zero3_forward, 1e-5),
    "zero3-linear-backward": (zero3_backward, 1e-5),
    "megatron-distopt-param-all-gather": (megatron_param_all_gather, 0.0),
    "hsdp-reduce-scatter-all-reduce": (hsdp, 1e-5),
    # pipeline
    "pp-send-forward-recv-forward": (pp_send_forward_recv_forward, 0.0),
    "pp-1f1b-steady-state": (pp_1f1b, 1e-5),
    "pp-interleaved-forward-sweep": (pp_interleaved_forward, 1e-5),
    "pp-interleaved-send-recv-forward-backward": (pp_send_recv_forward_backward, 0.0),
}
SKIPPED: dict[str, str] = {}

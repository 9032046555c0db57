"""The text a bot needs to write a kernel: problem, measured hardware facts, world size, shapes."""

from __future__ import annotations

from typing import Any

from . import presenters, prompt_hardware
from .models import Hardware, ProblemVersion

BACKEND_NOTES = {
    "torch": "Use PyTorch and torch.distributed only (symmetric memory via "
             "torch.distributed._symmetric_memory is allowed).",
    "triton": "Write Triton kernels (triton.jit); peers' buffers are reachable through "
              "torch.distributed._symmetric_memory: symm_mem.empty, rendezvous(buf, group), "
              "handle.buffer_ptrs[peer].",
    "cuda": "Write CUDA C++ built through the evaluator's helper, which compiles once per "
            "evaluation for all ranks and caches by source hash: `from evaluator.cuda import "
            "compile_kernels, load_extension, peer_pointers`; `compile_kernels(src, [names])` "
            "builds with NVRTC in well under a second and returns launchable kernels "
            "(`kernel(*args, grid=..., block=...)`; tensors pass as pointers); `load_extension` "
            "wraps torch's load_inline for C++ bindings (tens of seconds cold). Peers' buffers are "
            "reachable through torch.distributed._symmetric_memory: symm_mem.empty, "
            "rendezvous(buf, group), handle.buffer_ptrs / peer_pointers(handle), "
            "handle.barrier(channel=...). NVLink multicast (multimem) is not available.",
}

# A CPU host runs ranks over gloo: symmetric memory, Triton and CUDA need a GPU, so its prompt
# must not offer them (its "Backends on this host" line says the same).
CPU_BACKEND_NOTES = {
    "torch": "Use PyTorch and torch.distributed only (gloo on CPU processes: this host has no "
             "GPU, so symmetric memory is not available here; it is on the GPU hosts).",
}
CPU_OTHER_BACKEND = ("This host has no GPU: {backend} kernels cannot run on it. Choose GPU hardware "
                     "for a {backend} solution, or write a torch one for this host.")


def backend_note(backend: str, hw: Hardware) -> str:
    """What the prompt's "Backend" section tells a model, consistent with the host's backends."""
    if hw.kind != "gpu":
        return CPU_BACKEND_NOTES.get(backend, CPU_OTHER_BACKEND.format(backend=backend))
    return BACKEND_NOTES.get(backend, BACKEND_NOTES["torch"])


def _hardware_facts(hw: Hardware) -> list[str]:
    p = hw.profile
    facts = [f"Hardware profile: {hw.slug} ({hw.name})."]
    gpus = p.get("gpus")
    if isinstance(gpus, dict):
        facts.append(f"GPUs: {gpus.get('count')} x {gpus.get('model')}, {gpus.get('sms')} SMs, "
                     f"{gpus.get('memory_gib')} GiB, compute capability {gpus.get('compute_capability')}.")
    nvlink = p.get("nvlink") or {}
    if nvlink.get("per_link_gbps"):
        links = {v.get("links") for v in (nvlink.get("per_gpu") or {}).values() if isinstance(v, dict)}
        facts.append(f"NVLink: {', '.join(map(str, sorted(l for l in links if l is not None)))} links "
                     f"per GPU at {nvlink['per_link_gbps']} GB/s each; nominal "
                     f"{nvlink.get('nominal_gbps_per_direction')} GB/s per direction.")
    heat = presenters.bandwidth_heatmap(p)
    if heat:
        off = [v for i, row in enumerate(heat["z"]) for j, v in enumerate(row) if i != j and v]
        if off:
            facts.append(f"Measured peer copy bandwidth (copy engine, one pair at a time): "
                         f"{min(off):.0f}-{max(off):.0f} GB/s.")
    curves = presenters.collective_curves(p)
    if curves:
        best = {op: max((y for y in s["y"] if y is not None), default=None)
                for op, s in curves["series"].items()}
        facts.append(f"Measured {curves['backend']} bus bandwidth, best over sizes at "
                     f"{curves['world_size']} ranks: " +
                     ", ".join(f"{op} {v} GB/s" for op, v in best.items() if v is not None) + ".")
    hbm = p.get("hbm_copy_gbps")
    if isinstance(hbm, dict) and hbm.get("read_plus_written_gbps"):
        facts.append(f"Device memory copy: {hbm['read_plus_written_gbps']} GB/s read plus written.")
    roof = p.get("roofline") or {}
    if roof.get("link_gbps"):
        tflops = roof.get("tflops") or {}
        rates = ", ".join(f"{k} {v}" for k, v in tflops.items()) if isinstance(tflops, dict) else tflops
        facts.append(f"Roofline rates: link {roof['link_gbps']} GB/s per GPU per direction, HBM "
                     f"{roof.get('hbm_gbps')} GB/s, TFLOP/s {rates}.")
    software = p.get("software") or {}
    if software:
        facts.append("Software: " + ", ".join(f"{k} {v}" for k, v in software.items() if v) + ".")
    if hw.kind == "cpu":
        facts.append("Ranks are CPU processes over gloo; sizes are the small presets.")
    return facts


def build_prompt(version: ProblemVersion, hw: Hardware, backend: str) -> dict[str, Any]:
    problem = version.problem
    world_size = hw.ranked_world_size(problem.world_sizes)
    details = version.details
    dtype = (details.get("dtypes") or ["bfloat16"])[0]
    shapes = version.shapes(world_size, hw.size) if world_size else {}
    traffic = version.traffic(world_size, hw.size) if world_size else None
    roof = presenters.roofline_ms(traffic, hw.profile, dtype) if traffic and "error" not in traffic else None
    tol = (details.get("tolerances") or {}).get(dtype)
    lines = [
        f"# Task: write a faster `solution` for PKB problem {problem.number} `{problem.slug}`",
        "", f"## {version.title}", version.description, "",
        f"Modeled on {problem.source_codebase}: {problem.source_function} ({problem.source_url}).",
        "", "## Run setting",
        f"- world size: {world_size} ranks, one per {'GPU' if hw.kind == 'gpu' else 'CPU process'}",
        f"- size preset: {hw.size}; dtype: {dtype}" + (f" (atol {tol[0]}, rtol {tol[1]})" if tol else ""),
        "- inputs of rank 0:",
        *[f"  - {name}: {presenters._shape_text(info)}" for name, info in shapes.items()],
    ]
    if traffic and "error" not in traffic:
        lines.append(f"- busiest rank moves {traffic['link_bytes']:.0f} link bytes, "
                     f"{traffic['hbm_bytes']:.0f} HBM bytes, {traffic['flops']:.0f} FLOPs")
    if roof:
        lines.append(f"- roofline time on this hardware: {roof['time_ms']:.4f} ms ({roof['bound']}-bound)")
    profile = prompt_hardware.profile_lines(hw)
    terms = prompt_hardware.roofline_lines(traffic, hw, dtype)
    hosts = prompt_hardware.backends(hw)
    example = prompt_hardware.worked_example(backend)
    lines += ["", "## Hardware", *[f"- {f}" for f in _hardware_facts(hw)]]
    if profile:
        lines += ["", "## Measured hardware profile", *profile]
    if terms:
        lines += ["", "## Roofline of this problem at this size", *terms]
    lines += ["", "## Backends on this host", *[f"- {b}" for b in hosts], "",
              "## Backend", backend_note(backend, hw), ""]
    if example:
        lines += [f"## Worked example ({backend}): `{example['path']}`",
                  "A committed kernel for another problem, to show how the pieces fit "
                  f"together. {example['record']}", "```python",
                  example["source"].rstrip(), "```", ""]
    lines += [
              "## Rules",
              f"- Define `{version.signature}` with exactly the reference's parameters "
              "(called with keywords, process groups as keyword-only arguments).",
              "- Return fresh tensors (or the inputs the reference updates in place); outputs are "
              "checked on every rank in 5 trials with fresh secret seeds, and again on a timed "
              "call chosen while timing runs. Inputs must be left unchanged.",
              "- No caching of results, no side streams escaping the timing, no fallbacks to the reference.",
              "", "## Reference", "```python", version.source_text.rstrip(), "```"]
    return {"problem": problem.slug, "version": version.version, "hardware": hw.slug,
            "backend": backend, "world_size": world_size, "size": hw.size, "dtype": dtype,
            "shapes": shapes, "traffic": traffic, "roofline": roof, "signature": version.signature,
            "hardware_facts": _hardware_facts(hw), "profile": profile, "roofline_terms": terms,
            "backends": hosts, "example": example and {k: example[k] for k in ("path", "backend", "record")},
            "prompt": "\n".join(lines) + "\n"}

"""Compile the push kernels of solutions/triton/ for sm_90 without a GPU and check their PTX.

    PYTHONPATH=<site-packages with triton> .venv/bin/python scripts/triton_compile_check.py [--out DIR]

Triton is not a dependency of this repository (GPU hosts have it beside torch): install a
triton wheel into a scratch virtual environment and put its site-packages on PYTHONPATH. Only
the compiler runs (ASTSource -> TTIR -> TTGIR -> LLVM -> PTX -> cubin with the ptxas the wheel
ships); nothing is launched. Needs Triton 3.3 or later (name-keyed signatures).

For each kernel, world size (2, 3, 4, 8), dtype (bf16, fp32) and shard size (a multiple of 16
elements or not), it checks that the meeting compiled to one release and one acquire
compare-and-swap at system scope per peer, each issued by one thread of the program, and that
a shard of a multiple of 16 elements gives 16-byte loads and stores. --out keeps the TTGIR and
PTX of every variant. Exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = [("solutions/triton/all_gather_triton.py", "_all_gather_push"),
           ("solutions/triton/reduce_scatter_triton.py", "_reduce_scatter_push")]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_kernel(fn, dtype: str, world: int, block: int, n_multiple_of_16: bool):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    types = {"bufs": "*i64", "pads": "*i64", "x": f"*{dtype}", "out": f"*{dtype}", "n": "i32",
             "slot": "i32", "parity": "i32", "rank": "i32"}
    constants = {"WORLD": world, "PEERS": triton.next_power_of_2(max(world - 1, 1)), "BLOCK": block}
    signature = {name: types.get(name, "constexpr") for name in names}
    constexprs = {(names.index(k),): v for k, v in constants.items()}
    # What Triton's launcher would specialise: tensors 16-byte aligned, slot a multiple of 16.
    aligned = ["bufs", "pads", "x", "out", "slot"] + (["n"] if n_multiple_of_16 else [])
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in aligned}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 16, "num_stages": 1})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep every variant's TTGIR and PTX here")
    args = parser.parse_args()
    try:
        import triton
    except ImportError:
        print("no triton importable: put a triton wheel's site-packages on PYTHONPATH")
        return 1
    print(f"triton {triton.__version__}")
    failures = 0
    for file, kernel in KERNELS:
        fn = getattr(load(ROOT / file), kernel)
        for dtype, size in (("bf16", 2), ("fp32", 4)):
            for world in (2, 3, 4, 8):
                for aligned in (True, False):
                    tag = f"{kernel}-{dtype}-x{world}-{'n16' if aligned else 'n1'}"
                    compiled = compile_kernel(fn, dtype, world, 8192 // size, aligned)
                    ptx = compiled.asm["ptx"]
                    if args.out:
                        args.out.mkdir(parents=True, exist_ok=True)
                        (args.out / f"{tag}.ttgir").write_text(compiled.asm["ttgir"])
                        (args.out / f"{tag}.ptx").write_text(ptx)
                    release = re.findall(r"@%p\d+ atom\.global\.release\.sys\.cas\.b32", ptx)
                    acquire = re.findall(r"@%p\d+ atom\.global\.acquire\.sys\.cas\.b32", ptx)
                    vec_ld = len(re.findall(r"ld\.global(?:\.cg)?\.v4\.b32", ptx))
                    vec_st = len(re.findall(r"st\.global\.v4\.b32", ptx))
                    problems = []
                    if len(release) != world - 1 or len(acquire) != world - 1:
                        problems.append(f"{len(release)} release / {len(acquire)} acquire CAS, "
                                        f"want {world - 1} each")
                    if aligned and (vec_ld == 0 or vec_st == 0):
                        problems.append("no 16-byte loads or stores")
                    failures += bool(problems)
                    print(f"{'FAIL' if problems else 'ok  '} {tag:42} shared {compiled.metadata.shared:6} B, "
                          f"v4 loads {vec_ld:2}, v4 stores {vec_st:2}"
                          + (f": {'; '.join(problems)}" if problems else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

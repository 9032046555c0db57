"""Where the reference's re-check of one drawn call, and the judge's comparison of it, spend
their time on a GPU (the `finish` and `comparison` phases of a `pkb eval` judged outside: 28-32 s
and 8-9 s of 71-82 s on 2 x H200, docs/judge.md).

One process, one GPU, the problem's inputs of rank 0 at world size 2, its collectives over a
one-rank NCCL group (the bytes each rank moves through its own GPU are the same). Per re-check,
as `TaskRunner.run_trial` does it: the inputs from a seed, their copies for the mutation check,
the float64 exact run, the call, the mutation check, the outputs and the exact residuals saved;
then as `Evaluation.check_rank` does it: the candidate's copy hashed and loaded, the reference's
outputs and residuals loaded, moved to the GPU and compared. Each step timed alone (synchronized
before and after), median of the repeats, ms.

    python3 scripts/gpu/recheck_cost.py [--problem all-reduce] [--size default] [--repeats 8] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from evaluator.api import on_device  # noqa: E402
from evaluator.compare import compare_outputs  # noqa: E402
from evaluator.exact import exact_path, exact_with_band, load_exact, save_exact, warm_up  # noqa: E402
from evaluator.outputs import load_candidate_outputs  # noqa: E402
from evaluator.rank_runner import _tensor_equal, _tensor_inputs, as_output_list, build_groups, save_outputs  # noqa: E402
from problems import get  # noqa: E402


def saves_in_threads(outputs: list[torch.Tensor], work: Path, count: int) -> None:
    """Would a rank's saves go faster side by side? ``count`` saves of these outputs, one after
    another and from 2 and 4 threads (torch.save writes its records with the GIL released?)."""
    from concurrent.futures import ThreadPoolExecutor

    def save(index: int) -> None:
        save_outputs(outputs, work / f"parallel{index}.pt")

    for threads in (1, 2, 4):
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(save, range(count)))
        print(f"{count} saves from {threads} thread(s): {(time.perf_counter() - began) * 1e3 / count:.2f} ms a save")
        for f in work.iterdir():
            f.unlink()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="all-reduce")
    parser.add_argument("--size", default="default")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--dir", default="/dev/shm", help="where the files go (a side's folders are tmpfs)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: gloo, to try the probe itself")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    device = torch.device("cuda:0" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", store=dist.FileStore(tempfile.mktemp(), 1), rank=0,
                            world_size=1, **({"device_id": device} if cuda else {}))
    problem = get(args.problem)
    dtype = torch.bfloat16
    groups = build_groups(problem, 1, 0)
    warm_up()
    work = Path(tempfile.mkdtemp(dir=args.dir))
    times: dict[str, list[float]] = {}

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def step(name: str, fn):  # noqa: ANN001, ANN202
        sync()
        began = time.perf_counter()
        value = fn()
        sync()
        times.setdefault(name, []).append((time.perf_counter() - began) * 1e3)
        return value

    def call(inputs):  # noqa: ANN001, ANN202
        return problem.reference(**inputs, **groups)

    for repeat in range(args.repeats + 1):
        if repeat == 1:
            times.clear()  # the first re-check warms every path up
        case = problem.case(2, args.size, dtype, rank=0, seed=1000 + repeat, device=device, salt="probe")
        inputs = step("reference: inputs", lambda: problem.make_inputs(case))
        before = step("reference: copies for the mutation check",
                      lambda: {n: t.clone() for n, t in _tensor_inputs(inputs).items() if n not in problem.may_overwrite})
        exact = step("reference: float64 exact run", lambda: exact_with_band(call, inputs, problem.decision_band))
        outputs = step("reference: the call", lambda: as_output_list(call(inputs), "reference"))
        step("reference: mutation check", lambda: [_tensor_equal(t, inputs[n]) for n, t in before.items()])
        path = work / f"task0_trial{repeat}_rank0.pt"
        step("reference: save outputs", lambda: save_outputs(outputs, path))
        step("reference: save exact residuals", lambda: save_exact(outputs, exact, exact_path(path)))
        # The judge's copy of the candidate's outputs (here the reference's own), as write_outputs makes it.
        data = io.BytesIO()
        step("judge: serialize its copy", lambda: torch.save([t.cpu() for t in outputs], data))
        digest = step("judge: hash its copy", lambda: hashlib.sha256(data.getbuffer()).hexdigest())
        candidate_path = work / f"task0_timed{repeat}_rank0.pt"
        step("judge: write its copy", lambda: candidate_path.write_bytes(data.getbuffer()))
        got = step("judge: load the candidate's copy (hash checked)", lambda: load_candidate_outputs(candidate_path, digest))
        want = step("judge: load the reference's outputs", lambda: torch.load(path, weights_only=True))
        records = step("judge: load the exact residuals", lambda: load_exact(exact_path(path)))
        moved = step("judge: to the GPU", lambda: (on_device(got, device), on_device(want, device), on_device(records, device)))
        checks = step("judge: compare", lambda: list(compare_outputs(*moved[:2], problem.tolerance(dtype), moved[2])))
        assert all(c["status"] == "ok" for c in checks), checks
        for f in work.iterdir():
            f.unlink()
    saves_in_threads(outputs, work, args.repeats)
    nbytes = sum(t.numel() * t.element_size() for t in outputs)
    print(f"{args.problem}, size {args.size}, {nbytes >> 20} MiB of outputs per rank, files in {args.dir}, "
          f"torch {torch.__version__}, {args.repeats} re-checks (medians, ms)")
    total = {"reference": 0.0, "judge": 0.0}
    for name, values in times.items():
        median = statistics.median(values)
        total[name.split(":")[0]] += median
        print(f"| {name} | {median:.2f} |")
    print(f"| reference, one re-check | {total['reference']:.2f} |\n| judge, one comparison | {total['judge']:.2f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

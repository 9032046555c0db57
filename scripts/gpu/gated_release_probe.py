"""Can the judge release a block's calls one at a time without a host round trip per call?

The judge outside the candidate (docs/judge.md) releases inputs either call by call (a pipe round
trip per call: 5.7x a bare call on 2 x H200) or a whole block at once (1.8x, but a candidate may
then answer the block with one batched computation: 3.75x faster per call at 4 KiB). This probe
measures a third shape on one GPU, with two processes as the judge and a rank are:

- The judge allocates the block's input regions, output slots and two flag words per call in
  driver memory it exports (cuMem, POSIX descriptor; evaluator/shared_memory/device.py) and the
  candidate process maps.
- The candidate queues its whole block at once, but each call's work waits on the GPU for the
  call's "ready" flag (cuStreamWaitValue32) and ends by writing its "done" flag
  (cuStreamWriteValue32).
- The judge's stream writes call k's inputs only once call k-1's "done" has been written, then
  its "ready": no call's inputs exist before the previous call has answered, so no batching, and
  no host is involved between calls. The judge times the block with its own CUDA events and
  copies the outputs of calls it draws (secretly) right after their "done", before the next
  release, so nothing done later changes them.

Printed per size (per call, medians over blocks, judge's events): the bare loop in one process;
the gated release with inputs written at release (strict), written one call ahead (lookahead 1),
or written before the block (gate only: not sound, the gating's own cost); strict with drawn
copies; and a candidate that writes "done" before its work (its drawn copies must be caught).
Also: the run time the candidate's threads (a process with a CUDA context) show while it stands
SIGSTOPped and the judge works on the GPU (the judge's FROZEN_RUN_NS is 1 ns).

    python3 scripts/gpu/gated_release_probe.py --out $OUT    # one GPU is enough
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NO_MULTICAST)
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from evaluator.judge.liveness import ran_since, thread_run_ns  # noqa: E402
from evaluator.sandbox.plain import _stopped  # noqa: E402
from evaluator.shared_memory.device import DeviceMemory, _cu  # noqa: E402

WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ
FLAG_BYTES = 4
MODES = ("strict", "lookahead1", "gate_only", "strict_drawn", "early_done_drawn")


def _memop(name: str):
    cu = _cu()
    fn = getattr(cu, name + "_v2", None) or getattr(cu, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def wait_value(stream: torch.cuda.Stream, addr: int, value: int) -> None:
    code = _memop("cuStreamWaitValue32")(ctypes.c_void_p(stream.cuda_stream), addr, value, WAIT_GEQ)
    if code:
        raise RuntimeError(f"cuStreamWaitValue32 failed with CUDA driver error {code}")


def write_value(stream: torch.cuda.Stream, addr: int, value: int) -> None:
    code = _memop("cuStreamWriteValue32")(ctypes.c_void_p(stream.cuda_stream), addr, value, 0)
    if code:
        raise RuntimeError(f"cuStreamWriteValue32 failed with CUDA driver error {code}")


class Layout:
    """Where call k's region, slot and flags lie in the one shared allocation."""

    def __init__(self, calls: int, nbytes: int) -> None:
        self.calls, self.nbytes = calls, nbytes
        self.flags = 2 * calls * FLAG_BYTES
        self.size = self.flags + 2 * calls * nbytes

    def ready(self, base: int, k: int) -> int:
        return base + k * FLAG_BYTES

    def done(self, base: int, k: int) -> int:
        return base + (self.calls + k) * FLAG_BYTES

    def region(self, memory: DeviceMemory, k: int) -> torch.Tensor:
        return memory.view(self.flags + k * self.nbytes, self.nbytes).view(torch.float32)

    def slot(self, memory: DeviceMemory, k: int) -> torch.Tensor:
        return memory.view(self.flags + (self.calls + k) * self.nbytes, self.nbytes).view(torch.float32)


def candidate_main(fd: int, size: int, calls: int, nbytes: int) -> None:
    """The candidate's process: queues each block gated on the judge's flags."""
    layout = Layout(calls, nbytes)
    memory = DeviceMemory.attach(0, fd, size)
    base = memory.view(0, 1).data_ptr()
    stream = torch.cuda.Stream()
    # Every kernel launched once before any launch is queued behind a wait: CUDA loads a module
    # at its kernel's first launch (lazy loading, the default), and that load waits for the
    # context's streams, one of which may be waiting on the judge: the launch never returns
    # (measured here: the first version of this probe hung in torch.add).
    torch.add(layout.region(memory, 0), 1.0, out=layout.slot(memory, 0))
    torch.cuda.synchronize()
    print("attached", flush=True)
    for line in sys.stdin:
        mode, epoch = line.split()
        epoch = int(epoch)
        with torch.cuda.stream(stream):
            for k in range(calls):
                wait_value(stream, layout.ready(base, k), epoch)
                if mode == "early_done_drawn":
                    write_value(stream, layout.done(base, k), epoch)
                torch.add(layout.region(memory, k), 1.0, out=layout.slot(memory, k))
                if mode != "early_done_drawn":
                    write_value(stream, layout.done(base, k), epoch)
        print("queued", flush=True)
    stream.synchronize()
    memory.close()


def freeze(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while not _stopped(pid):
        if time.monotonic() > deadline:
            raise RuntimeError("the candidate did not stop within 5 s")
        time.sleep(0.0002)


_SCRATCH: list[torch.Tensor] = []


def judge_work() -> None:
    """Some GPU work of the judge's own while the candidate stands stopped."""
    if not _SCRATCH:
        _SCRATCH.append(torch.randn(1024, 1024, device="cuda"))
    torch.matmul(_SCRATCH[0], _SCRATCH[0])


def bare(calls: int, nbytes: int, blocks: int) -> list[float]:
    regions = [torch.randn(nbytes // 4, device="cuda") for _ in range(calls)]
    slots = [torch.empty_like(r) for r in regions]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(blocks + 2):
        start.record()
        for region, slot in zip(regions, slots):
            torch.add(region, 1.0, out=slot)
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return per_call[2:]


def gated(child: subprocess.Popen, memory: DeviceMemory, layout: Layout, inputs: list[torch.Tensor],
          mode: str, epoch: int, drawn: int, rng: random.Random, stream: torch.cuda.Stream) -> dict:
    calls = layout.calls
    base = memory.view(0, 1).data_ptr()
    draw = set(rng.sample(range(calls), drawn)) if mode.endswith("_drawn") else set()
    copies = {k: torch.empty(layout.nbytes // 4, device="cuda") for k in draw}
    if mode == "gate_only":
        for k in range(calls):
            layout.region(memory, k).copy_(inputs[(epoch + k) % len(inputs)])
        torch.cuda.synchronize()
    child.stdin.write(f"{mode} {epoch}\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "queued"
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def write_inputs(k: int) -> None:
        layout.region(memory, k).copy_(inputs[(epoch + k) % len(inputs)])

    with torch.cuda.stream(stream):
        start.record()
        if mode == "lookahead1":
            write_inputs(0)
        for k in range(calls):
            if k > 0:
                wait_value(stream, layout.done(base, k - 1), epoch)
                if k - 1 in draw:
                    copies[k - 1].copy_(layout.slot(memory, k - 1))
            if mode in ("strict", "strict_drawn", "early_done_drawn"):
                write_inputs(k)
            write_value(stream, layout.ready(base, k), epoch)
            if mode == "lookahead1" and k + 1 < calls:
                write_inputs(k + 1)
        wait_value(stream, layout.done(base, calls - 1), epoch)
        if calls - 1 in draw:
            copies[calls - 1].copy_(layout.slot(memory, calls - 1))
        end.record()
    end.synchronize()
    # The candidate's stream has passed its last "done"; its last add may still run when it wrote
    # "done" early. Wait for the whole GPU before reading what it left.
    torch.cuda.synchronize()
    wrong = sum(int(not torch.equal(copies[k], inputs[(epoch + k) % len(inputs)] + 1.0)) for k in draw)
    # Frozen: the candidate (a process with a CUDA context and its driver's threads) stopped while
    # the judge works on the GPU for a few milliseconds.
    freeze(child.pid)
    before = thread_run_ns([child.pid])
    for _ in range(20):
        judge_work()
    torch.cuda.synchronize()
    time.sleep(0.002)
    frozen_ns = ran_since(before, thread_run_ns([child.pid]))
    os.kill(child.pid, signal.SIGCONT)
    return {"ms_per_call": start.elapsed_time(end) / calls, "drawn": len(draw), "wrong": wrong,
            "frozen_run_ns": frozen_ns, "threads": len(before)}


def measure(size_label: str, nbytes: int, calls: int, blocks: int, drawn: int, seed: int) -> dict:
    layout = Layout(calls, nbytes)
    memory = DeviceMemory.create(0, layout.size)
    memory.view(0, layout.flags).zero_()
    inputs = [torch.randn(nbytes // 4, device="cuda") for _ in range(max(4, calls // 4))]
    layout.region(memory, 0).copy_(inputs[0])  # every kernel the judge uses, loaded before any wait
    torch.equal(inputs[0], inputs[0] + 1.0)
    judge_work()
    torch.cuda.synchronize()
    child = subprocess.Popen(
        [sys.executable, __file__, "--candidate", str(memory.fd()), str(memory.size), str(calls), str(nbytes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[memory.fd()],
        env={**os.environ, **NO_MULTICAST})
    memory.close_fd()
    assert child.stdout.readline().strip() == "attached"
    print(f"{size_label}: attached", file=sys.stderr, flush=True)
    rng = random.Random(seed)
    stream = torch.cuda.Stream()
    row: dict = {"size": size_label, "bytes": nbytes, "calls": calls,
                 "bare_ms": statistics.median(bare(calls, nbytes, blocks))}
    epoch = 0
    frozen: list[int] = []
    threads = 0
    for mode in MODES:
        results = []
        for _ in range(blocks + 1):
            epoch += 1
            results.append(gated(child, memory, layout, inputs, mode, epoch, drawn, rng, stream))
        results = results[1:]
        print(f"{size_label}: {mode} done", file=sys.stderr, flush=True)
        row[f"{mode}_ms"] = statistics.median(r["ms_per_call"] for r in results)
        if mode.endswith("_drawn"):
            row[f"{mode}_caught"] = f"{sum(r['wrong'] > 0 for r in results)}/{len(results)} blocks, " \
                                    f"{sum(r['wrong'] for r in results)}/{sum(r['drawn'] for r in results)} copies"
        frozen += [r["frozen_run_ns"] for r in results]
        threads = max(threads, max(r["threads"] for r in results))
    row["frozen_nonzero"] = f"{sum(ns > 0 for ns in frozen)}/{len(frozen)} (max {max(frozen)} ns, {threads} threads)"
    child.stdin.close()
    child.wait(timeout=60)
    memory.close()
    return row


def check(variant: str) -> dict:
    """Does a stream wait released by another stream work here? ``same_process``: two streams of
    one context; ``cross_kernel``: the candidate's stream waits, the judge (another process, its
    own context) writes the flag with a kernel; ``cross_memop``: the same with the judge's
    cuStreamWriteValue32. Each runs in a process of its own under a timeout (a hang is an answer)."""
    layout = Layout(1, 4096)
    memory = DeviceMemory.create(0, layout.size)
    memory.view(0, layout.flags).zero_()
    torch.cuda.synchronize()
    base = memory.view(0, 1).data_ptr()
    stream = torch.cuda.Stream()
    torch.cuda._sleep(1000)  # loaded before any wait is queued (candidate_main says why)
    memory.view(8, 4).view(torch.int32).fill_(0)
    torch.cuda.synchronize()
    began = time.perf_counter()
    if variant == "same_process":
        waiter = torch.cuda.Stream()
        with torch.cuda.stream(waiter):
            wait_value(waiter, layout.ready(base, 0), 1)
            done = torch.cuda.Event()
            done.record()
        with torch.cuda.stream(stream):
            torch.cuda._sleep(1_000_000)
            write_value(stream, layout.ready(base, 0), 1)
        done.synchronize()
        return {"variant": variant, "ok": True, "ms": (time.perf_counter() - began) * 1e3}
    child = subprocess.Popen(
        [sys.executable, __file__, "--candidate", str(memory.fd()), str(memory.size), "1", "4096", "--timeout", "38"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[memory.fd()],
        env={**os.environ, **NO_MULTICAST})
    memory.close_fd()
    assert child.stdout.readline().strip() == "attached"
    child.stdin.write("strict 1\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "queued"
    began = time.perf_counter()
    with torch.cuda.stream(stream):
        if variant == "cross_kernel":
            memory.view(0, 4).view(torch.int32).fill_(1)
        else:
            write_value(stream, layout.ready(base, 0), 1)
        wait_value(stream, layout.done(base, 0), 1)
        finished = torch.cuda.Event()
        finished.record()
    finished.synchronize()
    ms = (time.perf_counter() - began) * 1e3
    child.stdin.close()
    child.wait(timeout=30)
    return {"variant": variant, "ok": True, "ms": ms}


def in_own_process(args: list[str], timeout_s: float) -> dict:
    """One step in a process of its own: a GPU stream that never returns ends with it."""
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, **NO_MULTICAST}, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the step and its candidate process, both
        stdout, stderr = process.communicate()
        return {"ok": False, "error": f"no answer within {timeout_s:.0f} s (hang)", "stderr": stderr[-4000:]}
    done = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"ok": False, "error": f"exit {done.returncode}", "stderr": done.stderr[-4000:]}
    return json.loads(lines[-1])


SIZES = {"4K": 4 << 10, "64K": 64 << 10, "256K": 256 << 10, "4M": 4 << 20, "64M": 64 << 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="4K,64K,256K,4M,64M")
    parser.add_argument("--calls", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--drawn", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--check", help=argparse.SUPPRESS)
    parser.add_argument("--one-size", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=60, help="seconds per size before it counts as a hang")
    args = parser.parse_args()
    if args.candidate or args.check or args.one_size:
        # A step that hangs says where: every thread's stack on stderr before its timeout.
        faulthandler.dump_traceback_later(args.timeout - 8 if not args.check else 30, exit=True)
    if args.candidate:
        candidate_main(*args.candidate)
        return
    if args.check:
        print(json.dumps(check(args.check)))
        return
    if args.one_size:
        print(json.dumps(measure(args.one_size, SIZES[args.one_size], args.calls, args.blocks, args.drawn,
                                 args.seed)))
        return
    checks = []
    for variant in ("same_process", "cross_kernel", "cross_memop"):
        result = in_own_process(["--check", variant], 45)
        checks.append({"variant": variant, **result})
        print(f"check {variant:13s} {'ok' if result.get('ok') else 'FAILED'} "
              f"{result.get('ms', 0):.2f} ms {result.get('error', '')} {result.get('stderr', '')[-3000:]}", flush=True)
    rows = []
    header = (f"{'size':>5} {'bare':>8} {'strict':>8} {'look1':>8} {'gate':>8} {'drawn':>8} {'x bare':>7} "
              f"{'early answerer caught':>30}  frozen run time > 0")
    print(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} gated_release_probe on "
          f"{torch.cuda.get_device_name(0)}, {args.calls} calls a block, {args.blocks} blocks, ms per call")
    print(header)
    for label in args.sizes.split(",") if checks[-1].get("ok") else []:
        row = in_own_process(["--one-size", label, "--calls", str(args.calls), "--blocks", str(args.blocks),
                              "--drawn", str(args.drawn), "--seed", str(args.seed)], args.timeout)
        rows.append(row)
        if "bare_ms" not in row:
            print(f"{label:>5} FAILED {row.get('error')} {row.get('stderr', '')[-400:]}", flush=True)
            continue
        print(f"{label:>5} {row['bare_ms']:8.4f} {row['strict_ms']:8.4f} {row['lookahead1_ms']:8.4f} "
              f"{row['gate_only_ms']:8.4f} {row['strict_drawn_ms']:8.4f} "
              f"{row['strict_ms'] / row['bare_ms']:7.2f} {row['early_done_drawn_caught']:>30}  "
              f"{row['frozen_nonzero']}  (strict_drawn caught: {row['strict_drawn_caught']})", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gated_release_probe.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "args": vars(args) | {"out": str(args.out)},
             "checks": checks, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

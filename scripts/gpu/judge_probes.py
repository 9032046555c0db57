"""Probes for a judge that lives outside the candidate on a GPU host (issue: the judge outside).

Three questions, each answered by measurement on the host, printed as a table and saved as JSON:

A. Can a judge process share GPU buffers with a rank confined by our sandbox (its own user, PID,
   mount and network namespaces)? The judge allocates with cuMemCreate (POSIX file descriptor
   handles), sends the descriptor over a Unix socket (SCM_RIGHTS), the confined rank imports and
   maps it, reads the judge's pattern, writes its own with a torch kernel; the judge reads that
   back and copies the buffer into memory of its own (timed with its own events).
B. What does timing whole blocks from the judge cost? Two NCCL ranks run K all-reduces (64 MiB
   bf16) per command from a pipe; the judge's wall clock (go -> K calls -> synchronize -> done)
   against the ranks' own CUDA events around the same K calls.
C. Can the judge tell that a stopped candidate left work running on the GPU? A child queues
   about a second of matmuls and is SIGSTOPped; the judge times a tiny kernel of its own and
   asks nvidia-smi, with and without that work in flight.

    python3 scripts/gpu/judge_probes.py --out $OUT      # on nvidia-h200-x2 / nvidia-h100-x2

NVLink multicast stays off in every process (the variables below are set before CUDA starts).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NO_MULTICAST)
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# -- the driver's virtual memory API, through ctypes (no package beyond torch needed) ------------
CUMEM = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
class Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class Flags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]
class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Loc),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", Flags)]
class Access(ctypes.Structure):
    _fields_ = [("location", Loc), ("flags", ctypes.c_int)]
def check(code, what):
    if code != 0:
        raise RuntimeError(f"{what} failed with CUDA driver error {code}")
def prop(device):
    p = Prop(); p.type = 1; p.requestedHandleTypes = 1; p.location = Loc(1, device)  # pinned, POSIX fd, device
    return p
def granularity(device):
    g = ctypes.c_size_t(); check(cu.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop(device)), 0), "granularity")
    return g.value
def map_handle(handle, size, device):
    ptr = ctypes.c_uint64()
    check(cu.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_ulonglong(0)), "reserve")
    check(cu.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0)), "map")
    a = Access(Loc(1, device), 3)
    check(cu.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(a), ctypes.c_size_t(1)), "set access")
    return ptr.value
def create(size, device):
    h = ctypes.c_uint64()
    check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(size), ctypes.byref(prop(device)), ctypes.c_ulonglong(0)), "create")
    return h
def export_fd(handle):
    fd = ctypes.c_int()
    check(cu.cuMemExportToShareableHandle(ctypes.byref(fd), handle, 1, ctypes.c_ulonglong(0)), "export")
    return fd.value
def import_fd(fd):
    h = ctypes.c_uint64()
    check(cu.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd), 1), "import")
    return h
class View:
    """A device pointer as something torch.as_tensor takes (the CUDA array interface)."""
    def __init__(self, ptr, numel, typestr="<u4"):
        self.__cuda_array_interface__ = {"shape": (numel,), "typestr": typestr, "data": (ptr, False), "version": 3}
'''
exec(CUMEM)  # the judge's own copy of the helpers above; the confined child gets the same text


# -- A: a buffer shared with a confined rank ----------------------------------------------------
CHILD_A = r'''
import os, socket, sys, time, json
import torch
t0 = time.perf_counter()
torch.cuda.set_device(0); torch.zeros(1, device="cuda")
sock = socket.socket(fileno=int(sys.argv[1]))
msg, fds, _, _ = socket.recv_fds(sock, 1024, 1)
size = int(msg.decode())
t1 = time.perf_counter()
''' + CUMEM + r'''
h = import_fd(fds[0])
ptr = map_handle(h, size, 0)
t2 = time.perf_counter()
buf = torch.as_tensor(View(ptr, size // 4), device="cuda")
seen = int(buf[0].item()), int(buf[-1].item())
buf[: size // 8].fill_(0x22222222)
torch.cuda.synchronize()
sock.sendall(json.dumps({"seen": [hex(s) for s in seen], "uid": os.getuid(), "pid": os.getpid(),
                         "cuda_init_s": t1 - t0, "import_map_s": t2 - t1}).encode())
'''


def probe_a(size: int) -> dict:
    import torch

    from evaluator.config import ResourceLimits
    from evaluator.sandbox import RankLaunch, open_box
    from evaluator.sandbox.policy import rank_env

    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")  # the primary context, which the driver calls below share
    size = -(-size // granularity(0)) * granularity(0)
    handle = create(size, 0)
    ptr = map_handle(handle, size, 0)
    mine = torch.as_tensor(View(ptr, size // 4), device="cuda")
    mine.fill_(0x11111111)
    torch.cuda.synchronize()
    fd = export_fd(handle)
    with tempfile.TemporaryDirectory(prefix="pkb-probe-") as tmp:
        inbox = Path(tmp) / "in"
        inbox.mkdir()
        box = open_box(Path(tmp), inbox, "cuda", ResourceLimits(), confined=True)
        ours, theirs = socket.socketpair()
        log_r, log_w = os.pipe()
        stdin_r, stdin_w = os.pipe()
        os.close(stdin_w)
        env = rank_env("cuda", 1, home=box.home, work=box.work, confined=True)
        argv = [sys.executable, "-I", "-c", CHILD_A, str(theirs.fileno())]
        started = time.perf_counter()
        box.start([RankLaunch(0, argv, env, (theirs.fileno(),), log_w, stdin_r)])
        for f in (log_w, stdin_r):
            os.close(f)
        theirs.close()
        socket.send_fds(ours, [str(size).encode()], [fd])
        ours.settimeout(120)
        try:
            reply = json.loads(ours.recv(4096).decode() or "{}")
        except (OSError, ValueError) as exc:
            reply = {"error": repr(exc)}
        wall = time.perf_counter() - started
        os.set_blocking(log_r, False)
        try:
            tail = os.read(log_r, 20000).decode(errors="replace")[-3000:]
        except BlockingIOError:
            tail = ""
        box.stop()
        box.close()
    torch.cuda.synchronize()
    after = int(mine[0].item()), int(mine[-1].item())
    # The judge's own copy of the candidate's buffer, on its own stream and events.
    private = torch.empty_like(mine)
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        private.copy_(mine)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"size_mib": size / 2**20, "child": reply, "child_log_tail": tail if "seen" not in reply else "",
            "judge_sees_after": [hex(a) for a in after], "shared_ok": reply.get("seen") == ["0x11111111"] * 2
            and after == (0x22222222, 0x11111111), "box_start_to_reply_s": wall,
            "judge_copy_ms_median": statistics.median(times), "judge_copy_gbps": size / statistics.median(times) / 1e6}


# -- B: whole blocks timed by the judge -------------------------------------------------------
RANK_B = r'''
import os, sys, datetime, json
import torch, torch.distributed as dist
rank, world, store_path, mib = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
torch.cuda.set_device(rank)
dev = torch.device("cuda", rank)
dist.init_process_group("nccl", store=dist.FileStore(store_path, world), rank=rank, world_size=world, device_id=dev)
x = torch.randn(mib * 2**20 // 2, dtype=torch.bfloat16, device=dev)
for _ in range(20):
    dist.all_reduce(x)
torch.cuda.synchronize()
inp = os.fdopen(0, "rb", buffering=0)
print("ready", flush=True)
for line in iter(inp.readline, b""):
    k = int(line)
    if k == 0:
        break
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(k):
        dist.all_reduce(x)
    e.record()
    torch.cuda.synchronize()
    print(json.dumps({"events_ms": s.elapsed_time(e)}), flush=True)
dist.destroy_process_group()
'''


def probe_b(mib: int, ks: list[int], reps: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="pkb-probe-b-") as tmp:
        store = str(Path(tmp) / "store")
        procs = [subprocess.Popen([sys.executable, "-c", RANK_B, str(r), "2", store, str(mib)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ))
                 for r in range(2)]
        for p in procs:
            assert p.stdout.readline().strip() == b"ready"
        rows = []
        for k in ks:
            walls, events = [], []
            for rep in range(reps + 1):
                sent = time.perf_counter()
                for p in procs:
                    p.stdin.write(f"{k}\n".encode())
                    p.stdin.flush()
                answers = [json.loads(p.stdout.readline()) for p in procs]
                wall = (time.perf_counter() - sent) * 1e3
                if rep == 0:
                    continue  # the first block of each size settles
                walls.append(wall / k)
                events.append(max(a["events_ms"] for a in answers) / k)
            w, e = statistics.median(walls), statistics.median(events)
            rows.append({"calls_per_block": k, "judge_wall_ms_per_call": w, "rank_events_ms_per_call": e,
                         "judge_overhead_pct": 100 * (w - e) / e,
                         "judge_wall_spread_pct": 100 * (max(walls) - min(walls)) / w})
        for p in procs:
            p.stdin.write(b"0\n")
            p.stdin.flush()
        for p in procs:
            p.wait(timeout=60)
    return rows


# -- C: is the device quiet? ---------------------------------------------------------------------
CHILD_C = r'''
import os, sys, signal, torch
torch.cuda.set_device(1)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
b = torch.randn_like(a)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    for _ in range(int(sys.argv[1])):
        a = (a @ b) * 1e-3
print("queued", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
torch.cuda.synchronize()
'''


def judge_kernel_latency(samples: int = 30) -> dict:
    import torch

    torch.cuda.set_device(1)
    x = torch.zeros(1024, device="cuda")
    walls, evs = [], []
    for _ in range(samples):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        s.record()
        x.add_(1)
        e.record()
        e.synchronize()
        walls.append((time.perf_counter() - t) * 1e3)
        evs.append(s.elapsed_time(e))
    return {"wall_ms_median": statistics.median(walls), "wall_ms_max": max(walls),
            "event_ms_median": statistics.median(evs)}


def smi() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    pmon = subprocess.run(["nvidia-smi", "pmon", "-c", "1", "-s", "u", "-i", "1"],
                          capture_output=True, text=True, timeout=30).stdout.strip()
    return out.replace("\n", "; ") + " | pmon: " + " / ".join(pmon.splitlines()[2:])


def probe_c(matmuls: int) -> dict:
    result = {"idle": judge_kernel_latency(), "idle_smi": smi()}
    child = subprocess.Popen([sys.executable, "-c", CHILD_C, str(matmuls)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=dict(os.environ))
    assert child.stdout.readline().strip() == b"ready"
    child.stdin.write(b"go\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == b"queued"
    time.sleep(0.05)
    result["busy_while_child_stopped"] = judge_kernel_latency()
    result["busy_smi"] = smi()
    result["child_pid"] = child.pid
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    time.sleep(1.0)
    result["after_kill"] = judge_kernel_latency()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    results: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "host": subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()}
    for name, fn in (("A_shared_buffer", lambda: probe_a(args.mib * 2**20)),
                     ("B_block_timing", lambda: probe_b(args.mib, [1, 5, 20, 50, 200], 7)),
                     ("C_quiet_device", lambda: probe_c(400))):
        began = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - a probe that fails is a finding too
            import traceback
            results[name] = {"error": repr(exc), "traceback": traceback.format_exc()[-2000:]}
        results[name + "_s"] = round(time.perf_counter() - began, 1)
        print(f"== {name} ({results[name + '_s']} s)")
        print(json.dumps(results[name], indent=1))
    Path(args.out, "judge_probes.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

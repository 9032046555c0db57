"""Hostile candidates against the sandbox: each attack must have no effect outside its side.

Every test runs one candidate from ``attacks/`` (all-reduce, CPU, 2 ranks, sandbox on) and checks
twice: from outside, on the host, that the attack changed nothing (a Redis key, a file, a process,
a connection, a canary process, the report's text), and the verdict. Candidates that do their
attack and then compute the right answer return a wrong one (42 everywhere) when the attack got
through, so a ``pass`` also says that they saw no success from inside.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from evaluator.api import evaluate
from evaluator.config import EvalConfig, ResourceLimits

from .conftest import (ATTACKS, HOST_HOME, REPO, assert_untouched, clean_up, connections, datagrams, paths_with,
                       processes_left, processes_with, run_attack)

# Every attack here needs the sandbox: unconfined, several would damage the host running them.
# Each is a whole confined evaluation, several exhaust a limit on purpose: `make test-long` runs them.
pytestmark = [pytest.mark.confined, pytest.mark.long]

GiB, MiB = 2**30, 2**20


def passed(outcome) -> None:
    assert outcome.verdict == "pass", outcome


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the network --------------------------------------------------------------------------------

@pytest.mark.services
def test_a_candidate_cannot_set_a_redis_key(attack, marker, redis_db):
    outcome = attack("redis_set")
    assert not redis_db.exists(f"pkb-attack:{marker}")
    passed(outcome)


@pytest.mark.services
def test_a_candidate_cannot_reach_postgresql(attack, marker, postgres_db):
    outcome = attack("postgres_connect")
    table = postgres_db.execute("SELECT to_regclass(%s)", (f"public.pkb_attack_{marker}",)).fetchone()[0]
    assert table is None
    passed(outcome)


def test_a_candidate_cannot_send_udp_to_the_host_or_resolve_names(attack, udp_listener):
    outcome = attack("udp_and_dns", UDP_PORT=udp_listener.getsockname()[1])
    assert datagrams(udp_listener) == []
    passed(outcome)


def test_a_candidate_cannot_connect_to_a_unix_socket_in_the_hosts_tmp(attack, unix_listener):
    sock, path = unix_listener
    outcome = attack("unix_socket_path", UNIX_PATH=path)
    assert connections(sock) == []
    passed(outcome)


def test_a_candidate_cannot_connect_to_an_abstract_unix_socket(attack, abstract_listener):
    sock, name = abstract_listener
    outcome = attack("abstract_unix_socket", ABSTRACT_NAME=name)
    assert connections(sock) == []
    passed(outcome)


# -- secrets of the evaluating process ----------------------------------------------------------

@pytest.fixture
def secret_environment(monkeypatch, secret):
    """What a worker's environment holds, in the evaluator's own environment."""
    monkeypatch.setenv("PKB_SECRET_KEY", secret)
    monkeypatch.setenv("DATABASE_URL", f"postgres://pkb:{secret}@127.0.0.1:5432/pkb")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)


def test_a_candidate_finds_no_secret_in_any_environment(attack, secret, secret_environment, tcp_listener):
    outcome = attack("environment_secrets", PORT=tcp_listener.getsockname()[1])
    assert connections(tcp_listener) == []
    assert secret not in outcome.text
    passed(outcome)


def test_a_candidate_cannot_read_the_memory_of_its_parent_or_pid_1(attack, secret, secret_environment, canary):
    outcome = attack("proc_mem", TEST_PID=os.getpid())
    assert secret not in outcome.text
    assert_untouched(canary)
    passed(outcome)


# -- other processes ----------------------------------------------------------------------------

def test_a_candidate_cannot_ptrace_pid_1_or_anything_outside_its_side(attack, canary):
    outcome = attack("ptrace_attach", TEST_PID=os.getpid(), CANARY_PID=canary.pid)
    assert_untouched(canary)
    passed(outcome)


def test_a_candidate_holds_no_capability_and_reaches_no_new_namespace_io_uring_or_bpf(attack, tmp_path):
    """The sandbox's system-call filter (evaluator/sandbox/seccomp.py) on a real side: the attack
    answers right only if every call failed and its status says a filter is installed. The
    control, unconfined (harmless there: a user namespace of a test's own rank), must fail."""
    passed(attack("kernel_surface"))
    control = evaluate(EvalConfig(problem="all-reduce", solution_path=ATTACKS / "kernel_surface.py", world_size=2,
                                  device="cpu", size="small", trials=1, seed=1, timing=False, sandbox=False,
                                  workdir=tmp_path))
    assert control["sandbox"] == "off" and control["verdict"] == "fail", control.get("failure")


def test_a_candidate_cannot_signal_its_parent_pid_1_or_host_processes(attack, canary):
    outcome = attack("signal_parent_and_init", TEST_PID=os.getpid(), CANARY_PID=canary.pid)
    assert_untouched(canary)
    passed(outcome)  # the init took SIGSTOP and SIGKILL from a rank and still ran the side


def test_a_candidate_cannot_change_the_limits_of_the_sandboxs_init(attack, init_watch):
    outcome = attack("init_rlimits")
    assert init_watch.limits, "the watch saw no sandbox init"
    assert init_watch.changed() == {}
    passed(outcome)


def test_a_kill_sweep_reaches_only_the_candidates_own_side(attack, canary):
    outcome = attack("kill_sweep")
    assert_untouched(canary)
    # Its peer rank is in reach, so the side dies of it; the sandbox's init and the host are not.
    assert outcome.failure_class == "crash", outcome
    assert "was killed by SIGKILL" in outcome.message
    assert outcome.seconds < 60


def test_a_process_started_in_a_new_session_does_not_outlive_the_side(attack, marker):
    outcome = attack("popen_new_session")
    assert processes_left(marker) == []
    passed(outcome)


def test_a_double_fork_daemon_does_not_outlive_the_side(attack, marker):
    outcome = attack("double_fork_daemon")
    assert processes_left(marker) == []
    passed(outcome)


# -- the host's files ---------------------------------------------------------------------------

def test_a_candidate_cannot_write_into_the_checkout(attack, marker):
    watched = [REPO / "problems" / "__init__.py", REPO / "evaluator" / "__init__.py"]
    before = [sha256(p) for p in watched], (REPO / "problems").stat().st_mode
    outcome = attack("write_checkout")
    assert paths_with(marker, REPO, REPO / "problems", REPO / "evaluator", REPO / "evaluator" / "sandbox") == []
    assert ([sha256(p) for p in watched], (REPO / "problems").stat().st_mode) == before
    passed(outcome)


def test_a_candidate_cannot_write_into_the_hosts_home(attack, marker):
    outcome = attack("write_host_home", HOST_HOME=HOST_HOME)
    assert paths_with(marker, HOST_HOME, HOST_HOME / ".config") == []
    passed(outcome)


def test_a_candidate_cannot_leave_files_in_the_hosts_tmp_or_dev_shm(attack, marker):
    flags = [Path(f"/tmp/pkb-flag-{marker}"), Path(f"/dev/shm/pkb-flag-{marker}")]
    for flag in flags:
        flag.write_text("only the host has this file\n")
    outcome = attack("write_host_tmp_and_shm", TMP_FLAG=flags[0], SHM_FLAG=flags[1])
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        assert not Path(folder, f"{marker}.drop").exists()
    passed(outcome)


def test_a_candidate_cannot_plant_an_entry_in_the_hosts_kernel_cache(attack, marker):
    cache = HOST_HOME / ".cache" / "pkb" / "kernels"
    outcome = attack("kernel_cache", HOST_HOME=HOST_HOME)
    assert paths_with(marker, cache, cache / "ext") == []
    passed(outcome)


def startup_files(marker: str) -> list[Path]:
    """Host files that would run the marker's code in the next process, in the test's interpreter
    (the ranks' too) and in the system."""
    folders = set(site.getsitepackages()) | {site.getusersitepackages()}
    folders |= {p for k, p in sysconfig.get_paths().items() if k in ("purelib", "platlib", "stdlib")}
    candidates = [Path(f, name) for f in folders for name in ("sitecustomize.py", "usercustomize.py", f"{marker}.pth")]
    candidates += [Path("/etc/ld.so.preload"), Path(f"/etc/ld.so.conf.d/{marker}.conf"),
                   Path(f"/etc/profile.d/{marker}.sh")]
    return [p for p in candidates if p.is_file() and marker in p.read_text(errors="replace")]


def test_a_candidate_cannot_leave_startup_code_for_the_next_run(attack, marker):
    try:
        outcome = attack("persistence_startup_files")
        assert startup_files(marker) == []
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # the next Python process on the host
        assert not Path(f"/tmp/{marker}.ran").exists()
        passed(outcome)
    finally:
        for path in startup_files(marker):  # only if the sandbox failed
            path.unlink()


def test_a_daemon_cannot_overwrite_the_reference_outputs(attack, marker):
    outcome = attack("reference_overwrite_daemon")
    assert processes_left(marker) == []
    assert outcome.failure_class == "value_mismatch", outcome  # its 42s were compared with the real sums
    assert outcome.report["failure"]["trial"] == 0


def test_a_candidate_cannot_find_the_evaluators_work_directory_or_other_sides_files(attack, marker, secret):
    decoys = [Path(f"/dev/shm/pkb-eval-{marker}/reference/task0_trial0_rank0.pt"),
              Path(f"/tmp/pkb-eval-{marker}/reference/task0_trial0_rank0.pt")]
    for decoy in decoys:
        decoy.parent.mkdir(parents=True)
        decoy.write_text(secret)
    outcome = attack("find_eval_workdir")
    assert [d.read_text() for d in decoys] == [secret, secret]
    assert secret not in outcome.text
    passed(outcome)


def test_output_files_replaced_by_symlinks_are_not_followed(attack, secret, tmp_path):
    secret_file = tmp_path / "host-secret.txt"
    secret_file.write_text(secret)
    secret_file.chmod(0o644)
    outcome = attack("symlink_outputs", SECRET_FILE=secret_file)
    assert secret not in outcome.text
    assert "root:x:0:0" not in outcome.text
    assert secret_file.read_text() == secret
    # On CPU the judge reads its own copies of the outputs (docs/judge.md), never the side's files,
    # so the links change nothing; where files are read (GPUs), links are skipped and reported.
    assert outcome.verdict == "pass" or (outcome.failure_class == "protocol_violation"
                                         and "no readable outputs" in outcome.message), outcome


# -- resources ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fork_bomb(tmp_path_factory):
    """One fork bomb for the two tests below (it takes long enough once): what evaluate() returned
    or raised, how long it took, the bomb's processes alive when it returned and a while later."""
    marker = "pkbattack" + secrets.token_hex(8)
    canary = subprocess.Popen(["sleep", "600"])
    started = time.monotonic()
    outcome = error = None
    try:
        outcome = run_attack("fork_bomb", tmp_path_factory.mktemp("fork_bomb"), {"MARKER": marker})
    except Exception as exc:  # noqa: BLE001 - judged by the tests below
        error = exc
    seconds = time.monotonic() - started
    at_return = processes_with(marker)
    # The kernel kills what is left of the namespace once its init is dead; on a starved host that
    # takes a few seconds after evaluate() returns.
    left = processes_left(marker, grace_s=15.0)
    canary_alive = canary.poll() is None
    canary.kill()
    canary.wait()
    clean_up(marker)
    return {"outcome": outcome, "error": error, "seconds": seconds, "at_return": len(at_return),
            "left": left, "canary_alive": canary_alive}


def test_a_fork_bomb_leaves_no_process_behind(fork_bomb):
    assert fork_bomb["left"] == []
    assert fork_bomb["canary_alive"]


def test_a_fork_bomb_ends_the_side_as_a_resource_limit_quickly(fork_bomb):
    assert fork_bomb["error"] is None, f"evaluate() raised {fork_bomb['error']!r}"
    outcome = fork_bomb["outcome"]
    assert outcome.failure_class == "resource_limit", outcome
    assert "processes" in outcome.message
    assert fork_bomb["at_return"] == 0, f"{fork_bomb['at_return']} processes of the bomb still ran"
    assert fork_bomb["seconds"] < 30


def test_filling_the_disk_ends_the_side_as_a_resource_limit(attack, marker):
    free_before = {p: shutil.disk_usage(p).free for p in ("/tmp", "/dev/shm", str(HOST_HOME))}
    outcome = attack("disk_fill", resources=ResourceLimits(disk_bytes=256 * MiB))
    assert paths_with(marker, Path("/tmp"), Path("/dev/shm"), HOST_HOME) == []
    for path, free in free_before.items():
        assert shutil.disk_usage(path).free > free - 2 * GiB, path  # not the 20 GB (others write too)
    assert outcome.failure_class == "resource_limit", outcome
    assert "disk" in outcome.message
    assert outcome.seconds < 60


def test_allocating_100_gb_ends_the_side_as_a_resource_limit(attack):
    outcome = attack("memory_100gb")
    assert outcome.failure_class == "resource_limit", outcome
    # The limit per rank fits the host (api.fit_to_host): at most 64 GiB, less on a smaller host.
    assert re.search(r"[\d.]+ GiB of host memory", outcome.message), outcome
    assert outcome.seconds < 60


# -- privileges ---------------------------------------------------------------------------------

def test_a_candidate_cannot_remount_the_checkout_read_write(attack, marker):
    outcome = attack("remount_checkout")
    assert paths_with(marker, REPO / "problems", REPO / "evaluator") == []
    passed(outcome)


def dmesg() -> str | None:
    try:
        return subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def test_a_candidate_cannot_open_host_devices(attack, marker):
    outcome = attack("device_nodes")
    log = dmesg()
    if log is not None:
        assert marker not in log  # nothing was written to the host's kernel log
    assert not Path(f"/tmp/{marker}.tty").exists()  # no keystrokes were injected into a terminal
    passed(outcome)


def test_setuid_binaries_do_not_give_root(attack, marker):
    host_file = HOST_HOME / f"{marker}.root"
    system = [Path("/etc/passwd"), Path("/etc/shadow"), Path("/etc/group")]
    before = [sha256(p) for p in system if p.exists()]
    outcome = attack("setuid_binaries", HOST_FILE=host_file)
    assert not host_file.exists()
    assert [sha256(p) for p in system if p.exists()] == before
    passed(outcome)


def test_a_candidate_cannot_attach_the_hosts_sysv_shared_memory(attack, secret, sysv_segment):
    outcome = attack("sysv_shared_memory", SHM_KEY=sysv_segment.key)
    assert sysv_segment.read(len(secret)) == secret.encode()
    assert secret not in outcome.text
    passed(outcome)


# -- memory and disk that no process shows --------------------------------------------------------

@pytest.fixture
def host_workdir():
    """An evaluation's work directory kept after it returns, so that the test can measure it."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="pkb-attack-eval-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_sparse_output_files_cannot_multiply_the_disk_limit_on_the_host(attack, host_workdir):
    disk = 64 * MiB
    outcome = attack("sparse_outputs", FILES=16, resources=ResourceLimits(disk_bytes=disk), workdir=host_workdir)
    copied = sum(f.stat().st_blocks * 512 for f in (host_workdir / "candidate").iterdir())
    assert copied <= disk, f"{copied / GiB:.1f} GiB of candidate files on the host; {outcome}"


def held_nothing_or_was_stopped(outcome) -> None:
    """Memory attacks return a wrong answer if they held the memory unstopped; else the attack was
    refused (pass) or the side was stopped over its limit."""
    assert outcome.verdict == "pass" or outcome.failure_class == "resource_limit", outcome
    if outcome.failure_class == "resource_limit":
        assert "memory" in outcome.message or "disk" in outcome.message


@pytest.mark.parametrize("own_namespaces", [False, True], ids=["same_namespace", "own_namespaces"])
def test_memory_held_by_a_ranks_helpers_counts_against_the_rank(attack, marker, own_namespaces):
    outcome = attack("hidden_memory_nested_userns", HELPERS=3, HELPER_MIB=800,
                     OWN_NAMESPACES="yes" if own_namespaces else "no",
                     resources=ResourceLimits(memory_bytes_per_rank=2 * GiB))
    assert processes_left(marker) == []
    if own_namespaces:
        held_nothing_or_was_stopped(outcome)
    else:  # the control: nothing hides these helpers from the watch
        assert outcome.failure_class == "resource_limit", outcome
        assert "memory" in outcome.message


def test_memory_held_in_memfd_files_counts_against_the_rank(attack):
    outcome = attack("hidden_memory_memfd", TOTAL_MIB=2560,
                     resources=ResourceLimits(memory_bytes_per_rank=2 * GiB, disk_bytes=256 * MiB))
    held_nothing_or_was_stopped(outcome)


@pytest.mark.xfail(strict=True, reason=(
    "init.memory_files counts memfd files a process has open (/proc/<pid>/fd); a memfd sent over "
    "a unix socket (SCM_RIGHTS) that nobody reads, then closed, is open in no process and mapped "
    "nowhere: 2.5 GiB held for 2 s under a 2 GiB per-rank limit and a 256 MiB disk limit, unseen "
    "by the per-rank watch; where the host gives the side a memory cgroup, the side's cap (all ranks "
    "together, 4.25 GiB here) still bounds it (next test)"))
def test_memory_held_in_memfd_files_in_flight_counts_against_the_rank(attack):
    outcome = attack("hidden_memory_memfd_in_flight", TOTAL_MIB=2560,
                     resources=ResourceLimits(memory_bytes_per_rank=2 * GiB, disk_bytes=256 * MiB))
    held_nothing_or_was_stopped(outcome)


def test_memory_in_flight_beyond_the_sides_cap_ends_the_side_where_it_has_a_memory_cgroup(attack):
    from evaluator.sandbox.cgroup import side_cgroup

    probe = side_cgroup()
    if probe is None:
        pytest.skip("this host gives the evaluator no memory cgroup (docs/sandbox.md)")
    probe.remove()
    outcome = attack("hidden_memory_memfd_in_flight", TOTAL_MIB=5120,
                     resources=ResourceLimits(memory_bytes_per_rank=2 * GiB, disk_bytes=256 * MiB))
    assert outcome.failure_class == "resource_limit", outcome
    assert "cap of 4.25 GiB of host memory" in outcome.message


def test_a_private_tmpfs_cannot_hold_memory_beyond_the_sides_limits(attack, marker):
    outcome = attack("private_tmpfs", FILES=12, FILE_MIB=200,
                     resources=ResourceLimits(memory_bytes_per_rank=2 * GiB, disk_bytes=256 * MiB))
    assert processes_left(marker) == []
    held_nothing_or_was_stopped(outcome)

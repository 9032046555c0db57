"""The sandbox as the evaluator uses it: both modes give the same verdicts, reports say which
mode ran, a host that cannot confine is refused clearly, and outputs are copied out safely."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from evaluator import api
from evaluator.api import evaluate
from evaluator.cli import main
from evaluator.config import EvalConfig
from evaluator.sandbox.box import OutputRules, copy_regular_files
from evaluator.sandbox.policy import exposed_paths, rank_env

from .conftest import SOLUTIONS, TEST_LIMITS, shared

CORRECT = SOLUTIONS / "cpu_correct.py"


def config(**overrides) -> EvalConfig:
    values = dict(problem="all-reduce", solution_path=CORRECT, world_size=2, device="cpu", size="small",
                  trials=2, seed=3, limits=TEST_LIMITS)
    values.update(overrides)
    return EvalConfig(**values)


# The tests below read two evaluations of config(): confined, the one test_verdicts.py's progress
# test reads too (shared_eval); unconfined, one run on a host that says it cannot confine, which
# both the report test and the refusal test read (it used to run twice, once in each).
UNCONFINED = pytest.mark.xdist_group("confinement-unconfined")
REFUSAL = "unshare: Operation not permitted"


@pytest.fixture(scope="module")
def unconfined_where_it_cannot_confine() -> dict:
    """config(sandbox=False) evaluated while the host says it cannot confine (``REFUSAL``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "unavailable_reason", lambda: REFUSAL)
        return dict(evaluate(config(sandbox=False)))


@pytest.mark.confined
@pytest.mark.parametrize("sandbox", [pytest.param(True, marks=shared("correct-seed-3")),
                                     pytest.param(False, marks=UNCONFINED)])
def test_the_report_says_whether_the_candidate_ran_confined(sandbox, request):
    report = request.getfixturevalue("shared_eval")("correct", trials=2, seed=3)[0] if sandbox \
        else request.getfixturevalue("unconfined_where_it_cannot_confine")
    assert report["verdict"] == "pass", report["failure"]
    assert report["sandbox"] == ("on" if sandbox else "off")


@pytest.mark.confined
def test_a_correct_candidate_passes_confined_at_world_size_eight():
    report = evaluate(config(world_size=8, trials=1, timing=False))
    assert report["verdict"] == "pass", report["failure"]
    assert len(report["trials"][0]["ranks"]) == 8


@pytest.mark.confined
@UNCONFINED
def test_a_host_that_cannot_confine_is_refused_with_the_reason(monkeypatch, unconfined_where_it_cannot_confine):
    monkeypatch.setattr(api, "unavailable_reason", lambda: REFUSAL)
    with pytest.raises(ValueError, match=r"cannot confine candidate code \(unshare: Operation not permitted\).*--no-sandbox"):
        evaluate(config())
    # Asked to run unconfined on such a host, it does (the module's evaluation, under the same refusal).
    assert unconfined_where_it_cannot_confine["sandbox"] == "off"
    assert unconfined_where_it_cannot_confine["verdict"] == "pass", unconfined_where_it_cannot_confine["failure"]


def test_pkb_eval_warns_when_told_to_run_unconfined(capsys):
    assert main(["eval", "--problem", "all-reduce", "--solution", str(CORRECT), "--world-size", "2",
                 "--size", "small", "--trials", "1", "--no-timing", "--no-sandbox"]) == 0
    captured = capsys.readouterr()
    assert "warning: --no-sandbox" in captured.err
    assert "verdict: PASS" in captured.out


def test_ranks_get_no_variable_they_were_not_given():
    source = {"PATH": "/usr/bin", "PKB_BROKER_URL": "redis://secret", "DATABASE_URL": "postgres://x",
              "PKB_WORKER_TOKEN": "t", "NCCL_DEBUG": "WARN", "AWS_SECRET_ACCESS_KEY": "k", "LD_PRELOAD": "/x.so"}
    env = rank_env("cpu", 1, home=Path("/pkb/home"), work=Path("/pkb/work"), confined=True, source=source)
    assert env["PATH"] == "/usr/bin" and env["NCCL_DEBUG"] == "WARN"
    for name in ("PKB_BROKER_URL", "DATABASE_URL", "PKB_WORKER_TOKEN", "AWS_SECRET_ACCESS_KEY", "LD_PRELOAD"):
        assert name not in env
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["GLOO_SOCKET_IFNAME"] == "lo"


def test_only_the_harness_packages_of_the_checkout_are_exposed():
    repo = str(Path(__file__).resolve().parents[2])
    exposed = exposed_paths()
    assert repo not in exposed
    assert {f"{repo}/evaluator", f"{repo}/problems"} <= set(exposed)
    assert not any(p.startswith(f"{repo}/portal") or p.startswith(f"{repo}/var") for p in exposed)


def test_copying_outputs_skips_links_fifos_and_other_names(tmp_path):
    source, dest = tmp_path / "out", tmp_path / "dest"
    source.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    (source / "task0_trial0_rank0.pt").write_bytes(b"real")
    os.symlink(secret, source / "task0_trial1_rank0.pt")
    os.link(source / "task0_trial0_rank0.pt", source / "task0_timed0_rank1.pt")  # now two links each
    os.mkfifo(source / "task0_trial0_rank1.pt")
    (source / "notes.txt").write_text("not an output")
    (source / "task0_trial2_rank0.pt").write_bytes(b"ok")
    fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        copy_regular_files(fd, dest, OutputRules(frozenset({0}), world_size=2, max_files=10, max_bytes=2**20))
    finally:
        os.close(fd)
    assert sorted(p.name for p in dest.iterdir()) == ["task0_trial2_rank0.pt"]
    assert (dest / "task0_trial2_rank0.pt").read_bytes() == b"ok"


def test_copying_outputs_takes_no_sparse_file_no_unknown_task_and_no_more_than_its_budget(tmp_path):
    source, dest = tmp_path / "out", tmp_path / "dest"
    source.mkdir()
    with open(source / "task0_trial0_rank0.pt", "wb") as sparse:
        sparse.truncate(2**30)  # 1 GiB that takes no room where it is
    (source / "task7_trial0_rank0.pt").write_bytes(b"unknown task")
    (source / "task0_trial0_rank5.pt").write_bytes(b"no such rank")
    for index in range(1, 6):
        (source / f"task0_trial{index}_rank1.pt").write_bytes(b"x" * 1000)
    fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        copy_regular_files(fd, dest, OutputRules(frozenset({0}), world_size=2, max_files=3, max_bytes=2500))
    finally:
        os.close(fd)
    assert sorted(p.name for p in dest.iterdir()) == ["task0_trial1_rank1.pt", "task0_trial2_rank1.pt"]


@pytest.mark.confined
def test_an_exposed_path_below_tmp_stays_visible_inside_the_private_tmp(monkeypatch, tmp_path):
    """A checkout and its venv in /tmp (a fresh clone there) must not be hidden by the side's /tmp."""
    import sys

    from evaluator.config import ResourceLimits
    from evaluator.sandbox import RankLaunch, confined, open_box

    shared = Path(tempfile.mkdtemp(prefix="pkb-exposed-", dir="/tmp"))
    shared.chmod(0o755)  # mkdtemp makes it 0700: only root could read it, ranks are not root
    (shared / "hello.txt").write_text("visible")
    monkeypatch.setattr(confined, "exposed_paths", lambda **kwargs: exposed_paths(**kwargs) + [str(shared)])
    inbox = tmp_path / "in"
    inbox.mkdir()
    box = open_box(tmp_path, inbox, "cpu", ResourceLimits(), confined=True)
    read, write = os.pipe()
    stdin = os.open(os.devnull, os.O_RDONLY)
    code = f"print(open({str(shared / 'hello.txt')!r}).read()); open('/tmp/mine', 'w').write('private')"
    env = rank_env("cpu", 1, home=box.home, work=box.work, confined=True)
    try:
        box.start([RankLaunch(0, [sys.executable, "-I", "-c", code], env, (), write, stdin)])
        os.close(write)
        os.close(stdin)
        output = b""
        while chunk := os.read(read, 4096):
            output += chunk
    finally:
        box.close()
        os.close(read)
        shutil.rmtree(shared)
    assert output.decode().strip() == "visible"
    assert not Path("/tmp/mine").exists()


def processes_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            pass
    return found


@pytest.mark.confined
def test_nothing_of_a_side_survives_the_evaluator_being_killed(tmp_path):
    import secrets
    import signal
    import subprocess
    import sys
    import time

    marker = f"pkb-survivor-{secrets.token_hex(6)}"
    solution = tmp_path / "sleeps.py"
    solution.write_text((Path(__file__).parent / "hostile" / "sleeps_with_marker.py").read_text()
                        .replace("__MARKER__", marker))
    evaluator = subprocess.Popen([sys.executable, "-m", "evaluator.cli", "eval", "--problem", "all-reduce",
                                  "--solution", str(solution), "--world-size", "2", "--size", "small"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker), "the candidate never started"
    evaluator.send_signal(signal.SIGKILL)  # what a worker does to an evaluation past its limit
    evaluator.wait()
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = processes_with(marker)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


def test_a_scripts_folder_on_sys_path_is_not_exposed(monkeypatch, tmp_path):
    """`python /tmp/x.py` puts /tmp first on sys.path: the host's /tmp must stay out of the box."""
    import sys

    monkeypatch.setattr(sys, "path", ["/tmp", str(tmp_path), "/root", *sys.path])
    exposed = exposed_paths()
    assert "/tmp" not in exposed and str(tmp_path) not in exposed and "/root" not in exposed
    assert any(p.endswith("site-packages") or p == os.path.normpath(sys.prefix) for p in exposed)


def test_the_target_of_an_exposed_link_is_exposed_too(tmp_path):
    """A checkout whose .venv links to another checkout's: the link is recreated inside the side,
    and would lead nowhere without what it points to."""
    target = tmp_path / "real-lib"
    target.mkdir()
    (tmp_path / "linked-lib").symlink_to(target)
    exposed = exposed_paths({"LD_LIBRARY_PATH": str(tmp_path / "linked-lib")})
    assert {str(tmp_path / "linked-lib"), str(target)} <= set(exposed)


@pytest.mark.confined
def test_no_message_of_the_sandbox_is_lost_when_several_arrive_in_one_read(monkeypatch, tmp_path):
    """On a loaded host "init", "ready" and a rank's exit can come in one read: none may be dropped."""
    import sys
    import time

    from evaluator.config import ResourceLimits
    from evaluator.sandbox import RankLaunch, confined, open_box

    read = confined.ConfinedBox._read

    def slow_read(self, timeout):
        time.sleep(0.3)  # let everything the sandbox says pile up in the pipe
        return read(self, timeout)

    monkeypatch.setattr(confined.ConfinedBox, "_read", slow_read)
    inbox = tmp_path / "in"
    inbox.mkdir()
    box = open_box(tmp_path, inbox, "cpu", ResourceLimits(), confined=True)
    log_r, log_w = os.pipe()
    stdin = os.open(os.devnull, os.O_RDONLY)
    env = rank_env("cpu", 1, home=box.home, work=box.work, confined=True)
    try:
        box.start([RankLaunch(0, [sys.executable, "-I", "-c", "pass"], env, (), log_w, stdin)])
        seen: list[dict] = []
        deadline = time.monotonic() + 30
        while {"event": "exit", "rank": 0, "code": 0} not in seen and time.monotonic() < deadline:
            seen += box.events()
        assert {"event": "exit", "rank": 0, "code": 0} in seen
    finally:
        box.close()
        for fd in (log_r, log_w, stdin):
            os.close(fd)

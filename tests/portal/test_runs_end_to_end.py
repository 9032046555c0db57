"""Runs against a live server, a real Celery worker evaluating on CPU over gloo, and the `pkb`
command line as a user runs it: from creation to scores, a ParallelKernelBench import, the
agent loop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from portal.runs.models import RunSample
from portal.submissions.models import Submission

from .conftest import VALID_SOURCE, wait_for
from .runs_helpers import (CATALOG, PKB_DIR, TEST_PKB_INDEX, hand_scores, load_problems, pack,
                           pkb_files)

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.long, pytest.mark.django_db(transaction=True)]

WRONG_ALL_REDUCE = VALID_SOURCE.replace("return out", "return out * 2")
GATHER = ("import torch\nimport torch.distributed as dist\n\n\n"
          "def solution(x, *, group):\n"
          "    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]\n"
          "    dist.all_gather(parts, x, group=group)\n"
          "    return torch.cat(parts)\n")
WRONG_GATHER = GATHER.replace("return torch.cat(parts)", "return torch.cat([x] * len(parts))")
SCATTER = ("import torch\nimport torch.distributed as dist\n\n\n"
           "def solution(x, *, group):\n"
           "    parts = [c.contiguous() for c in x.chunk(dist.get_world_size(group))]\n"
           "    out = torch.empty_like(parts[0])\n"
           "    dist.reduce_scatter(out, parts, group=group)\n"
           "    return out\n")
WRONG_SCATTER = SCATTER.replace("    return out\n", "    return parts[dist.get_rank(group)].clone()\n")
PKB = shutil.which("pkb", path=str(Path(sys.executable).parent)) or "pkb"


@pytest.fixture
def quick(settings: Any) -> None:
    settings.PKB_EVAL_TRIALS = 2  # fewer correctness trials: the same path, sooner


@pytest.fixture
def catalog(all_reduce: Any) -> None:
    load_problems(CATALOG)


def _upload(name: str, data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def _wait_run(api: Any, run: int, timeout_s: float = 900) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body = api.get(f"/api/v1/runs/{run}/progress/").json()
        return body if body["done"] else None

    return wait_for(done, timeout_s=timeout_s, every_s=2)


def _observed(run: int) -> dict[str, list[tuple[bool, float | None, float | None]]]:
    """What the evaluator said of each sample, read back from the database."""
    found: dict[str, list[tuple[bool, float | None, float | None]]] = {}
    for s in RunSample.objects.filter(run_id=run, status="accepted").select_related("submission", "problem"):
        sub = s.submission
        assert sub.status == "finished", sub.status_reason
        found.setdefault(s.problem.slug, []).append((sub.is_correct, sub.speedup, sub.speedup_low))
    return found


def test_a_run_of_three_problems_by_three_samples_goes_from_creation_to_scores(
        celery_worker_process: Any, owner_api: Any, cpu_hardware: Any, catalog: None,
        quick: None) -> None:
    created = owner_api.post("/api/v1/runs/", {"model": "e2e-run-model", "hardware": cpu_hardware.slug,
                                               "k": 3, "backend": "torch"}, format="json")
    assert created.status_code == 201, created.json()
    run = created.json()["id"]
    for source in (VALID_SOURCE, VALID_SOURCE, WRONG_ALL_REDUCE):  # one request per sample
        r = owner_api.post(f"/api/v1/runs/{run}/samples/", {"problem": "all-reduce", "source": source},
                           format="json")
        assert r.status_code == 201 and r.json()["accepted"] == 1
    gathers = pack({"all-gather/0.py": GATHER.encode(), "all-gather/1.py": WRONG_GATHER.encode(),
                    "all-gather/2.py": WRONG_GATHER.encode()})
    scatters = pack({"reduce-scatter__a.py": SCATTER.encode(), "reduce-scatter__b.py": SCATTER.encode(),
                     "reduce-scatter__c.py": WRONG_SCATTER.encode()}, "tar")
    for name, blob in (("g.zip", gathers), ("s.tar.gz", scatters)):
        r = owner_api.post(f"/api/v1/runs/{run}/samples/", {"archive": _upload(name, blob)},
                           format="multipart")
        assert r.status_code == 201 and r.json()["accepted"] == 3, r.json()
    early = owner_api.get(f"/api/v1/runs/{run}/progress/").json()
    assert early["samples"] == 9 and {p["problem"] for p in early["problems"]} == \
        {"all-reduce", "all-gather", "reduce-scatter"}
    assert owner_api.get(f"/api/v1/runs/{run}/scores/").status_code == 409
    progress = _wait_run(owner_api, run)
    assert progress["finished"] == 9 and progress["correct"] == 2 + 1 + 2
    body = owner_api.get(f"/api/v1/runs/{run}/scores/").json()
    observed = _observed(run)
    assert [ok for ok, _, _ in observed["all-reduce"]].count(True) == 2
    expected = hand_scores(observed, 3, 3)
    for key in ("fast_p", "pass_at_k", "fast_1_at_k"):
        assert body["run_problems"][key] == pytest.approx(expected[key]), key
    # The unbiased estimator for c = 2, 1, 2 of n = 3: pass@1 = mean(c/n); pass@3 = 1 each.
    assert body["run_problems"]["pass_at_k"] == pytest.approx({"1": 5 / 9, "3": 1.0})
    assert body["run_problems"]["fast_p"]["0"] == pytest.approx(1.0)
    n_suite = body["suite"]["problems"]
    assert n_suite == 10 and body["suite"]["pass_at_k"]["1"] == pytest.approx(5 / 9 * 3 / 10)
    board = owner_api.get("/leaderboard/", {"hardware": cpu_hardware.slug, "export": "json",
                                            "table": "runs"}).json()
    assert [row["run"] for row in board["rows"]] == [run]


def _pkb(*args: str, env: dict[str, str], expect: int | None = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([PKB, *args], capture_output=True, text=True, env=env, timeout=900)
    if expect is not None:
        assert done.returncode == expect, (args, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture
def cli_env(live_server: Any, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "DJANGO_"))}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "config"), "PKB_SERVER": live_server.url}


def test_the_pkb_client_logs_in_submits_runs_and_imports(
        celery_worker_process: Any, owner: Any, owner_api: Any, cpu_hardware: Any, catalog: None,
        quick: None, cli_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    hw = cpu_hardware.slug
    _pkb("login", "--username", "owner", "--password", "owner-pass-123", env=cli_env)
    saved = Path(cli_env["XDG_CONFIG_HOME"]) / "pkb" / "config.json"
    assert oct(saved.stat().st_mode & 0o777) == "0o600" and json.loads(saved.read_text())["token"]
    good, wrong = tmp_path / "good.py", tmp_path / "wrong.py"
    good.write_text(VALID_SOURCE)
    wrong.write_text(WRONG_ALL_REDUCE)

    passed = json.loads(_pkb("submit", str(good), "--problem", "all-reduce", "--hardware", hw,
                             "--wait", "--json", env=cli_env).stdout)
    assert passed["verdict"] == "pass" and passed["report"]["verdict"] == "pass"
    failed = _pkb("submit", str(wrong), "--problem", "all-reduce", "--hardware", hw, "--wait",
                  env=cli_env, expect=1)
    assert "verdict: FAIL (value_mismatch)" in failed.stdout and "#" in failed.stderr
    refused = _pkb("submit", str(good), "--problem", "no-such", "--hardware", hw, "--json",
                   env=cli_env, expect=3)
    assert json.loads(refused.stdout)["error"]["code"] == "unknown_problem"
    _pkb("run", "create", "--model", "x", "--hardware", hw, "--k", "1",
         env={**cli_env, "PKB_TOKEN": "not-a-token"}, expect=4)
    _pkb("submit", str(tmp_path / "absent.py"), "--problem", "all-reduce", "--hardware", hw,
         env=cli_env, expect=2)

    run = json.loads(_pkb("run", "create", "--model", "cli-model", "--hardware", hw, "--k", "1",
                          "--backend", "torch", "--sampling", '{"temperature": 0.2}', "--json",
                          env=cli_env).stdout)["id"]
    samples = tmp_path / "samples"
    (samples / "all-reduce").mkdir(parents=True)
    (samples / "all-reduce" / "0.py").write_text(VALID_SOURCE)
    (samples / "bogus-problem").mkdir()
    (samples / "bogus-problem" / "0.py").write_text(VALID_SOURCE)
    added = json.loads(_pkb("run", "add", str(run), str(samples), "--json", env=cli_env,
                            expect=3).stdout)  # 3: some files were refused
    assert added["accepted"] == 1 and added["files"][1]["code"] == "unknown_problem"
    status = json.loads(_pkb("run", "status", str(run), "--wait", "--json", env=cli_env).stdout)
    assert status["done"] and status["finished"] == 1
    scores = json.loads(_pkb("run", "scores", str(run), "--json", env=cli_env).stdout)
    assert scores == owner_api.get(f"/api/v1/runs/{run}/scores/").json()
    assert scores["run_problems"]["pass_at_k"]["1"] == 1.0
    text = _pkb("run", "scores", str(run), env=cli_env).stdout
    assert "pass@1 100.0%" in text and "fast_0 100.0%" in text
    prompt = _pkb("prompt", "--problem", "all-reduce", "--hardware", hw, env=cli_env).stdout
    assert "all-reduce" in prompt and "def reference" in prompt

    directory = tmp_path / PKB_DIR.name
    directory.mkdir()
    for name in ("2_allgather_cuda.py", "9_layernorm_backward_cuda.py",
                 "72_hyena_conv1d_boundary_exchange_cuda.py", "README_notes.py"):
        shutil.copy(PKB_DIR / name, directory / name)
    preview = _pkb("run", "import", str(directory), "--hardware", hw, "--dry-run", env=cli_env).stdout
    assert "would add 2_allgather_cuda.py -> all-gather (pkb2->all-gather)" in preview
    assert "nothing stored" in preview and RunSample.objects.filter(run__imported_from=directory.name).count() == 0
    imported = json.loads(_pkb("run", "import", str(directory), "--hardware", hw, "--json",
                               env=cli_env).stdout)
    codes = {f["name"]: f["code"] or f["status"] for f in imported["files"]}
    assert codes == {"2_allgather_cuda.py": "accepted", "9_layernorm_backward_cuda.py": "syntax_error",
                     "72_hyena_conv1d_boundary_exchange_cuda.py": "unmapped",
                     "README_notes.py": "not_a_pkb_file"}
    _pkb("run", "status", str(imported["id"]), "--wait", env=cli_env)
    sub = Submission.objects.get(pk=imported["files"][0]["submission"])
    assert sub.verdict == "pass", sub.report and sub.report.get("failure")


def test_a_pkb_directory_imported_through_the_api_is_evaluated_through_its_adapters(
        celery_worker_process: Any, owner_api: Any, cpu_hardware: Any, catalog: None, quick: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("portal.runs.pkb.importer.pkb_index", lambda: TEST_PKB_INDEX)
    r = owner_api.post("/api/v1/runs/pkb-import/", {
        "archive": _upload("d.zip", pack(pkb_files())), "hardware": cpu_hardware.slug,
        "link": "https://github.com/togethercomputer/ParallelKernelBench"}, format="multipart")
    assert r.status_code == 201, r.json()
    run = r.json()["id"]
    assert r.json()["accepted"] == 9 and r.json()["rejected"] == 5
    _wait_run(owner_api, run)
    accepted = RunSample.objects.filter(run_id=run, status="accepted").select_related("submission")
    verdicts = {s.name: (s.submission.verdict, s.submission.failure_class) for s in accepted}
    failures = {s.name: (s.submission.report or {}).get("failure") for s in accepted}
    assert verdicts == {
        "1_allreduce_cuda.py": ("pass", ""), "2_allgather_cuda.py": ("pass", ""),
        "3_broadcast_cuda.py": ("pass", ""), "7_reducescatter_cuda.py": ("pass", ""),
        "16_gemm_reducescatter_cuda.py": ("pass", ""), "18_rms_norm_cuda.py": ("pass", ""),
        "74_vocab_parallel_cross_entropy_loss_cuda.py": ("pass", ""),
        "34_ulysses_all_to_all_tensor_primitive_cuda.py": ("pass", ""),
        "8_alltoall_cuda.py": ("fail", "value_mismatch"),  # wrong on purpose
    }, failures
    page = owner_api.get(f"/runs/{run}/").content.decode()
    for name in ("8_alltoall_cuda.py", "72_hyena_conv1d_boundary_exchange_cuda.py",
                 "uses NVLink multicast", "no_adapter", "unmapped", "syntax_error", "not_a_pkb_file",
                 "unknown_pkb_problem", "value_mismatch"):
        assert name in page, name


@pytest.mark.parametrize("turns", [3])
def test_the_agent_loop_feeds_the_failure_back_and_records_its_turns(
        celery_worker_process: Any, owner_api: Any, owner: Any, cpu_hardware: Any, catalog: None,
        quick: None, cli_env: dict[str, str], tmp_path: Path, turns: int) -> None:
    from rest_framework.authtoken.models import Token

    # A scripted model: wrong first; once told its failure, right.
    script = tmp_path / "model.py"
    script.write_text(
        "import sys\n"
        "prompt = sys.stdin.read()\n"
        f"good = {VALID_SOURCE!r}\n"
        f"bad = {WRONG_ALL_REDUCE!r}\n"
        "told = 'Result of your previous attempt' in prompt and 'value_mismatch' in prompt\n"
        "print('Here is my kernel:\\n```python\\n' + (good if told else bad) + '```')\n")
    env = {**cli_env, "PKB_TOKEN": Token.objects.get_or_create(user=owner)[0].key}
    done = _pkb("agent", "--model-command", f"{sys.executable} {script}", "--problem", "all-reduce",
                "--hardware", cpu_hardware.slug, "--turns", str(turns), "--model", "scripted-bot",
                "--json", env=env)
    result = json.loads(done.stdout)
    assert result["passed"] and [t["verdict"] for t in result["turns"]] == ["fail", "pass"]
    samples = list(RunSample.objects.filter(run_id=result["run"]).order_by("turn"))
    assert [s.turn for s in samples] == [1, 2] and samples[0].context == ""
    assert "value_mismatch" in samples[1].context and "Verdict: fail" in samples[1].context
    assert samples[0].run.k == turns and samples[0].run.model.name == "scripted-bot"
    failing = _pkb("agent", "--model-command", "false", "--problem", "all-reduce", "--hardware",
                   cpu_hardware.slug, "--turns", "1", env=env, expect=8)
    assert "exited 1" in failing.stderr

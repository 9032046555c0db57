"""The ranks' bytecode cache (evaluator/bytecode_cache.py): used only where the installation ships
no compiled modules, warmed once by the evaluator into a directory of its own alone, read and never
written by confined ranks."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import bytecode_cache
from evaluator.bytecode_cache import CACHE_ENV, RANK_PRELUDE, adopt, installed_without_bytecode, prepared

HOSTILE = Path(__file__).parent / "hostile"


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    source = tmp_path / "site" / f"{name}.py"
    source.parent.mkdir(exist_ok=True)
    source.write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(source.parent))
    importlib.invalidate_caches()
    return source


def test_a_module_without_compiled_bytecode_beside_it_is_seen(tmp_path, monkeypatch):
    source = _module(tmp_path, monkeypatch, "pkb_cache_probe_a")
    assert installed_without_bytecode("pkb_cache_probe_a")
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)))
    assert not installed_without_bytecode("pkb_cache_probe_a")
    assert not installed_without_bytecode("no_such_module_anywhere")


def test_prepared_compiles_into_its_own_directory_once(tmp_path, monkeypatch):
    source = _module(tmp_path, monkeypatch, "pkb_cache_probe_b")
    runs = tmp_path / "runs"
    program = ("import sys; sys.pycache_prefix = sys.argv[1]; sys.dont_write_bytecode = False; "
               f"sys.path.insert(0, {str(source.parent)!r}); import pkb_cache_probe_b; "
               f"open({str(runs)!r}, 'a').write('x')")
    cache = tmp_path / "cache"
    assert prepared(cache, "probe", program) == str(cache)
    assert prepared(cache, "probe", program) == str(cache)
    assert runs.read_text() == "x"  # warmed once: the marker says so
    compiled = list(cache.rglob("pkb_cache_probe_b*.pyc"))
    assert len(compiled) == 1 and str(compiled[0]).startswith(str(cache) + "/")
    assert not (source.parent / "__pycache__").exists()  # nothing written beside the source
    assert oct(cache.stat().st_mode & 0o777) == "0o755"


def test_a_directory_others_may_write_to_is_not_used(tmp_path):
    cache = tmp_path / "shared-cache"
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)
    assert prepared(cache, "probe", "pass") is None


def test_a_warm_up_that_fails_leaves_no_cache_and_no_marker(tmp_path):
    cache = tmp_path / "cache"
    assert prepared(cache, "probe", "raise SystemExit(3)") is None
    assert not list(cache.glob("warm-*"))


def test_the_rank_prelude_reads_the_cache_from_its_environment_and_never_writes(tmp_path):
    program = RANK_PRELUDE + "print(sys.pycache_prefix, sys.dont_write_bytecode)"
    given = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, check=True,
                           env={**os.environ, CACHE_ENV: str(tmp_path)})
    absent = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, check=True,
                            env={k: v for k, v in os.environ.items() if k != CACHE_ENV})
    assert given.stdout.split() == [str(tmp_path), "True"]
    assert absent.stdout.split() == ["None", "True"]


def test_the_evaluator_adopts_the_cache_only_where_torch_ships_no_bytecode(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "pycache"))
    monkeypatch.setattr(bytecode_cache, "installed_without_bytecode", lambda module="torch": False)
    assert adopt() is None and sys.pycache_prefix is None
    monkeypatch.setattr(bytecode_cache, "installed_without_bytecode", lambda module="torch": True)
    assert adopt() == str(tmp_path / "pycache")
    assert sys.pycache_prefix == str(tmp_path / "pycache") and not sys.dont_write_bytecode
    monkeypatch.setattr(sys, "pycache_prefix", None)
    previous = os.umask(0o002)  # the folders Python would make there: writable by the group
    try:
        assert adopt() is None and sys.pycache_prefix is None
    finally:
        os.umask(previous)
    os.chmod(tmp_path / "pycache", 0o775)  # another may write there: not ours alone
    assert adopt() is None and sys.pycache_prefix is None


@pytest.mark.long
@pytest.mark.confined
def test_a_confined_rank_reads_the_cache_and_cannot_write_to_it(tmp_path, monkeypatch):
    """As on the GPU hosts, whose torch ships no bytecode: the evaluator warms a cache and its
    confined ranks import from it; a candidate that writes there (to plant code for the reference
    and later evaluations) is refused, and answers wrong when it is not."""
    from evaluator.api import evaluate
    from evaluator.config import EvalConfig

    from .conftest import TEST_LIMITS

    monkeypatch.setattr(bytecode_cache, "installed_without_bytecode", lambda module="torch": True)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "pycache"))
    bytecode_cache.ranks_cache.cache_clear()
    try:
        report = evaluate(EvalConfig(problem="all-reduce", solution_path=HOSTILE / "plants_bytecode.py",
                                     world_size=2, device="cpu", size="small", timing=False, limits=TEST_LIMITS))
    finally:
        bytecode_cache.ranks_cache.cache_clear()
    assert report["verdict"] == "pass", report.get("failure")
    assert list((tmp_path / "pycache").rglob("*.pyc"))  # the warm-up compiled into it
    assert not list((tmp_path / "pycache").rglob("*planted*"))

"""The build stage: a PKB file's extension compiled ahead of its GPU turn, without running the
file, and found by the evaluation's own call instead of built again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from portal.runs.pkb.adapters import ADAPTERS
from portal.runs.pkb.wrapper import wrap
from worker.prebuild import Build, arch_list, prebuild, static_builds

ROOT = Path(__file__).resolve().parents[2]
CUDA_SRC = r'''
#include <torch/extension.h>
__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
void launch(torch::Tensor x) { add_one<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.numel()); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &launch); }
'''
PKB_FILE = f'''
import torch
from utils.cuda_helpers import compile_cuda_extension

CUDA_SRC = {CUDA_SRC!r}
FLAGS = ["--use_fast_math"]
_ext = None


def _get_ext():
    global _ext
    if _ext is None:
        _ext = compile_cuda_extension("add_one_ext", CUDA_SRC, extra_cuda_cflags=FLAGS)
    return _ext


def _dynamic(name):
    return compile_cuda_extension(name, CUDA_SRC)  # the name is known only at run time


def solution(tensor):
    _get_ext().launch(tensor)
    return tensor
'''


def test_the_static_builds_of_a_wrapped_pkb_file_are_found_without_running_it() -> None:
    adapter = next(a for a in ADAPTERS if a.pkb_id == 2)
    wrapped = wrap(PKB_FILE, file="2_allgather_cuda.py", pkb_id=2, pkb_name="allgather", adapter=adapter)
    assert static_builds(wrapped) == [Build("add_one_ext", CUDA_SRC, {"extra_cuda_cflags": ["--use_fast_math"]})]
    assert static_builds("compile_cuda_extension(open('/etc/passwd').read(), 'x')") == []
    assert static_builds("not python (") == []
    assert arch_list("sm_90") == "9.0+PTX" and arch_list("sm_100") == "10.0+PTX"


LOAD = """
import json, sys
from evaluator.cuda import compile_stats
from evaluator.cuda.pkb import compile_cuda_extension
module = compile_cuda_extension("add_one_ext", sys.argv[1], extra_cuda_cflags=["--use_fast_math"])
print(json.dumps({**compile_stats(), "launch": hasattr(module, "launch")}))
"""


MODULE_C = r"""
#include <Python.h>
static PyObject* launch(PyObject* self, PyObject* args) { Py_RETURN_NONE; }
static PyMethodDef methods[] = {{"launch", launch, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "NAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_NAME(void) { return PyModule_Create(&module); }
"""


def _load_with_seed(seed: Path, tmp_path: Path) -> dict[str, object]:
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path), "PKB_CUDA_ARCH": "sm_90",
           "PKB_KERNEL_SEED": str(seed), "PKB_KERNEL_CACHE": str(tmp_path / "own-cache")}
    done = subprocess.run([sys.executable, "-c", LOAD, CUDA_SRC], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_evaluation_imports_an_entry_of_its_exact_key_from_the_seed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # The entry the build stage leaves (here a stand-in module, since this torch may have no CUDA):
    # <seed>/ext/<name>-<key[:16]>/<name>_<key[:12]>.so, then pkb-built.
    from evaluator.cuda.extension import extension_key

    monkeypatch.setenv("PKB_CUDA_ARCH", "sm_90")
    options = {"cuda": ["-O3", "--use_fast_math"], "c": ["-O3"], "ld": [], "no_implicit_headers": False}
    key = extension_key("add_one_ext", CUDA_SRC, "", [], options)
    entry = tmp_path / "seed" / "ext" / f"add_one_ext-{key[:16]}"
    entry.mkdir(parents=True)
    name = f"add_one_ext_{key[:12]}"
    (tmp_path / "m.c").write_text(MODULE_C.replace("NAME", name))
    subprocess.run(["gcc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(tmp_path / "m.c"),
                    "-o", str(entry / f"{name}.so")], check=True)
    (entry / "pkb-built").touch()
    stats = _load_with_seed(tmp_path / "seed", tmp_path)
    assert stats["builds"] == 0 and stats["hits"] == 1 and stats["launch"]
    assert not (tmp_path / "own-cache" / "ext").exists()  # nothing built for the evaluation


@pytest.mark.slow
@pytest.mark.skipif(torch.version.cuda is None, reason="building needs a CUDA build of torch (the GPU hosts')")
def test_the_build_stage_builds_what_the_evaluation_then_imports(tmp_path: Path) -> None:
    source = tmp_path / "2_allgather_cuda.py"
    source.write_text(PKB_FILE)
    seed = tmp_path / "seed"
    assert prebuild([source], seed, "sm_90", jobs=1, timeout_s=900) == 0
    stats = _load_with_seed(seed, tmp_path)
    assert stats["builds"] == 0 and stats["hits"] == 1 and stats["launch"]
    assert not (tmp_path / "own-cache" / "ext").exists()


def test_a_file_nested_past_pythons_parser_has_no_builds_and_raises_nothing() -> None:
    # The parser's MemoryError and RecursionError on deep nesting are no SyntaxError: uncaught,
    # the worker's build stage raised on such a file (red team, nests_past_the_parser).
    assert static_builds("NESTED = " + "-" * 8000 + "1\n") == []
    assert static_builds("NESTED = x" + ".a" * 50_000 + "\n") == []

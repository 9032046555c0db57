"""ParallelKernelBench's names: the run directory, the solution files, and their problem ids.

A run directory is ``solutions_<backend>_<precision>_<hardware|none>_<provider>_<model_slug>``
(kernelgen's pattern); a file is ``<n>_<name>_<backend>.py``. Two quirks of its generated files
(the model outputs of commit dab0830): from 33 on a solution's number is its reference's + 1,
and four files use another name than their reference. So a file is matched by its name, not by
its number alone: the reference of that number, else the one before, else a known alias.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

DIR_PREFIX = "solutions_"
FILE_NAME = re.compile(r"^(?P<n>\d+)_(?P<name>.+?)_(?P<backend>cuda|triton|parallelkittens)\.py$")
BACKENDS = ("cuda", "triton", "parallelkittens")


@dataclass(frozen=True)
class RunName:
    backend: str
    precision: str
    hardware: str  # PKB's label, e.g. "h100_8" or "none": where the model was told it runs
    provider: str
    model: str

    @property
    def entry(self) -> str:
        """The model name a directory's files are ranked under: the model's own for CUDA, the
        model and the language for another (``gemini-3-pro-preview-triton``). Each directory is
        one configuration with one sample per problem; under one name, a model written up in
        two languages would have two attempts at each problem where the others have one, and the
        boards credit a model's best attempt (Correct, fast_p)."""
        return self.model if self.backend == "cuda" else f"{self.model}-{self.backend}"


@dataclass(frozen=True)
class FileName:
    number: int  # as written in the file name
    name: str
    backend: str
    pkb_id: int | None  # the reference it answers; None: no reference has that name


@functools.cache
def references() -> dict[int, str]:
    doc = json.loads((Path(__file__).with_name("references.json")).read_text())
    return {int(k): v for k, v in doc["references"].items()}


@functools.cache
def _aliases() -> dict[str, int]:
    doc = json.loads((Path(__file__).with_name("references.json")).read_text())
    return {k: int(v) for k, v in doc["solution_aliases"].items()}


def parse_run_dir(name: str) -> RunName:
    """``solutions_cuda_bf16_h100_8_anthropic_claude-opus-4-7`` -> its parts; ValueError if not."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    if not base.startswith(DIR_PREFIX):
        raise ValueError(f"{base!r} is not a ParallelKernelBench run directory "
                         "(solutions_<backend>_<precision>_<hardware>_<provider>_<model>)")
    parts = base[len(DIR_PREFIX):].split("_")
    if len(parts) < 5:
        raise ValueError(f"{base!r}: expected solutions_<backend>_<precision>_<hardware>_"
                         "<provider>_<model>")
    backend, precision, rest = parts[0], parts[1], parts[2:]
    # Hardware is "none" or a label such as "h100_8": a GPU name, then a count when given.
    hw_len = 2 if len(rest) >= 4 and rest[1].isdigit() else 1
    hardware, provider, model = "_".join(rest[:hw_len]), rest[hw_len], "_".join(rest[hw_len + 1:])
    if backend not in BACKENDS or not model:
        raise ValueError(f"{base!r}: backend must be one of {', '.join(BACKENDS)} and a model "
                         "slug must follow the provider")
    return RunName(backend, precision, hardware, provider, model)


def parse_file(name: str) -> FileName | None:
    """``2_allgather_cuda.py`` -> number 2, pkb id 2; None when the name is not PKB's pattern."""
    m = FILE_NAME.match(name.rsplit("/", 1)[-1])
    if m is None:
        return None
    number, stem = int(m["n"]), m["name"]
    refs = references()
    if refs.get(number) == stem:
        pkb_id: int | None = number
    elif refs.get(number - 1) == stem:
        pkb_id = number - 1
    else:
        pkb_id = _aliases().get(stem)
    return FileName(number, stem, m["backend"], pkb_id)

"""Every kind of bad upload, through the API (multipart and JSON) and the upload page: a 4xx
whose message says what was wrong and what to do, nothing stored, nothing queued.

The message is read from whichever error shape the API answers with (``{"error": {"message"}}``
for the portal's own refusals, DRF's ``{"field": ["..."]}`` or ``{"detail": ...}`` otherwise),
so these tests hold across a change of the error format."""

from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
import zipfile
from html import unescape
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.submissions.models import AIModel, Submission

from .conftest import VALID_SOURCE

URL = "/api/v1/submissions/"
pytestmark = pytest.mark.django_db


def error_message(response: Any) -> str:
    """The human message of a refusal, from a JSON API answer or an HTML form."""
    if "json" in response.get("Content-Type", ""):
        body = response.json()
        if isinstance(body.get("error"), dict):
            return str(body["error"].get("message", ""))
        if "detail" in body:
            return str(body["detail"])
        return " ".join(f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}"
                        for k, v in body.items())
    html = response.content.decode()
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, re.S)
    return unescape(re.sub(r"<[^>]+>", " ", " ".join(found))).strip()


def zipped() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("solution.py", VALID_SOURCE)
    return out.getvalue()


def tarred(compress: bool) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz" if compress else "w") as t:
        data = VALID_SOURCE.encode()
        info = tarfile.TarInfo("solution.py")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return out.getvalue()


NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "source": [VALID_SOURCE]}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1).encode()
TOO_BIG = b"x = 1\n" * 60_000
MARKUP = "<script>alert(1)</script>"

# name, file name, bytes, extra fields, status, words the message must contain (any case)
CASES = [
    ("elf binary", "solution.py", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64, {}, 400, ["ELF", "Python source"]),
    ("nul bytes", "solution.py", VALID_SOURCE.encode() + b"\x00\x00", {}, 400, ["NUL"]),
    ("latin-1", "solution.py", "def solution(x):\n    return 'caf\u00e9'\n".encode("latin-1"), {}, 400, ["UTF-8"]),
    ("utf-16", "solution.py", VALID_SOURCE.encode("utf-16"), {}, 400, ["NUL"]),
    ("over the size limit", "solution.py", TOO_BIG, {}, 413, ["limit"]),
    ("empty", "solution.py", b"", {}, 400, ["empty"]),
    ("whitespace only", "solution.py", b"  \n\t\n", {}, 400, ["empty"]),
    ("zip archive", "solution.zip", zipped(), {}, 400, ["zip archive", ".py"]),
    ("zip named .py", "solution.py", zipped(), {}, 400, ["zip archive"]),
    ("tar.gz archive", "solution.tar.gz", tarred(True), {}, 400, ["gzip archive"]),
    ("tar archive", "solution.tar", tarred(False), {}, 400, ["tar archive"]),
    ("gzip of a .py", "solution.py.gz", gzip.compress(VALID_SOURCE.encode()), {}, 400, ["gzip"]),
    ("notebook", "kernel.ipynb", NOTEBOOK, {}, 400, ["notebook", "nbconvert"]),
    ("notebook named .py", "kernel.py", NOTEBOOK, {}, 400, ["notebook"]),
    ("pdf", "paper.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", {}, 400, ["PDF"]),
    ("png", "plot.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, {}, 400, ["PNG"]),
    ("path in the file name", "../../etc/passwd", VALID_SOURCE.encode(), {}, 400, ["solution.py"]),
    ("windows path, shell script", "..\\..\\run.sh", VALID_SOURCE.encode(), {}, 400, ["solution.py"]),
    ("hidden file", ".bashrc", VALID_SOURCE.encode(), {}, 400, ["solution.py"]),
    ("syntax error", "solution.py", b"def solution(x:\n    return x\n", {}, 400, ["syntax error", "line 1"]),
    ("no solution", "solution.py", b"def helper(x):\n    return x\n", {}, 400, ["solution"]),
    ("markup in the model name", "solution.py", VALID_SOURCE.encode(), {"model": MARKUP}, 400, ["Model name"]),
    ("markup in the provider", "solution.py", VALID_SOURCE.encode(), {"provider": "<b>acme</b>"}, 400, ["Provider", "markup"]),
    ("model name too long", "solution.py", VALID_SOURCE.encode(), {"model": "m" * 101}, 400, ["100"]),
    ("unknown problem", "solution.py", VALID_SOURCE.encode(), {"problem": "no-such-problem"}, 400, ["/api/v1/problems/"]),
    ("retired problem", "solution.py", VALID_SOURCE.encode(), {"problem": "retired-one"}, 400, ["retired"]),
    ("unknown hardware", "solution.py", VALID_SOURCE.encode(), {"hardware": "tpu-v9"}, 400, ["/api/v1/hardware/"]),
    ("retired hardware", "solution.py", VALID_SOURCE.encode(), {"hardware": "retired-hw"}, 400, ["hardware"]),
    ("a world size the problem forbids", "solution.py", VALID_SOURCE.encode(),
     {"problem": "tp-summa-2d-linear"}, 400, ["world sizes", "choose hardware"]),
    ("unknown backend", "solution.py", VALID_SOURCE.encode(), {"backend": "fortran"}, 400, ["backend"]),
]


@pytest.fixture
def targets(all_reduce: Any, cpu_hardware: Any) -> dict[str, str]:
    """all-reduce and a 2-rank CPU profile, plus a retired problem, a retired profile and a
    problem that needs more ranks than the CPU profile has."""
    import problems
    from portal.catalog.models import Hardware, Problem
    from portal.catalog.services import LoadResult, upsert_problem

    wide = problems.get("tp-summa-2d-linear")
    upsert_problem(wide, problems.source_text(wide), problems.version(wide), LoadResult())
    Problem.objects.create(slug="retired-one", number=999, title="Retired", retired=True)
    Hardware.objects.create(slug="retired-hw", name="Old", kind="cpu", gpus=0, world_size=2,
                            retired=True, profile={})
    return {"problem": "all-reduce", "hardware": cpu_hardware.slug, "backend": "torch",
            "model": "gpt-test", "provider": "acme"}


def assert_refused(response: Any, status: int, words: list[str], sent: list[int]) -> None:
    assert response.status_code == status, response.content[:500]
    message = error_message(response)
    for word in words:
        assert word.lower() in message.lower(), f"{word!r} not in {message!r}"
    assert not Submission.objects.exists(), "something was stored"
    assert not AIModel.objects.exists(), "a model was created"
    assert sent == [], "something was queued"


@pytest.mark.parametrize("name, file_name, data, extra, status, words", CASES, ids=[c[0] for c in CASES])
def test_the_api_refuses_a_bad_upload(owner_api: Any, targets: dict[str, str], no_dispatch: list[int],
                                      name: str, file_name: str, data: bytes, extra: dict[str, str],
                                      status: int, words: list[str]) -> None:
    fields = {**targets, **extra, "source": SimpleUploadedFile(file_name, data)}
    assert_refused(owner_api.post(URL, fields, format="multipart"), status, words, no_dispatch)


JSON_CASES = [
    ("source is a number", {"source": 42}, 400, ["source"]),
    ("source is a list", {"source": ["def solution(x): return x"]}, 400, ["source"]),
    ("no source at all", {}, 400, ["source"]),
    ("blank model name", {"source": VALID_SOURCE, "model": "  "}, 400, ["model"]),
    ("source over the limit", {"source": TOO_BIG.decode()}, 413, ["limit"]),
    ("NUL in the text", {"source": VALID_SOURCE + "\x00"}, 400, ["NUL"]),
    ("a notebook as text", {"source": NOTEBOOK.decode()}, 400, ["notebook"]),
    ("problem is an object", {"source": VALID_SOURCE, "problem": {"slug": "all-reduce"}}, 400, ["problem"]),
]


@pytest.mark.parametrize("name, extra, status, words", JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_the_api_refuses_bad_json(owner_api: Any, targets: dict[str, str], no_dispatch: list[int],
                                  name: str, extra: dict[str, Any], status: int, words: list[str]) -> None:
    payload = {k: v for k, v in {**targets, **extra}.items() if v is not None}
    assert_refused(owner_api.post(URL, payload, format="json"), status, words, no_dispatch)


PAGE_CASES = [c for c in CASES if c[0] in {
    "elf binary", "latin-1", "over the size limit", "zip archive", "notebook", "path in the file name",
    "syntax error", "markup in the model name", "markup in the provider", "a world size the problem forbids"}]


@pytest.mark.parametrize("name, file_name, data, extra, status, words", PAGE_CASES, ids=[c[0] for c in PAGE_CASES])
def test_the_upload_page_refuses_a_bad_upload(client: Any, owner: Any, targets: dict[str, str],
                                              no_dispatch: list[int], name: str, file_name: str,
                                              data: bytes, extra: dict[str, str], status: int,
                                              words: list[str]) -> None:
    client.force_login(owner)
    fields = {**targets, **extra, "source": SimpleUploadedFile(file_name, data)}
    response = client.post("/submissions/upload/", fields)
    assert_refused(response, status, words, no_dispatch)
    assert b'name="source"' in response.content  # the form again, to correct and resend


@pytest.mark.parametrize("fields, words", [
    ({"problem": "no-such-problem"}, ["valid choice"]),
    ({"source": None}, ["required"]),
    ({"source": b""}, ["empty"]),
], ids=["unknown problem", "no file", "empty file"])
def test_the_upload_page_refuses_what_its_form_refuses(client: Any, owner: Any, targets: dict[str, str],
                                                       no_dispatch: list[int], fields: dict[str, Any],
                                                       words: list[str]) -> None:
    client.force_login(owner)
    data: dict[str, Any] = {**targets, "source": SimpleUploadedFile("solution.py", VALID_SOURCE.encode())}
    for key, value in fields.items():
        if value is None:
            data.pop(key)
        elif isinstance(value, bytes):
            data[key] = SimpleUploadedFile("solution.py", value)
        else:
            data[key] = value
    assert_refused(client.post("/submissions/upload/", data), 400, words, no_dispatch)


def test_a_good_upload_still_passes_every_check(owner_api: Any, targets: dict[str, str],
                                                no_dispatch: list[int],
                                                django_capture_on_commit_callbacks: Any) -> None:
    """The control: the same fields with a real kernel are accepted and queued once."""
    fields = {**targets, "source": SimpleUploadedFile("my_kernel.py", VALID_SOURCE.encode())}
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_api.post(URL, fields, format="multipart")
    assert response.status_code == 201, response.content
    assert Submission.objects.count() == 1 and len(no_dispatch) == 1

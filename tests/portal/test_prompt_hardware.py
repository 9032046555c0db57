"""The prompt carries the measured profile of a real GPU host (hardware/h200-x2-nvlink.json),
the roofline of the problem term by term, the host's backends and a worked example."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from portal.catalog.models import Hardware

pytestmark = pytest.mark.django_db
PROFILE = Path(__file__).parents[2] / "hardware" / "h200-x2-nvlink.json"


@pytest.fixture
def h200(db: None) -> Hardware:
    profile = json.loads(PROFILE.read_text())
    return Hardware.objects.create(slug="h200-x2-nvlink", name="2x NVIDIA H200", kind="gpu", gpus=2,
                                   world_size=2, profile=profile)


def test_the_prompt_carries_the_measured_h200_profile(anonymous_api: Any, all_reduce: Any,
                                                      h200: Hardware) -> None:
    body = anonymous_api.get("/api/v1/prompt/", {"problem": "all-reduce", "hardware": h200.slug,
                                                 "backend": "triton"}).json()
    text = body["prompt"]
    assert "NV18" in text  # the link matrix
    profile = body["profile"]
    peer = profile.index(next(line for line in profile if line.startswith("Peer copy bandwidth")))
    assert profile[peer + 1].split() == ["--", "386"] and profile[peer + 2].split() == ["385", "--"]
    assert "Every pair at once: 375.2 GB/s" in text
    nccl = next(line for line in text.splitlines() if line.strip().startswith("all_reduce"))
    assert len(nccl.split()) >= 4  # bus bandwidth at several message sizes
    assert "## Roofline of this problem at this size" in text
    assert any(t.startswith("- link:") and "375.2 GB/s" in t for t in body["roofline_terms"])
    assert body["roofline_terms"][-1].startswith("- roofline:") and "link-bound" in body["roofline_terms"][-1]
    assert any("Triton" in b for b in body["backends"]) and any("OFF" in b for b in body["backends"])
    assert body["example"]["path"] == "solutions/triton/all_reduce_triton.py"
    assert "@triton.jit" in text and "No GPU result is on record" in text
    cuda = anonymous_api.get("/api/v1/prompt/", {"problem": "all-reduce", "hardware": h200.slug,
                                                 "backend": "cuda"}).json()
    assert cuda["example"]["path"] == "solutions/symm_mem/all_gather_push.py"
    torch_prompt = anonymous_api.get("/api/v1/prompt/", {"problem": "all-reduce",
                                                         "hardware": h200.slug}).json()
    assert torch_prompt["example"] is None and "## Worked example" not in torch_prompt["prompt"]

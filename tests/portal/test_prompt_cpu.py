"""A CPU host's prompt agrees with itself: its backend line says there is no symmetric memory, so
the "Backend" section does not offer it (nor Triton or CUDA kernels it cannot run)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def _prompt(api: Any, hardware: str, backend: str = "torch") -> dict[str, Any]:
    r = api.get("/api/v1/prompt/", {"problem": "all-reduce", "hardware": hardware, "backend": backend})
    assert r.status_code == 200, r.content
    return r.json()


def test_the_cpu_prompt_does_not_offer_symmetric_memory(anonymous_api: Any, all_reduce: Any,
                                                         cpu_hardware: Any) -> None:
    body = _prompt(anonymous_api, cpu_hardware.slug)
    assert any("no symmetric memory" in line for line in body["backends"])
    backend = body["prompt"].split("## Backend\n", 1)[1].split("\n\n", 1)[0]
    assert "is allowed" not in backend and "symmetric memory is not available here" in backend


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_a_gpu_backend_on_a_cpu_host_is_told_to_choose_gpu_hardware(
        anonymous_api: Any, all_reduce: Any, cpu_hardware: Any, backend: str) -> None:
    section = _prompt(anonymous_api, cpu_hardware.slug, backend)["prompt"].split("## Backend\n", 1)[1]
    assert section.startswith(f"This host has no GPU: {backend} kernels cannot run on it.")


def test_the_gpu_prompt_still_offers_symmetric_memory(anonymous_api: Any, all_reduce: Any,
                                                      gpu_hardware: Any) -> None:
    backend = _prompt(anonymous_api, gpu_hardware.slug)["prompt"].split("## Backend\n", 1)[1]
    assert backend.startswith("Use PyTorch and torch.distributed only (symmetric memory via")

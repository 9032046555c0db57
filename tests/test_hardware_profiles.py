"""Hardware profiles: the committed JSON files, lookup, defaults and the smi parsers."""

from __future__ import annotations

import json

import pytest

from evaluator.hardware import collectives, profiles, smi

TOPO = ("\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n\nLegend:\n  X = Self\n")
NVLINK = ("GPU 0: NVIDIA H200 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
          "GPU 1: NVIDIA H200 (UUID: GPU-b)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n")


def test_every_committed_profile_has_the_roofline_block():
    found = profiles.list_profiles()
    assert {p["kind"] for p in found} >= {"cpu", "gpu"}
    for profile in found:
        assert profile["schema_version"] == "1.0"
        roof = profile["roofline"]
        assert roof["link_gbps"] > 0 and roof["hbm_gbps"] > 0
        assert roof["tflops"]["bfloat16"] > 0 and roof["tflops"]["float32"] > 0


def test_get_profile_finds_the_h200_pair_and_rejects_unknown_ids():
    assert profiles.get_profile("h200-x2-nvlink")["gpus"]["count"] == 2
    with pytest.raises(KeyError):
        profiles.get_profile("no-such-machine")


def _write(tmp_path, pid, kind, count, measured_at="2026-11-21T00:00:00+00:00"):
    data = {"schema_version": "1.0", "id": pid, "kind": kind, "measured_at": measured_at,
            "roofline": {"link_gbps": 1.0, "hbm_gbps": 1.0,
                         "tflops": {"bfloat16": 1.0, "float32": 1.0}}}
    if kind == "gpu":
        data["gpus"] = {"count": count}
    else:
        data["world_size"] = count
    (tmp_path / f"{pid}.json").write_text(json.dumps(data))


def test_default_profile_prefers_the_same_gpu_count_then_the_next_larger(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_HARDWARE_DIR", str(tmp_path))
    for count in (2, 4, 8):
        _write(tmp_path, f"h200-x{count}-nvlink", "gpu", count)
    _write(tmp_path, "cpu-gloo-test", "cpu", 2)
    assert profiles.default_profile("cuda", 4)["id"] == "h200-x4-nvlink"
    (tmp_path / "h200-x4-nvlink.json").unlink()
    assert profiles.default_profile("cuda", 4)["id"] == "h200-x8-nvlink"
    assert profiles.default_profile("cuda", 16)["id"] == "h200-x8-nvlink"
    assert profiles.default_profile("cpu", 4)["id"] == "cpu-gloo-test"


def test_default_profile_takes_the_gpu_model_the_run_has_before_the_newest(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_HARDWARE_DIR", str(tmp_path))
    _write(tmp_path, "h200-x2-nvlink", "gpu", 2, measured_at="2026-11-20T00:00:00+00:00")
    _write(tmp_path, "h200-x4-nvlink", "gpu", 4, measured_at="2026-11-20T00:00:00+00:00")
    _write(tmp_path, "h100-x2-nvlink", "gpu", 2, measured_at="2026-11-26T00:00:00+00:00")
    for pid, model in (("h200-x2-nvlink", "NVIDIA H200"), ("h200-x4-nvlink", "NVIDIA H200"),
                       ("h100-x2-nvlink", "NVIDIA H100 80GB HBM3")):
        data = json.loads((tmp_path / f"{pid}.json").read_text())
        data["gpus"]["model"] = model
        (tmp_path / f"{pid}.json").write_text(json.dumps(data))
    assert profiles.default_profile("cuda", 2)["id"] == "h100-x2-nvlink"  # no model known: the newest
    assert profiles.default_profile("cuda", 2, gpu_model="NVIDIA H200")["id"] == "h200-x2-nvlink"
    assert profiles.default_profile("cuda", 4, gpu_model="NVIDIA H200")["id"] == "h200-x4-nvlink"
    # The model's own rates over another model's at the same count (4 x H100: the H100 pair).
    assert profiles.default_profile("cuda", 4, gpu_model="NVIDIA H100 80GB HBM3")["id"] == "h100-x2-nvlink"
    # A model with no profile of its own: the same count first, then the newest, as before.
    assert profiles.default_profile("cuda", 2, gpu_model="NVIDIA B200")["id"] == "h100-x2-nvlink"


def test_the_committed_profiles_give_an_h200_pair_its_own(monkeypatch):
    monkeypatch.delenv("PKB_HARDWARE_DIR", raising=False)
    assert profiles.default_profile("cuda", 2, gpu_model="NVIDIA H200")["id"] == "h200-x2-nvlink"
    assert profiles.default_profile("cuda", 2, gpu_model="NVIDIA H100 80GB HBM3")["id"] == "h100-x2-nvlink"


def test_default_profile_is_none_without_a_profile_of_that_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_HARDWARE_DIR", str(tmp_path))
    assert profiles.default_profile("cuda", 2) is None


def test_the_topology_matrix_is_parsed_into_rows_and_columns():
    topo = smi.parse_topology(TOPO)
    assert topo["cols"] == ["GPU0", "GPU1"]
    assert topo["rows"]["GPU0"] == {"GPU0": "X", "GPU1": "NV18"}
    assert topo["extra"]["GPU1"]["CPU Affinity"] == "0-31"


def test_nvlink_status_counts_active_links_and_sums_their_speed():
    links = smi.parse_nvlink_status(NVLINK)
    assert links["0"]["links"] == 2 and links["0"]["nominal_gbps_per_direction"] == 53.1
    assert links["1"]["links"] == 1 and links["1"]["inactive_links"] == 1


def test_bus_factors_follow_nccl_tests():
    assert collectives.bus_factor("all_reduce", 4) == 1.5
    assert collectives.bus_factor("all_gather", 4) == 0.75
    assert collectives.bus_factor("all_to_all", 2) == 0.5

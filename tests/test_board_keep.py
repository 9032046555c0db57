"""scripts/device/board_keep.py: a batch's results folded into the committed state, once."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device" / "board_keep.py"


def line(key: str, submission: int, hardware: str = "h100-x2-nvlink", sha: str = "s") -> dict:
    return {"key": key, "source_sha256": sha, "hardware": hardware, "verdict": "pass",
            "submission": {"id": submission, "report": {"n": submission}}}


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def keep(tmp_path: Path, state: list[dict], batch: list[dict]) -> subprocess.CompletedProcess:
    write(tmp_path / "state.jsonl", state)
    write(tmp_path / "batch.jsonl", batch)
    return subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "batch.jsonl"), "--state",
                           str(tmp_path / "state.jsonl"), "--repeats", str(tmp_path / "repeats.jsonl")],
                          capture_output=True, text=True, timeout=60)


def keys(path: Path) -> list[str]:
    return [json.loads(x)["key"] for x in path.read_text().splitlines() if x.strip()]


def test_new_files_are_appended_once_and_repeats_set_aside(tmp_path):
    state = [line("a", 1), line("b", 2)]
    # The batch starts with the state it was given, then its own lines: a repeat of b (evaluated
    # again from a stale state), c, d, and c again (redone after a batch ended mid-file).
    batch = state + [line("b", 7), line("c", 8), line("d", 9), line("c", 10)]
    done = keep(tmp_path, state, batch)
    assert done.returncode == 0, done.stderr
    assert keys(tmp_path / "state.jsonl") == ["a", "b", "c", "d"]
    rows = [json.loads(x) for x in (tmp_path / "state.jsonl").read_text().splitlines()]
    assert rows[1]["submission"]["id"] == 2 and rows[2]["submission"]["id"] == 10
    assert keys(tmp_path / "repeats.jsonl") == ["b"]
    assert "2 + 2 new = 4 files; 1 repeat" in done.stdout
    again = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "batch.jsonl"), "--state",
                            str(tmp_path / "state.jsonl")], capture_output=True, text=True, timeout=60)
    assert keys(tmp_path / "state.jsonl") == ["a", "b", "c", "d"] and "+ 0 new" in again.stdout


def test_another_hardware_is_refused_and_nothing_written(tmp_path):
    state = [line("a", 1)]
    done = keep(tmp_path, state, state + [line("b", 2, hardware="h200-x2-nvlink")])
    assert done.returncode == 1 and "more than one hardware" in done.stderr
    assert keys(tmp_path / "state.jsonl") == ["a"] and not (tmp_path / "repeats.jsonl").exists()

"""benchmarks/fidelity/gpu_records.sh, the records a short GPU window builds up: its arguments checked in one line,
and (slow) a run on the CPU cut by its minutes that leaves only the stored records, which the next call continues."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "fidelity" / "gpu_records.sh"
FMNIST = Path("/usr/share/datasets/fashion-mnist")


def _records(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src"), "DEVICE": "cpu",
           "DATA_DIR": str(FMNIST)}
    return subprocess.run(["bash", str(SCRIPT), "--no-install", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("args", [
    ["--minutes", "8", "s4-table1-fmnist:protocol"],  # no --out
    ["--out", "OUT", "--minutes", "soon", "s4-table1-fmnist:protocol"],
    ["--out", "OUT", "--minutes", "8"],  # no entry
    ["--out", "OUT", "--minutes", "8", "s4-table1-fmnist:huge"],
    ["--out", "OUT", "--minutes", "8", "--workers", "0", "s4-table1-fmnist:protocol"],
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    done = _records(*[str(tmp_path / a) if a == "OUT" else a for a in args])
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "OUT").exists()


@pytest.mark.slow
@pytest.mark.skipif(not FMNIST.is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_a_cut_window_keeps_its_records_and_the_next_continues(tmp_path: Path) -> None:
    entry = "s4-ablation-participation:small"
    first = _records("--out", str(tmp_path / "one"), "--minutes", "2", entry)
    assert first.returncode == 0, first.stdout + first.stderr
    files = [p for p in (tmp_path / "one").rglob("*") if p.is_file()]
    assert sorted(p.name for p in files) == ["records.log", "s4-ablation-participation.json", "store.tar.gz"], files
    stored = json.loads((tmp_path / "one" / "gpu-small" / "s4-ablation-participation.json").read_text())
    assert not stored["finished"] and stored["records"], "2 minutes store some runs, not all 60"
    (tmp_path / "stored" / "gpu-small").mkdir(parents=True)
    stored["records"][0]["metrics"]["local"] = -1.0  # a mark the next call keeps only if it continues the stored runs
    (tmp_path / "stored" / "gpu-small" / "s4-ablation-participation.json").write_text(json.dumps(stored))
    second = _records("--out", str(tmp_path / "two"), "--minutes", "2", "--stored", str(tmp_path / "stored"),
                      entry)
    assert second.returncode == 0, second.stdout + second.stderr
    more = json.loads((tmp_path / "two" / "gpu-small" / "s4-ablation-participation.json").read_text())
    assert more["records"][:len(stored["records"])] == stored["records"]  # the marked run was not run again

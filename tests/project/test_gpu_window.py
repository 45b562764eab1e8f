"""benchmarks/speed/gpu_window.sh, the one command a short GPU window runs, checked on the CPU with ``--quick``: every
step writes its figures into summary.md, and the folder it leaves holds at most 7 plain files (what the GPU
machine returns). The default suite runs the two cheapest steps; the whole ``--quick`` run is slow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "speed" / "gpu_window.sh"


def _window(tmp_path: Path, *args: str) -> tuple[str, list[Path]]:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OUT", None)
    done = subprocess.run(["bash", str(SCRIPT), "--quick", "--out", str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = sorted(out.iterdir())
    assert len(files) <= 7 and all(f.is_file() for f in files), files
    assert {"summary.md", "steps.log"} <= {f.name for f in files}
    return (out / "summary.md").read_text(), files


def test_the_cheapest_steps_write_their_figures(tmp_path: Path) -> None:
    summary, _ = _window(tmp_path, "--steps", "tests,regression")
    assert "device test files: 1 passed, 0 failed or errors" in summary, summary
    assert "files that failed on a GPU before: 1 passed, 0 failed or errors" in summary, summary
    assert "the rest, shard " in summary and "(1 files): 2 passed, 0 failed or errors" in summary, summary
    assert "## Regression" in summary and "logistic" in summary and "(dense" in summary, summary
    assert "total " in summary


@pytest.mark.slow
def test_every_step_of_the_quick_window_writes_its_figures(tmp_path: Path) -> None:
    summary, files = _window(tmp_path)
    assert "Fashion-MNIST read from" in summary or "Fashion-MNIST not found" in summary
    if "Fashion-MNIST read from" in summary:
        for mode in ("light-det", "paper-fast"):
            assert f"| {mode} | Table 1 estimate |" in summary, summary
            model = mode.split("-")[0]
            assert all(f"| {mode} | {model} | {method} |" in summary for method in ("ifca", "fedrc")), summary
    for section in ("## Tests on this machine", "## ResNet-18", "## Regression"):
        assert section in summary, summary
    for precision in ("fp32", "bf16"):  # each ResNet figure on its own line, as its process ends
        assert all(f"  {precision}, {path} (" in summary for path in ("framework", "fast")), summary
    assert "runs.tar.gz" in {f.name for f in files}

"""The early memory refusal on an accelerator plans the training in the device's available memory (not the host's
RAM) and refuses, in one line that names the need, the device's memory and the key that lowers the largest part
(exit 2), a run of which not even one unit fits beside the held state. The device is simulated:
``engine.memory.device_memory`` gives the figures CUDA would."""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.engine import memory
from fedcluster.engine.memory import DeviceMemory

FAST = ["num_clients=6", "rounds=2", "progress=false"]
MIB, GIB = 2**20, 2**30


def _run(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(argv)
    return rc, err.getvalue().splitlines()


# the needs are a few times the simulated free memory: should the check break, the run stays affordable on the CPU
@pytest.mark.parametrize(("extra", "free", "needles"), [
    (["algorithm=cfl", "model.hidden=[20000]"], 60 * MIB, ["units take most", "clients_per_round=",
                                                          "algorithm.num_clusters="]),
    (["model=cnn", "batch_size=64"], 1 * MIB, ["one training unit takes most", "batch_size= (now 64)"]),
    (["algorithm=fedrc", "model=light-cnn"], 1 * MIB, ["3 cluster(s) x 6 clients"]),
])
def test_training_larger_than_the_devices_free_memory_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], free: int, needles: list[str]) -> None:
    monkeypatch.setattr(memory, "device_memory", lambda device: DeviceMemory("NVIDIA H100 80GB HBM3", free, 80 * GIB))
    monkeypatch.delenv("FEDCLUSTER_MEMORY_LIMIT", raising=False)  # the host has room: only the device is short
    rc, lines = _run(["run", *FAST, *extra, f"out={tmp_path / 'r'}"])
    errors = [ln for ln in lines if ln.startswith("fedcluster: error: ")]
    assert rc == 2 and len(errors) == 1 and not any("Traceback" in ln for ln in lines), lines
    line = errors[0]
    assert "training needs at least" in line and "GPU memory" in line, line
    assert f"NVIDIA H100 80GB HBM3 has {free / MIB:.1f} MiB free of 80.0 GiB" in line, line
    assert all(n in line for n in needles), line
    assert not (tmp_path / "r").exists()


def test_training_that_fits_the_device_runs_even_when_the_host_would_be_short(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "device_memory", lambda device: DeviceMemory("NVIDIA H100 80GB HBM3", 70 * GIB,
                                                                             80 * GIB))
    monkeypatch.setenv("FEDCLUSTER_MEMORY_LIMIT", "1M")  # the host figure is not the one that counts
    rc, lines = _run(["run", *FAST, "rounds=1", f"out={tmp_path / 'r'}"])
    assert rc == 0, lines

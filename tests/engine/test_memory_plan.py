"""One memory plan, on a simulated accelerator memory (no GPU needed): "available" is the driver's free memory plus
what this process's caching allocator holds unused, the held state is counted first and the vectorised chunk is
sized from the rest, and a run is refused only when a single training unit cannot fit.

The simulation answers CUDA's memory queries (``torch.cuda.mem_get_info``, ``memory_reserved``,
``memory_allocated``, ``get_device_name``) with fixed figures, and makes the engine read them for the run's device.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine import budget, memory
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.models.base import build_model
from fedcluster.reproduce.specs_fedrc import PAPER_CNN

MIB, GIB = 2**20, 2**30
H100 = "NVIDIA H100 80GB HBM3"


def simulate_device(monkeypatch: pytest.MonkeyPatch, total: float, free: float, cached: float,
                    allocated: float = 1 * GIB) -> None:
    """CUDA's memory figures for a device with ``total`` bytes, ``free`` of them free for the driver and ``cached``
    held unused by this process's allocator (reserved = allocated + cached); the run's device reads them."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(free), int(total)))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: int(allocated + cached))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: int(allocated))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: H100)
    real = memory.device_memory
    monkeypatch.setattr(memory, "device_memory", lambda device: real(torch.device("cuda")))


def _table1() -> tuple:
    """The FedRC paper's Table 1 scale (300 clients x 160 training samples, K = 3, batch 128, its CNN on
    Fashion-MNIST) as the budget check sees it: the run's configuration and the federation's sizes."""
    cfg, typed = resolve(load_raw(None, ["algorithm=fedrc", "algorithm.num_clusters=3", "dataset=fashion-mnist",
                                         "scenario=diverse-shift", *PAPER_CNN, "batch_size=128", "num_clients=300",
                                         "lr=0.1", "momentum=0.9", "progress=false"]))
    split = SimpleNamespace(num_samples=12_000)
    fed = SimpleNamespace(train=SimpleNamespace(sizes=np.full(300, 160), device=torch.device("cuda")),
                          val=split, test=split, num_clients=300, input_shape=(1, 28, 28), output_dim=10,
                          num_classes=10)
    return cfg, typed, fed


def test_the_h100_case_fedrc_900_units_of_the_paper_cnn_runs_with_a_smaller_chunk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """2026-11-28, one H100 (79.2 GiB): after an IFCA run the driver reported 25.3 GiB free while PyTorch's
    allocator held ~35 GiB unused; FedRC (900 units of the paper CNN, batch 128) was refused. It fits: 60.3 GiB
    are available, the held state is small, and the vectorised calls are sized from what is left."""
    simulate_device(monkeypatch, total=79.2 * GIB, free=25.3 * GIB, cached=35 * GIB)
    cfg, typed, fed = _table1()
    budget.fit_run(cfg, typed, fed)  # no refusal
    est = memory.estimate_training(cfg, typed, fed, 3, 300, streamed=True)
    available = int(60.3 * GIB)
    plan = est.plan(available)
    assert plan.fits and 1 <= plan.chunk < 900, plan
    assert plan.peak <= available and -(-900 // plan.chunk) * plan.chunk - 900 < -(-900 // plan.chunk)  # balanced
    assert est.units == 0 and est.held < 1 * GIB  # FedRC streams: no per-unit result is held for the round
    # the trainer's chunk at training time: from the same plan, within the memory left
    module = build_model(cfg.model, (1, 28, 28), 10, typed["model"])
    tr = LocalTrainer(module, torch.rand(2, 1, 28, 28), torch.randint(0, 10, (2,)), np.array([0, 1, 2]),
                 "classification", seed=0)
    chunk = tr.chunk_size(128, 900, streamed=True)
    assert 1 <= chunk < 900 and chunk * est.unit <= available * memory.FREE_SHARE
    # a method that keeps every unit's model holds them first (~15 GB here): fewer units fit a call
    kept = memory.estimate_training(cfg, typed, fed, 3, 300, streamed=False)
    assert kept.units > 14 * GIB and kept.plan(available).fit < plan.fit


def test_the_driver_figure_alone_would_leave_less_room() -> None:
    """The cached memory counts as available, once, for both the refusal and the chunk."""
    mem = memory.DeviceMemory(H100, free=int(25.3 * GIB), total=int(79.2 * GIB), cached=35 * GIB)
    assert mem.available == int(25.3 * GIB) + 35 * GIB
    assert "60.3 GiB free of 79.2 GiB" in mem.describe() and "35.0 GiB held unused" in mem.describe()


@pytest.mark.parametrize(("available", "held", "unit", "units", "chunk"), [
    (10 * GIB, 4 * GIB, 100 * MIB, 900, 36),  # 0.6 x 6 GiB / 100 MiB = 36.8 -> 36 a call, 25 calls of 36
    (10 * GIB, 4 * GIB, 100 * MIB, 100, 34),  # 36 fit: 3 balanced calls of 34 + 33 + 33
    (10 * GIB, 8 * GIB, 100 * MIB, 900, 12),  # more held state, smaller calls
    (10 * GIB, 0, 5 * MIB, 900, 900),  # everything at once
    (10 * GIB, 10 * GIB - 100 * MIB, 100 * MIB, 900, 1),  # room for exactly one unit
])
def test_chunk_sizes_for_a_free_memory_figure(available: int, held: int, unit: int, units: int, chunk: int) -> None:
    plan = memory.MemoryPlan(available, held, unit, units)
    assert plan.fits and plan.chunk == chunk and plan.peak <= available
    assert not memory.MemoryPlan(available, available - unit + 1, unit, units).fits  # one byte short of one unit


def test_a_unit_that_cannot_fit_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even one unit of the CNN at batch 64 does not fit beside the held state: one line, exit 2, naming the need,
    the free figure (with its two sources) and the key that lowers it."""
    simulate_device(monkeypatch, total=80 * GIB, free=2 * MIB, cached=1 * MIB)
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(["run", "num_clients=6", "rounds=1", "progress=false", "model=cnn", "batch_size=64",
                   f"out={tmp_path / 'r'}"])
    lines = err.getvalue().splitlines()
    errors = [ln for ln in lines if ln.startswith("fedcluster: error: ")]
    assert rc == 2 and len(errors) == 1 and not any("Traceback" in ln for ln in lines), lines
    line = errors[0]
    assert "training needs at least" in line and "one training unit of" in line, line
    assert f"{H100} has 3.0 MiB free of 80.0 GiB (2.0 MiB free on the device, 1.0 MiB held unused" in line, line
    assert "batch_size=" in line and not (tmp_path / "r").exists()


def test_a_run_the_driver_figure_alone_would_refuse_runs_in_the_cached_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver reports too little for one unit, the allocator's unused cache makes room: the run trains."""
    simulate_device(monkeypatch, total=80 * GIB, free=1 * MIB, cached=4 * GIB)
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(["run", "num_clients=6", "rounds=1", "progress=false", "model=cnn", "batch_size=64",
                   f"out={tmp_path / 'r'}"])
    assert rc == 0, err.getvalue()

"""The vectorised trainer's chunk planner for a given free-memory figure (no accelerator needed): big models
get many units per call, calls are balanced, and memory PyTorch's allocator holds unused counts as free."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine import memory
from fedcluster.engine.evaluation.inference import inference_rows
from fedcluster.engine.memory import FREE_SHARE, balanced_chunk, footprint, free_bytes, inference_row_bytes
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.models import build_model

GIB = 2**30


@pytest.mark.parametrize(("name", "least"), [("resnet18", 25), ("mobilenet-v2", 12)])
def test_a_big_model_on_70_gib_trains_many_units_per_call(name: str, least: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """ResNet-18 / MobileNet-V2, 100 clients × batch 32, an H100 with 70 GiB free: a few balanced calls of
    many units each (a chunk of one unit would make the fast path a slow sequential loop)."""
    monkeypatch.setattr(memory, "device_memory", lambda device: memory.DeviceMemory("H100", 70 * GIB, 80 * GIB))
    x, y = torch.rand(4, 3, 32, 32), torch.randint(0, 10, (4,))
    tr = LocalTrainer(build_model(name, (3, 32, 32), 10), x, y, np.array([0, 2, 4]), "classification", seed=0)
    chunk = tr.chunk_size(32, 100)
    calls = -(-100 // chunk)
    assert chunk >= least, chunk
    assert calls * chunk - 100 < calls  # balanced: every call within one unit of the others
    fp = footprint(tr.module, (3, 32, 32))
    held = 100 * memory.HELD_COPIES * fp.params  # each unit's result and start, held for the call
    assert chunk * memory.unit_bytes(fp, 32, 3 * 32 * 32 * 4, False) <= (70 * GIB - held) * FREE_SHARE  # within


def test_balanced_chunks() -> None:
    assert balanced_chunk(100, 45) == 34  # 34 + 33 + 33, not 45 + 45 + 10
    assert balanced_chunk(100, 100) == balanced_chunk(100, 256) == 100
    assert balanced_chunk(10, 1) == 1 and balanced_chunk(7, 2) == 2 and balanced_chunk(0, 5) == 1


def test_free_memory_counts_the_allocators_unused_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * GIB, 80 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 50 * GIB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 20 * GIB)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "H100")
    assert free_bytes(torch.device("cuda")) == int(40 * GIB * FREE_SHARE)  # 10 free + 30 cached, unused
    assert memory.device_memory(torch.device("cuda")).available == 40 * GIB  # the one figure every decision reads
    assert free_bytes(torch.device("cpu")) is None and memory.device_memory(torch.device("cpu")) is None


def test_chunk_mb_sizes_the_calls_on_any_device() -> None:
    x, y = torch.rand(4, 1, 8, 8), torch.randint(0, 10, (4,))
    tr = LocalTrainer(build_model("cnn", (1, 8, 8), 10), x, y, np.array([0, 2, 4]), "classification", seed=0,
                 chunk_mb=1.0)
    step = footprint(tr.module, (1, 8, 8)).step_bytes(32)
    assert tr.chunk_size(32) == max(1, 2**20 // step)  # chunk_mb wins, on the CPU too


def test_inference_of_resnet18_on_70_gib_takes_hundreds_of_rows_per_call() -> None:
    row = inference_row_bytes(build_model("resnet18", (3, 32, 32), 10), (3, 32, 32))
    assert inference_rows(int(70 * GIB * FREE_SHARE), 3, row) > 500  # ~15 MiB a row: 3 models in one call

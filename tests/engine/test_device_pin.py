"""Only the device tests see the GPU: every other test runs ``device=auto`` on the CPU, in its own process and in
the processes it starts (tests/conftest.py), so the suite's numbers are the CPU's on any machine."""

from __future__ import annotations

import os

import pytest
import torch

from fedcluster.engine.device import resolve_device
from tests.conftest import GPU_PRESENT


def test_a_test_not_about_devices_runs_auto_on_the_cpu() -> None:
    assert not torch.cuda.is_available()
    assert resolve_device("auto") == torch.device("cpu")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""  # the processes it starts see no GPU either


@pytest.mark.device
def test_a_device_test_sees_the_machines_gpu() -> None:
    assert torch.cuda.is_available() == GPU_PRESENT
    assert resolve_device("auto").type == ("cuda" if GPU_PRESENT else "cpu")
    assert os.environ.get("CUDA_VISIBLE_DEVICES") != "" or not GPU_PRESENT

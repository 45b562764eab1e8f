"""The CUDA modes (fast by default, bitwise repeatable with ``deterministic=true``), the cuBLAS setting made
before any CUDA work, and pooling with a deterministic CUDA backward. The flags are process-wide switches that
exist without a GPU, so the modes are checked here; what they do to the numbers is measured on a GPU
(benchmarks/speed/gpu_window.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from fedcluster.app.cli import main
from fedcluster.config.run_config import RunConfig
from fedcluster.engine.device import configure
from fedcluster.models import build_model

pytestmark = pytest.mark.device  # on a GPU machine these run on the GPU (tests/conftest.py)
# modules whose CUDA backward has no deterministic kernel (PyTorch's use_deterministic_algorithms notes)
NO_DETERMINISTIC_BACKWARD = (nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool2d, nn.AvgPool3d,
                             nn.MaxPool3d, nn.FractionalMaxPool2d, nn.ReflectionPad2d, nn.ReplicationPad2d)


@pytest.fixture
def cuda_flags() -> Iterator[None]:
    saved = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32,
             torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    yield
    (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32,
     torch.backends.cuda.matmul.allow_tf32) = saved[:4]
    torch.use_deterministic_algorithms(saved[4], warn_only=saved[5])


def _flags() -> tuple[bool, ...]:
    return (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32,
            torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled())


@pytest.mark.usefixtures("cuda_flags")
def test_cuda_is_fast_by_default_and_bitwise_one_key_away() -> None:
    assert RunConfig().deterministic is False
    configure(torch.device("cuda"), RunConfig().deterministic)
    # autotuning on, TF32 convolutions (PyTorch's default), fp32 matmuls (PyTorch's default), any kernel
    assert _flags() == (True, False, True, False, False)
    configure(torch.device("cuda"), True)
    assert _flags() == (False, True, False, False, True)
    before = _flags()
    configure(torch.device("cpu"), False)  # the CPU is always bitwise repeatable: nothing to switch
    assert _flags() == before


def test_run_help_states_the_modes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "deterministic" in text and "cuDNN autotuning" in text and "the CPU is always bitwise repeatable" in text


@pytest.mark.parametrize("preset", [None, ":16:8"])
def test_cublas_workspace_is_set_on_import_before_any_cuda_work(preset: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    if preset:
        env["CUBLAS_WORKSPACE_CONFIG"] = preset
    code = ("import os, torch; assert not torch.cuda.is_initialized(); import fedcluster; "
            "assert not torch.cuda.is_initialized(); print(os.environ.get('CUBLAS_WORKSPACE_CONFIG'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (preset or ":4096:8")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet-v2"])
@pytest.mark.host_only(reason="model and input built by the test on the host, called there")
def test_big_models_pool_with_a_deterministic_backward_and_the_same_numbers(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, (3, 16, 16), 10)
    assert not [m for m in model.modules() if isinstance(m, NO_DETERMINISTIC_BACKWARD)]
    reference = build_model(name, (3, 16, 16), 10)
    reference.load_state_dict(model.state_dict())  # the same parameter names as before
    pools = [i for i, m in enumerate(reference.body) if type(m).__name__ == "GlobalMeanPool"]
    assert len(pools) == 1
    reference.body[pools[0]] = nn.AdaptiveAvgPool2d(1)  # what the models used before
    x = torch.randn(4, 3, 16, 16)
    out, ref = model(x), reference(x)
    assert torch.equal(out, ref)
    grads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
    ref_grads = torch.autograd.grad(ref.square().sum(), list(reference.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))

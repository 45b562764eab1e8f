"""engine.training.pooling: NCHW max-pooling through the channels-last CPU kernel gives PyTorch's values, indices and
gradients bit for bit, and the sequential path trains with it to the same models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training import kernels
from fedcluster.engine.training.pooling import ChannelsLastMaxPool2d, fast_pooling
from fedcluster.models.base import build_model

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


def _pool_and_grad(pool: nn.Module, x0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x0.detach().requires_grad_()
    out = pool(x)
    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)))
    assert x.grad is not None
    return out, x.grad


@HOST_ONLY
@pytest.mark.parametrize(("shape", "kernel", "stride", "padding", "ceil_mode"), [
    ((16, 32, 24, 24), 2, 2, 0, False),   # the paper CNN's first pooling
    ((8, 16, 9, 9), 3, 2, 1, False),      # overlapping windows (ResNet's stem)
    ((8, 12, 7, 7), 2, None, 0, True),    # a short last window
])
def test_the_channels_last_pool_is_torch_s_bit_for_bit(shape: tuple[int, ...], kernel: int, stride: int | None,
                                                       padding: int, ceil_mode: bool) -> None:
    torch.manual_seed(0)
    x = torch.relu(torch.randn(*shape)).round(decimals=1)  # ReLU's zeros and rounded values: many ties to break
    x.view(-1)[::97] = float("nan")
    ref = nn.MaxPool2d(kernel, stride, padding, ceil_mode=ceil_mode)
    fast = ChannelsLastMaxPool2d(kernel, stride, padding, ceil_mode=ceil_mode)
    (out, grad), (fast_out, fast_grad) = _pool_and_grad(ref, x), _pool_and_grad(fast, x)
    assert torch.equal(out.isnan(), fast_out.isnan()) and torch.equal(out.nan_to_num(), fast_out.nan_to_num())
    assert torch.equal(grad, fast_grad)
    assert fast_out.is_contiguous() and fast_grad.is_contiguous()


def test_fast_pooling_swaps_nested_pools_only() -> None:
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.Sequential(nn.ReLU(), nn.MaxPool2d(2)), nn.MaxPool2d(2, 1),
                          nn.MaxPool2d(2, return_indices=True), nn.AvgPool2d(2))
    fast_pooling(model)
    assert [type(m).__name__ for m in (model[1][1], model[2], model[3], model[4])] == \
        ["ChannelsLastMaxPool2d", "ChannelsLastMaxPool2d", "ChannelsLastMaxPool2d", "AvgPool2d"]
    assert model[2].stride == 1 and model[3].return_indices


def _train(monkeypatch: pytest.MonkeyPatch, fast: bool) -> tuple[dict[str, torch.Tensor], list[type]]:
    if not fast:
        monkeypatch.setattr(kernels, "fast_pooling", lambda m: m)
    torch.manual_seed(0)
    x, y = torch.randn(160, 1, 28, 28), torch.randint(0, 10, (160,))
    module = build_model("cnn", (1, 28, 28), 10, {"channels": [16, 32], "fc": 64, "padding": "valid"})
    seen: list[type] = []
    for m in module.modules():
        if isinstance(m, nn.MaxPool2d):
            m.register_forward_hook(lambda m, _i, _o: seen.append(type(m)))
    t = LocalTrainer(module, x, y, np.array([0, 70, 160]), "classification", seed=0, path="sequential",
                client_momentum="keep")
    solver = Solver(lr=0.05, momentum=0.9, weight_decay=5e-4, batch_size=32)
    init = stack([get_params(module)])
    for r in range(2):  # the second round continues the kept momentum buffers
        out = t.train(init, np.arange(2), solver, r, init_index=np.zeros(2, dtype=np.int64))
    monkeypatch.undo()
    return {k: v.clone() for k, v in out.items()}, seen


@HOST_ONLY
def test_sequential_training_pools_fast_to_the_same_models(monkeypatch: pytest.MonkeyPatch) -> None:
    plain, plain_seen = _train(monkeypatch, fast=False)
    fast, fast_seen = _train(monkeypatch, fast=True)
    assert set(plain_seen) == {nn.MaxPool2d} and set(fast_seen) == {ChannelsLastMaxPool2d}
    for k in plain:
        assert torch.equal(plain[k], fast[k]), k

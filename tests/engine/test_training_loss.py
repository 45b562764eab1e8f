"""The training paths' per-sample loss: the cross-entropy as the log-softmax at the label gives F.cross_entropy's
values and gradients bit for bit (including padded rows of weight 0), and dispatches fewer operators under vmap."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from fedcluster.engine.training.kernels import per_sample_loss
from tests.support.operator_count import OperatorCount


def test_cross_entropy_values_and_gradients_are_torch_s_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(0)
    out = (torch.randn(64, 10, generator=gen) * 5).requires_grad_()
    y = torch.randint(0, 10, (64,), generator=gen)
    w = torch.rand(64, generator=gen)
    w[-8:] = 0.0  # padded rows
    ours = per_sample_loss("classification")(out, y)
    ref = F.cross_entropy(out, y, reduction="none")
    assert torch.equal(ours, ref)
    (g_ours,) = torch.autograd.grad((ours * w).sum() / 56, out)
    (g_ref,) = torch.autograd.grad((ref * w).sum() / 56, out)
    assert torch.equal(g_ours, g_ref)


def test_under_vmap_it_needs_no_ignore_index_masking() -> None:
    loss = per_sample_loss("classification")
    w, x, y = torch.randn(3, 4, 5), torch.randn(3, 8, 4), torch.randint(0, 5, (3, 8))
    ops = OperatorCount()
    with ops:
        vmap(grad(lambda w_, x_, y_: loss(x_ @ w_, y_).mean()))(w, x, y)
    assert not set(ops.counts) & {"ne", "where", "nll_loss_forward"}, ops.counts

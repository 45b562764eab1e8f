"""The SGD update of the functional training paths (vectorised, unit-loop, dense): ``torch.optim.SGD``'s step
(weight decay, momentum without dampening or Nesterov) plus FedProx's proximal gradient (Li et al. 2020, eq. 2:
the gradient of (μ/2)‖θ − θ_anchor‖² is μ(θ − θ_anchor)).

The update runs on the lists of a model's parameter tensors with PyTorch's multi-tensor (``foreach``) operations:
on an accelerator a handful of kernel launches per step whatever the number of parameter tensors (one per
operation, not one per operation and tensor); on the CPU the same per-tensor arithmetic in the same order, so the
results are the ones of the per-tensor update bit for bit.
"""

from __future__ import annotations

import torch

from fedcluster.engine.solver import Solver


def sgd_step(params: list[torch.Tensor], grads: list[torch.Tensor], solver: Solver,
             bufs: list[torch.Tensor] | None = None, anchors: list[torch.Tensor] | None = None) -> None:
    """One SGD step of ``params`` in place from ``grads`` (not modified): d = g + λθ (+ μ(θ − anchor)), then, with
    momentum buffers ``bufs`` (updated in place), b ← m·b + d and d = b; θ ← θ − lr·d. ``anchors`` (the proximal
    centres) are read only when ``solver.prox_mu`` is set."""
    d: list[torch.Tensor] | tuple[torch.Tensor, ...] = grads
    if solver.weight_decay:
        d = torch._foreach_add(d, params, alpha=solver.weight_decay)
    if solver.prox_mu:
        if anchors is None:
            raise ValueError("a proximal step needs the anchors (the proximal centres)")
        d = torch._foreach_add(d, torch._foreach_sub(params, anchors), alpha=solver.prox_mu)
    if bufs is not None:
        torch._foreach_mul_(bufs, solver.momentum)
        torch._foreach_add_(bufs, d)
        d = bufs
    torch._foreach_sub_(params, d, alpha=solver.lr)

"""The functional paths' SGD update (training.sgd): torch.optim.SGD's step bit for bit on the CPU, FedProx's
proximal gradient, and a constant number of update operations per step whatever the number of parameter tensors
(multi-tensor operations: on an accelerator each is one launch per step, not one per parameter tensor)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.sgd import sgd_step
from fedcluster.models import build_model
from tests.support.operator_count import OperatorCount

SOLVER = Solver(lr=0.05, epochs=2, batch_size=8, momentum=0.9, weight_decay=1e-3)


def test_the_step_is_torch_sgd_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(5, 3, generator=gen), torch.randn(3, generator=gen)]
    ref = [p.clone().requires_grad_() for p in params]
    opt = torch.optim.SGD(ref, lr=SOLVER.lr, momentum=SOLVER.momentum, weight_decay=SOLVER.weight_decay)
    bufs = [torch.zeros_like(p) for p in params]
    for _ in range(4):
        grads = [torch.randn(p.shape, generator=gen) for p in params]
        for r, g in zip(ref, grads, strict=True):
            r.grad = g.clone()
        opt.step()
        sgd_step(params, grads, SOLVER, bufs)
    for p, r in zip(params, ref, strict=True):
        assert torch.equal(p, r.detach())
    for b, r in zip(bufs, ref, strict=True):
        assert torch.equal(b, opt.state[r]["momentum_buffer"])


def test_the_proximal_gradient_pulls_towards_the_anchor() -> None:
    solver = Solver(lr=0.1, prox_mu=0.5)
    p, anchor, g = torch.tensor([2.0, -1.0]), torch.tensor([0.0, 1.0]), torch.tensor([0.2, 0.0])
    sgd_step([p], [g], solver, anchors=[anchor])
    assert torch.allclose(p, torch.tensor([2.0, -1.0]) - 0.1 * (g + 0.5 * torch.tensor([2.0, -2.0])))
    with pytest.raises(ValueError, match="anchors"):
        sgd_step([p], [g], solver)


def _update_ops_per_step(path: str, hidden: list[int]) -> float:
    """In-place operations per training step of one call (the update is the only in-place work besides the copies
    and zeroing of the starting points): the vectorised path steps all units at once, the unit loop one by one."""
    gen = torch.Generator().manual_seed(0)
    sizes = np.array([16, 16, 16])
    x = torch.randn(int(sizes.sum()), 6, generator=gen)
    y = torch.randint(0, 3, (len(x),), generator=gen)
    torch.manual_seed(0)
    module = build_model("mlp", (6,), 3, {"hidden": hidden})
    trainer = LocalTrainer(module, x, y, np.concatenate([[0], np.cumsum(sizes)]), "classification", seed=0, path=path)
    models = stack([get_params(module)] * len(sizes))
    counter = OperatorCount()
    with counter:
        trainer.train(models, np.arange(len(sizes)), SOLVER, round_=0)
    steps = SOLVER.epochs * 16 // SOLVER.batch_size * (len(sizes) if path == "unit-loop" else 1)
    skipped = ("index_put_", "copy_", "zero_")
    in_place = {k: v for k, v in counter.counts.items() if k.endswith("_") and k not in skipped}
    return sum(in_place.values()) / steps


@pytest.mark.host_only(reason="counts the operators of a training call the test builds on the host")
@pytest.mark.parametrize("path", ["vectorized", "unit-loop"])
def test_update_operations_per_step_do_not_grow_with_the_parameter_tensors(path: str) -> None:
    counts = [_update_ops_per_step(path, hidden) for hidden in ([8], [8, 8, 8], [8, 8, 8, 8, 8, 8])]
    assert counts[0] == counts[1] == counts[2], counts  # 4, 8 and 14 parameter tensors
    assert counts[0] <= 3  # momentum ×, momentum +, parameter −

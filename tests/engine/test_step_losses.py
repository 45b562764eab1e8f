"""The trainer's per-step losses (``train_steps``, asked for by FedGWC): the same training as ``train``, the same
losses on every training path, and each the mini-batch loss of the model before that step's update."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.batches import make_schedule
from fedcluster.models import build_model

pytestmark = pytest.mark.host_only(reason="compares the CPU-only paths (dense, pool) on data the test builds on the "
                                    "host; FedGWC's runs in test_device take the step losses on a device")
SIZES = [37, 64, 5, 90]
SOLVER = Solver(lr=0.1, epochs=2, batch_size=16, prox_mu=0.1)


def _trainer(path: str, model_name: str) -> tuple[LocalTrainer, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    n = sum(SIZES)
    x, y = torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)
    torch.manual_seed(1)
    module = build_model(model_name, (1, 8, 8), 10)
    init = stack([get_params(module)] * len(SIZES))
    return LocalTrainer(module, x, y, np.concatenate([[0], np.cumsum(SIZES)]), "classification", seed=3, path=path,
                   workers=2), init


@pytest.mark.parametrize("model_name", ["logistic", "mlp"])
def test_step_losses_are_the_same_training_on_every_path(model_name: str) -> None:
    clients = np.arange(len(SIZES))
    found = {}
    for path in ["dense", "vectorized", "sequential", "pool", "unit-loop"]:
        tr, init = _trainer(path, model_name)
        try:
            plain = tr.train(init, clients, SOLVER, round_=2)
            out, losses = tr.train_steps(init, clients, SOLVER, round_=2)
        finally:
            tr.close()
        exact = path in ("dense", "vectorized", "sequential")  # pool, unit-loop: recorded on the in-process path
        for k, v in plain.items():
            torch.testing.assert_close(out[k], v, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-6)
        found[path] = losses
    steps = make_schedule(np.array(SIZES), clients, 3, 2, SOLVER.epochs, SOLVER.batch_size, 0).steps
    for path, losses in found.items():
        assert losses.shape == (len(SIZES), steps.max())
        assert all(np.isfinite(losses[u, :steps[u]]).all() and np.isnan(losses[u, steps[u]:]).all()
                   for u in range(len(SIZES))), path
        np.testing.assert_allclose(losses, found["sequential"], rtol=1e-5, err_msg=path)


def test_the_first_step_loss_is_the_initial_models_loss_on_the_first_batch() -> None:
    tr, init = _trainer("dense", "logistic")
    clients = np.array([1])
    sched = make_schedule(np.array(SIZES), clients, 3, 2, SOLVER.epochs, SOLVER.batch_size, 0)
    rows = tr.ptr[1] + sched.local[0, 0][sched.mask[0, 0] > 0].numpy()
    _, losses = tr.train_steps({k: v[:1] for k, v in init.items()}, clients, SOLVER, round_=2)
    expected = tr.losses({k: v[:1] for k, v in init.items()}, rows)[:, 0].mean()
    assert losses[0, 0] == pytest.approx(expected, rel=1e-5)
    assert losses[0, -1] < losses[0, 0]  # training lowers the mini-batch loss

"""No padded work in the vectorised trainer: the rows a training call computes are the real rows (within
``PAD_TOLERANCE``), counted through the vmapped gradient calls, at the FedRC paper's scale (300 clients × 160
samples, batch 128: one full batch and one of 32) and with uneven clients; the trained models are those of the
padded computation within float tolerance."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training import kernels
from fedcluster.engine.training.kernels import PAD_TOLERANCE, step_groups

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


@pytest.fixture
def computed_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows computed by the vectorised training steps: units × batch width of each vmapped gradient call."""
    rows = [0]
    real_vmap = kernels.vmap

    def counting(fn: Callable, *args, **kwargs) -> Callable:
        mapped = real_vmap(fn, *args, **kwargs)

        def call(params, xb, *rest):
            rows[0] += int(xb.shape[0] * xb.shape[1])
            return mapped(params, xb, *rest)

        return call

    monkeypatch.setattr(kernels, "vmap", counting)
    return rows


def _trainer(sizes: list[int], features: int = 6) -> LocalTrainer:
    gen = torch.Generator().manual_seed(0)
    n = int(sum(sizes))
    x, y = torch.randn(n, features, generator=gen), torch.randint(0, 3, (n,), generator=gen)
    torch.manual_seed(0)  # the same starting model whatever ran before in this process (tests compare two trainers)
    module = nn.Sequential(nn.Linear(features, 8), nn.ReLU(), nn.Linear(8, 3))
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    return LocalTrainer(module, x, y, ptr, "classification", seed=0, path="vectorized")


def _train(trainer: LocalTrainer, k: int, solver: Solver) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    models = stack([get_params(trainer.module) for _ in range(k)])
    m = len(trainer.sizes)
    clients = np.repeat(np.arange(m), k)
    weights = [np.random.default_rng(u).random(int(trainer.sizes[c])).astype(np.float32)
               for u, c in enumerate(clients)]
    return trainer.train(models, clients, solver, round_=0, weights=weights, init_index=np.tile(np.arange(k), m))


@HOST_ONLY
def test_rows_computed_at_the_fedrc_paper_scale_are_the_real_rows(computed_rows: list[int]) -> None:
    trainer = _trainer([160] * 300)
    _train(trainer, 3, Solver(lr=0.05, epochs=1, batch_size=128))
    real = 300 * 3 * 160
    assert computed_rows[0] <= (1 + PAD_TOLERANCE) * real, computed_rows[0] / real  # padded: 256 rows for 160


@HOST_ONLY
def test_uneven_clients_are_grouped_within_the_tolerance_and_train_the_same_models(computed_rows: list[int],
                                                                                monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    sizes = list(np.random.default_rng(3).integers(5, 90, size=40))
    solver = Solver(lr=0.05, epochs=2, batch_size=32, momentum=0.9, weight_decay=1e-3, prox_mu=0.1)
    trimmed = _train(_trainer(sizes), 2, solver)
    assert computed_rows[0] <= (1 + PAD_TOLERANCE) * 2 * 2 * sum(sizes)
    # the padded computation: every step at the full batch for every unit still training
    monkeypatch.setattr(kernels, "step_groups", lambda real: [(None, 32)])
    padded = _train(_trainer(sizes), 2, solver)
    for k in trimmed:
        torch.testing.assert_close(trimmed[k], padded[k], rtol=1e-5, atol=1e-6)


def test_step_groups_cover_every_unit_once_within_the_tolerance() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        real = rng.integers(1, 129, size=int(rng.integers(1, 60)))
        groups = step_groups(real)
        covered = np.concatenate([np.arange(len(real)) if g is None else g for g, _ in groups])
        assert sorted(covered) == list(range(len(real)))
        computed = sum((len(real) if g is None else len(g)) * w for g, w in groups)
        assert computed <= (1 + PAD_TOLERANCE) * real.sum()
        assert all(w >= (real if g is None else real[g]).max() for g, w in groups)

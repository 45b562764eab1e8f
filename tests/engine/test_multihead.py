"""Shared body + K heads trained with [n, K] weights: the training paths agree, and the loss is the
γ-weighted sum over heads (S1 eq. 6–7)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.multihead import MultiHead, MultiHeadLoss, pack, unpack
from fedcluster.models import build_model

SIZES = [37, 64, 5, 90]
K = 3

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


def _setup(model_name: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n = sum(SIZES)
    x = torch.rand(n, 1, 8, 8, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    torch.manual_seed(1)
    base = build_model(model_name, (1, 8, 8), 10)
    return x, y, np.concatenate([[0], np.cumsum(SIZES)]), base


def _multi_train(path: str, model_name: str, solver: Solver, weights_fn):
    x, y, ptr, base = _setup(model_name)
    module = MultiHead(base, K)
    init = stack([get_params(module) for _ in SIZES])
    clients = np.arange(len(SIZES))
    weights = [weights_fn(s) for s in SIZES]
    parent = LocalTrainer(base, x, y, ptr, "classification", seed=3, path=path, workers=2)
    tr = parent.sibling(module, MultiHeadLoss("classification"))
    assert (tr.dense is not None) == (path == "dense")  # the dense path really runs (no silent fallback)
    try:
        return tr.train(init, clients, solver, round_=1, weights=weights)
    finally:
        parent.close()


def _random_gamma(n: int) -> np.ndarray:
    return np.random.default_rng(n).dirichlet(np.ones(K), n).astype(np.float32)


@pytest.mark.parametrize("model_name", ["mlp", "light-cnn"])
@pytest.mark.parametrize("solver", [Solver(lr=0.1, batch_size=16),
                                    Solver(lr=0.05, epochs=2, batch_size=8, momentum=0.9, weight_decay=1e-3)])
@HOST_ONLY
def test_multihead_vectorized_equals_sequential(model_name: str, solver: Solver) -> None:
    ref = _multi_train("sequential", model_name, solver, _random_gamma)
    fast = _multi_train("vectorized", model_name, solver, _random_gamma)
    for k in ref:
        torch.testing.assert_close(fast[k], ref[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model_name", ["mlp", "logistic"])
@pytest.mark.parametrize("solver", [Solver(lr=0.1, batch_size=16),
                                    Solver(lr=0.05, epochs=2, batch_size=8, momentum=0.9, weight_decay=1e-3,
                                           prox_mu=0.1)])
@HOST_ONLY
def test_multihead_dense_equals_sequential(model_name: str, solver: Solver) -> None:
    ref = _multi_train("sequential", model_name, solver, _random_gamma)
    fast = _multi_train("dense", model_name, solver, _random_gamma)
    for k in ref:
        torch.testing.assert_close(fast[k], ref[k], rtol=1e-4, atol=1e-5)


@HOST_ONLY
def test_multihead_pool_equals_sequential() -> None:
    solver = Solver(lr=0.1, batch_size=16, momentum=0.5)
    ref = _multi_train("sequential", "mlp", solver, _random_gamma)
    pool = _multi_train("pool", "mlp", solver, _random_gamma)
    for k in ref:
        torch.testing.assert_close(pool[k], ref[k], rtol=1e-4, atol=1e-5)


@HOST_ONLY
def test_one_hot_weights_train_one_head_like_a_plain_model() -> None:
    """γ = e_1 for every sample: head 1 and the body train exactly like a single model; heads 0, 2 stay."""
    solver = Solver(lr=0.1, batch_size=16, momentum=0.9)
    onehot = np.zeros(K, np.float32)
    onehot[1] = 1.0
    multi = _multi_train("vectorized", "mlp", solver, lambda n: np.tile(onehot, (n, 1)))
    x, y, ptr, base = _setup("mlp")
    init = stack([get_params(base) for _ in SIZES])
    tr = LocalTrainer(base, x, y, ptr, "classification", seed=3, path="vectorized")
    plain = tr.train(init, np.arange(len(SIZES)), solver, round_=1)
    bodies, heads = unpack(multi, K)
    for n, v in bodies.items():
        torch.testing.assert_close(v, plain[n], rtol=1e-5, atol=1e-6)
    for n, v in heads.items():
        torch.testing.assert_close(v[:, 1], plain[n], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(v[:, 0], init[n], rtol=0, atol=0)
        torch.testing.assert_close(v[:, 2], init[n], rtol=0, atol=0)


def test_pack_unpack_round_trip() -> None:
    models = stack([get_params(build_model("mlp", (1, 8, 8), 10)) for _ in range(K)])
    for n, v in models.items():
        if n.startswith("body."):
            v[1:] = v[0]
    packed = pack(models)
    bodies, heads = unpack({n: v.unsqueeze(0) for n, v in packed.items()}, K)
    for n, v in models.items():
        got = bodies[n][0] if n.startswith("body.") else heads[n][0]
        torch.testing.assert_close(got, v[0] if n.startswith("body.") else v)

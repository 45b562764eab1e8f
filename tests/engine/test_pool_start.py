"""The process pool starts safely where fork is not (accelerator builds of PyTorch) and gives the same models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training import pool
from fedcluster.engine.training.multihead import MultiHead, MultiHeadLoss
from fedcluster.models import build_model

SIZES = [37, 64, 5, 90]


def _data():
    g = torch.Generator().manual_seed(0)
    n = sum(SIZES)
    return torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g), \
        np.concatenate([[0], np.cumsum(SIZES)])


def _train(path: str, multihead: bool = False, rounds: int = 2) -> list[dict[str, torch.Tensor]]:
    x, y, ptr = _data()
    torch.manual_seed(1)
    base = build_model("light-cnn", (1, 8, 8), 10)
    tr = LocalTrainer(base, x, y, ptr, "classification", seed=3, path=path, workers=2)
    module, unit = base, tr
    if multihead:
        module = MultiHead(base, 3)
        unit = tr.sibling(module, MultiHeadLoss("classification"))
    weights = [np.random.default_rng(n).dirichlet(np.ones(3), n).astype(np.float32) for n in SIZES] \
        if multihead else None
    solver = Solver(lr=0.05, batch_size=16, momentum=0.5)
    init = stack([get_params(module) for _ in SIZES])
    out = []
    try:
        for r in range(rounds):  # the same pool serves every round
            init = unit.train(init, np.arange(len(SIZES)), solver, r, weights=weights)
            out.append(init)
            assert tr._pool is None if path == "sequential" else (tr._pool is not None or unit._pool is not None)
    finally:
        tr.close()
    return out


def _autograd_in_parent() -> None:
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()


SLOW = pytest.mark.slow  # each starts fresh interpreters (tens of seconds on a busy 2-core machine)


@pytest.mark.parametrize("method,path,multihead", [
    ("forkserver", "pool", False),
    pytest.param("forkserver", "pool-vectorized", False, marks=SLOW),
    pytest.param("forkserver", "pool", True, marks=SLOW),
    pytest.param("spawn", "pool", True, marks=SLOW),
])
@pytest.mark.host_only(reason="engine=pool runs on the CPU only")
def test_pool_after_autograd_with_safe_start_equals_sequential(monkeypatch, method: str, path: str,
                                                                multihead: bool) -> None:
    _autograd_in_parent()  # what made forked pools fail on CUDA builds
    monkeypatch.setattr(pool, "start_method", lambda: method)
    ref = _train("sequential", multihead)
    fast = _train(path, multihead)
    for a, b in zip(ref, fast, strict=True):
        for k in a:
            torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5)


def test_start_method_follows_the_build(monkeypatch) -> None:
    monkeypatch.setattr(pool, "accelerator_build", lambda: True)
    assert pool.start_method() == "forkserver"
    monkeypatch.setattr(pool, "accelerator_build", lambda: False)
    assert pool.start_method() == "fork"



def test_stop_pool_kills_the_workers_when_terminate_gives_up() -> None:
    """CPython's Pool.terminate raises AssertionError, before stopping any worker, when its result thread
    has ended with jobs in flight (seen once in the Ctrl-C test): the workers must still be stopped."""
    import multiprocessing.pool
    import time

    workers = pool.start_pool(2, time.sleep, (0,), method="fork")
    procs = list(workers._pool)
    jobs = [workers.apply_async(time.sleep, (60,)) for _ in procs]
    time.sleep(0.5)  # both workers busy: neither holds the task queue's lock that terminate takes
    handler = workers._result_handler
    handler.is_alive = lambda: False  # what terminate sees after the race
    try:
        pool.stop_pool(workers)
        assert all(p.exitcode is not None for p in procs) and not any(j.ready() for j in jobs)
    finally:
        handler._state = multiprocessing.pool.TERMINATE  # let the real result thread end
        workers._outqueue.put(None)

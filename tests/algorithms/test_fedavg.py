"""FedAvg/FedProx behave as their papers say."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.params import flatten, repeat
from fedcluster.engine.runner import Run
from fedcluster.tiers.aggregation import server_update


def _run(tmp_path, *overrides: str) -> Run:
    cfg, typed = resolve(load_raw(None, ["num_clients=10", "progress=false", f"out={tmp_path}", *overrides]))
    return Run(cfg, typed)


def test_fedavg_learns_iid_digits(tmp_path) -> None:
    summary = _run(tmp_path / "a", "scenario=iid", "rounds=25", "lr=0.3").execute()
    assert summary["final"]["val_acc"] > 0.85 and summary["final"]["test_acc"] > 0.85


def test_fedavg_round_is_sample_weighted_average_of_local_models(tmp_path) -> None:
    run = _run(tmp_path / "b", "rounds=1")
    alg, ctx = run.alg, run.ctx
    before = {k: v[0].clone() for k, v in alg.models.items()}
    clients = run.stream[0]
    alg.run_round(0, clients)
    local = ctx.trainer.train(repeat(before, len(clients)), clients, ctx.solver, 0)
    sizes = torch.as_tensor(run.fed.train.sizes[clients], dtype=torch.float64)
    expected = server_update(before, local, sizes, 1.0)
    for k in expected:
        torch.testing.assert_close(alg.models[k][0], expected[k])


def test_fedprox_proximal_term_keeps_local_models_near_the_global_one(tmp_path) -> None:
    run = _run(tmp_path / "c", "algorithm=fedprox", "rounds=1")
    ctx, alg = run.ctx, run.alg
    glob = {k: v[0] for k, v in alg.models.items()}
    clients = np.arange(5)
    drift = {}
    for mu in (0.0, 10.0):
        alg.params.mu = mu
        local = ctx.trainer.train(repeat(glob, 5), clients, alg.local_solver(), 0)
        drift[mu] = (flatten(local) - flatten(repeat(glob, 5))).norm(dim=1).mean().item()
    assert drift[10.0] < 0.5 * drift[0.0]

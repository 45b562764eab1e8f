"""Adaptive-K review checks: CFL's second split maps cohort rows back to client ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.params import flatten, select
from fedcluster.engine.runner import Run


def test_cfl_second_split_moves_the_right_clients(tmp_path: Path) -> None:
    """Cluster 1 holds clients 6..11 (cohort rows 6..11, a non-zero offset). Its updates split into two
    opposite groups, so the new cluster must be {6, 7, 8} or {9, 10, 11}; reading the group's local row
    numbers as client ids (the reference code's bug) would move clients of cluster 0."""
    cfg, typed = resolve(load_raw(None, ["algorithm=cfl", "algorithm.warmup=0", "num_clients=12", "rounds=2",
                                         "progress=false", "threads=1", f"out={tmp_path}"]))
    run = Run(cfg, typed)
    alg = run.alg
    alg._round = 1
    alg.split_cluster(0, np.arange(6, 12))
    alg.sync()
    d = flatten(alg.models).shape[1]
    direction = torch.zeros(d)
    direction[0] = 2.0

    def fake_train(round_, clients, positions, solver=None, anchor=None):
        delta = torch.zeros(len(clients), d)
        delta[np.isin(clients, [6, 7, 8])] = direction
        delta[np.isin(clients, [9, 10, 11])] = -direction
        return select(alg.models, positions), delta

    alg.train = fake_train
    alg.run_round(1, np.arange(12))
    assert alg.num_clusters == 3
    moved = set(np.flatnonzero(alg.cluster == 2).tolist())
    assert moved in ({6, 7, 8}, {9, 10, 11})
    assert set(np.flatnonzero(alg.cluster == 0).tolist()) == set(range(6))

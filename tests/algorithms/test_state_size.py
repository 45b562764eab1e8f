"""What a method keeps between rounds grows with the federation (samples × K weights), never with K × clients
models: the scaling benchmark's claim, checked on small federations."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.engine.params import state_bytes
from fedcluster.engine.runner import Run


@pytest.mark.parametrize("method,k", [("fedavg", 1), ("fedrc", 3), ("fedem", 3), ("ifca", 3)])
def test_state_is_k_models_plus_per_client_and_per_sample_weights(tmp_path: Path, method: str, k: int) -> None:
    extra = [] if k == 1 else [f"algorithm.num_clusters={k}"]
    cfg, typed = resolve(load_raw(None, [f"algorithm={method}", *extra, "num_clients=12", "rounds=1",
                                         "clients_per_round=0.5", "progress=false", "threads=1",
                                         f"out={tmp_path / 'r'}"]))
    run = Run(cfg, typed, fed=build_federation(cfg, typed["scenario"]))
    run.execute()
    model = sum(p.numel() * 4 for p in run.ctx.module.parameters())
    fed = run.fed
    # K models, Ω [M, K], per-sample weights/priors [N, K] (a few arrays), per-client label counts [M, K, C]
    bound = k * model + 8 * k * (4 * len(fed.train.y) + fed.num_clients * (2 + fed.num_classes)) + 4096
    state = state_bytes(run.alg.state_dict())
    assert k * model <= state <= bound
    assert state < (k + 1) * model + fed.num_clients * model  # far from one model per client

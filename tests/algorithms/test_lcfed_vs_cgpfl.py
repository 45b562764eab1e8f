"""Where LCFed and CGPFL part. Both train each client with a proximal step toward its cluster's model and set a
cluster's model to the N_i-weighted mean of its members' trained models (LCFed's Ω_k; CGPFL's w_k at β = 1).
With a one-layer model LCFed has no embedding to share, so once both find the same clusters their cluster models,
hence every test client's prediction, are the same (the digits demo with ``model=logistic``: equal test losses on
seeds 0–2; only the participating clients' accuracy differs, CGPFL predicting with its personalised models). With
two layers LCFed's first layer is one embedding averaged over every client while CGPFL keeps a whole model per
context (``model=mlp``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fedcluster
from tests.support.method_runs import played

SEEDS = [0, 1, 2]
DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
BASE = {"progress": False, "threads": 1, "checkpoint_every": 1000, "rounds": 6}


def _rows(tmp_path: Path, method: str, seed: int) -> list[dict[str, float]]:
    result = fedcluster.run(str(DEMO), algorithm={"name": method, "num_clusters": 3}, seed=seed,
                            out=str(tmp_path / method), **BASE)
    return [{k: float(r[k]) for k in ("test_loss", "val_acc")} for r in result.rows]


@pytest.mark.parametrize("seed", SEEDS)
def test_with_one_layer_lcfed_and_cgpfl_give_test_clients_the_same_models(tmp_path: Path, seed: int) -> None:
    lcfed, cgpfl = (_rows(tmp_path, m, seed) for m in ("lcfed", "cgpfl"))
    np.testing.assert_allclose([r["test_loss"] for r in lcfed], [r["test_loss"] for r in cgpfl], rtol=1e-5)
    # the participating clients: cluster models against personalised ones
    assert [r["val_acc"] for r in lcfed] != [r["val_acc"] for r in cgpfl]


@pytest.mark.parametrize("seed", SEEDS)
def test_with_two_layers_lcfed_shares_its_embedding_and_cgpfl_does_not(tmp_path: Path, seed: int) -> None:
    runs = {m: played(tmp_path / m, ["progress=false", "threads=1", "checkpoint_every=1000", f"algorithm={m}",
                                     "algorithm.num_clusters=3", "model=mlp", f"seed={seed}"], rounds=3, config=DEMO)
            for m in ("lcfed", "cgpfl")}
    first = next(iter(runs["lcfed"].alg.models))  # the first layer's weight: LCFed's embedding
    for method, shared in (("lcfed", True), ("cgpfl", False)):
        weights = runs[method].alg.models[first].cpu().numpy()
        same = all(np.array_equal(weights[0], w) for w in weights[1:])
        assert same is shared, method

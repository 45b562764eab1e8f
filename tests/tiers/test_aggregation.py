"""The one server update (tiers/aggregation.py): θ ← θ + η_g (mean − θ) for one model, K cluster models with a
weight per (client, cluster), a shared feature extractor, and nowhere else in the package."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import fedcluster
from fedcluster.tiers.aggregation import cluster_update, server_step, server_update, weighted_mean


def test_server_update_is_sample_weighted_mean() -> None:
    a = {"w": torch.tensor([0.0, 0.0])}
    local = {"w": torch.tensor([[1.0, 2.0], [3.0, 6.0]])}
    sizes = torch.tensor([1.0, 3.0])
    torch.testing.assert_close(weighted_mean(local["w"], sizes), torch.tensor([2.5, 5.0]))
    torch.testing.assert_close(server_update(a, local, sizes, 1.0)["w"], torch.tensor([2.5, 5.0]))
    torch.testing.assert_close(server_update(a, local, sizes, 0.5)["w"], torch.tensor([1.25, 2.5]))
    torch.testing.assert_close(server_step(torch.tensor([2.0]), torch.tensor([4.0]), 0.25), torch.tensor([2.5]))


def test_cluster_update_weights_each_cluster_and_keeps_an_unweighted_one() -> None:
    models = {"head.w": torch.tensor([[0.0], [10.0], [-1.0]])}  # K = 3
    local = {"head.w": torch.tensor([[[1.0], [2.0], [0.0]], [[3.0], [4.0], [0.0]]])}  # [m = 2, K, 1]
    a = torch.tensor([[1.0, 1.0, 0.0], [3.0, 1.0, 0.0]], dtype=torch.float64)  # nobody weights cluster 2
    new = cluster_update(models, local, a, 0.5)["head.w"]
    torch.testing.assert_close(new, torch.tensor([[0.5 * 2.5], [10.0 + 0.5 * (3.0 - 10.0)], [-1.0]]))


def test_cluster_update_of_one_model_per_client_averages_within_each_cluster() -> None:
    models = {"w": torch.zeros(2, 2)}
    local = {"w": torch.tensor([[1.0, 1.0], [3.0, 3.0], [5.0, 5.0]])}  # [m, ...]: one model per client
    a = torch.tensor([[2.0, 0.0], [2.0, 0.0], [0.0, 7.0]], dtype=torch.float64)  # hard: N_i at the client's cluster
    torch.testing.assert_close(cluster_update(models, local, a, 1.0)["w"], torch.tensor([[2.0, 2.0], [5.0, 5.0]]))


def test_a_shared_body_is_averaged_over_every_client_and_stored_for_each_cluster() -> None:
    models = {"body.w": torch.zeros(2, 1), "head.w": torch.zeros(2, 1)}
    local = {"body.w": torch.tensor([[1.0], [4.0]]), "head.w": torch.tensor([[[1.0], [2.0]], [[3.0], [4.0]]])}
    a = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)  # client weights Σ_k A_ik = 2, 1
    new = cluster_update(models, local, a, 1.0, shared_body=True)
    torch.testing.assert_close(new["body.w"], torch.tensor([[2.0], [2.0]]))  # (2·1 + 1·4) / 3 for both clusters
    torch.testing.assert_close(new["head.w"], torch.tensor([[1.0], [3.0]]))


def test_the_server_update_is_written_once() -> None:
    """No module but tiers/aggregation.py moves a model by η (mean − θ) itself."""
    root = Path(fedcluster.__file__).parent
    step = re.compile(r"\+ *\(?(global_)?lr\b[^\n]*\* *\(")
    found = [f"{p.relative_to(root)}:{i}" for p in sorted(root.rglob("*.py")) if p.name != "aggregation.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if step.search(line)]
    assert not found, found

"""wecfl: its clustering step keeps each k-means group at the cluster model nearest its members, it recovers the
paper's cluster-wise non-IID federation (groups of clients with disjoint label sets, as its experiments build) and a
two-concept label swap on three seeds, and a bad ``n_init`` is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import fedcluster
from fedcluster.algorithms.wecfl import weighted_kmeans_positions
from fedcluster.errors import ConfigError
from tests.support.method_runs import label_groups, played

SEEDS = [0, 1, 2]
BASE = ["num_clients=12", "progress=false", "threads=1", "checkpoint_every=1000", "algorithm=wecfl"]


GROUPS = ((0, 1, 2), (3, 4, 5), (6, 7, 8, 9))  # the paper's cluster-wise non-IID: each group its own digits
DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"


def test_each_kmeans_group_takes_the_cluster_model_nearest_its_members() -> None:
    models = np.array([[0.0], [0.1], [5.0], [5.1]])  # two groups of trained models
    for centres, expected in [([5.0, 0.0], [1, 1, 0, 0]), ([0.0, 5.0], [0, 0, 1, 1])]:
        distances = np.abs(models - np.array(centres)[None, :])
        assign = weighted_kmeans_positions(models, np.full(4, 0.25), distances, seed=0, n_init=1)
        assert assign.tolist() == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_wecfl_recovers_client_groups_with_disjoint_labels(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path, [*BASE, "algorithm.num_clusters=3", f"seed={seed}"], rounds=2,
                 fed=label_groups(seed, GROUPS))
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_wecfl_recovers_two_label_swap_concepts(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path, [*BASE, "num_clients=8", "algorithm.num_clusters=2", "scenario=concept-swap",
                            "scenario.concepts=2", "scenario.alpha=10", f"seed={seed}"], rounds=2)
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_wecfl_finds_the_demo_concepts_at_its_defaults(tmp_path: Path, seed: int) -> None:
    """The digits demo: every cluster starts from one θ^0, so the first k-means sees the clients' concepts (K random
    starts would group the clients by their start instead) and the later rounds keep its groups."""
    run = played(tmp_path, [*BASE, f"seed={seed}"], rounds=4, config=DEMO)
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


def test_zero_kmeans_restarts_are_refused() -> None:
    with pytest.raises(ConfigError, match="n_init must be >= 1"):
        fedcluster.load_config(algorithm={"name": "wecfl", "n_init": 0})

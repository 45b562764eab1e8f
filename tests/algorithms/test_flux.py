"""FLUX against what its paper shows (Fenoglio et al., NeurIPS 2025): with the number of clusters unknown, the density
clustering of the client descriptors recovers the clusters of a feature shift (rotated digits, the kind of federation
the paper's rotated MNIST benchmarks are), and clients that never trained are sent to their cluster's model from
their inputs alone, without labels. Three seeds; digits, 12 clients, the logistic model, CPU."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

import fedcluster
from fedcluster.algorithms.flux import density_clusters, scale_groups
from fedcluster.engine.round_evaluation import evaluate
from fedcluster.engine.runner import Run
from fedcluster.errors import ConfigError
from tests.support.method_runs import played

SEEDS = [0, 1, 2]
BASE = ["num_clients=12", "progress=false", "threads=1", "checkpoint_every=1000", "device=cpu", "model=logistic",
        "lr=0.5", "local_epochs=2"]
ROTATED = ["scenario=rotation", "scenario.angles=[0,90,180,270]", "scenario.group_by=angle"]


def _run(tmp_path: Path, overrides: list[str], rounds: int = 8) -> Run:
    return played(tmp_path, [*BASE, *ROTATED, "algorithm=flux", *overrides], rounds)


def _majority(run: Run, positions: np.ndarray) -> np.ndarray:
    """The true concept most of each position's training clients hold."""
    alg, truth = run.alg, run.fed.true_cluster
    return np.array([np.bincount(truth[alg.cluster == k]).argmax() for k in positions])


@pytest.mark.parametrize("seed", SEEDS)
def test_flux_finds_the_rotations_without_being_told_how_many(tmp_path: Path, seed: int) -> None:
    """Four rotations, K not given: HDBSCAN on the descriptors finds four clusters that are the rotations (ARI 1 on
    seeds 0-4; the warm-up ends by the accuracy rule after 4-5 rounds)."""
    run = _run(tmp_path, [f"seed={seed}"])
    assert run.alg.clustered and 3 <= len(run.alg.trend) <= 7, run.alg.trend
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.cluster) >= 0.9, run.alg.cluster
    assert run.alg.num_clusters == 4


@pytest.mark.parametrize("seed", SEEDS)
def test_unseen_clients_are_assigned_from_their_inputs_alone(tmp_path: Path, seed: int) -> None:
    """Each test client (one per rotation, never trained) is sent to the cluster of its rotation by its feature
    descriptor, and scrambling its labels changes nothing: the choice reads no label. It then predicts with that
    cluster's model, which beats FedAvg's one model on the test clients."""
    run = _run(tmp_path / "flux", [f"seed={seed}"])
    test = run.fed.test
    chosen = run.alg.test_clusters(test)
    assert np.array_equal(_majority(run, chosen), run.fed.test_cluster), (chosen, run.fed.test_cluster)
    scrambled = test.with_fit(None)
    scrambled.y = torch.from_numpy(np.random.default_rng(seed).permutation(test.y.numpy()))
    assert np.array_equal(run.alg.test_clusters(scrambled), chosen)
    fedavg = played(tmp_path / "fedavg", [*BASE, *ROTATED, "algorithm=fedavg", f"seed={seed}"], 8)
    assert evaluate(run.alg, run.fed)[0]["test_acc"] > evaluate(fedavg.alg, fedavg.fed)[0]["test_acc"] + 0.1


def test_a_fixed_clustering_round_and_the_run_files(tmp_path: Path) -> None:
    """``cluster_round`` replaces the accuracy rule; the run directory has every file a cluster method writes, and a
    second run repeats the first bit for bit."""
    cfg = {"num_clients": 12, "rounds": 4, "progress": False, "device": "cpu", "threads": 1, "model": "logistic",
           "scenario": {"name": "rotation", "angles": [0, 90, 180, 270], "group_by": "angle"},
           "algorithm": {"name": "flux", "cluster_round": 2}}
    fedcluster.run(**cfg, out=str(tmp_path / "a"))
    fedcluster.run(**cfg, out=str(tmp_path / "b"))

    def rows(run: str) -> list[dict[str, str]]:
        with open(tmp_path / run / "rounds.csv") as f:
            return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]

    assert rows("a") == rows("b")
    assert [float(r["num_clusters"]) for r in rows("a")] == [1, 1, 4, 4]
    for name in ("clients.csv", "summary.json", "clusters.jsonl"):
        assert (tmp_path / "a" / name).is_file(), name
    lines = (tmp_path / "a" / "clusters.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1])["round"] == 4


def test_density_clusters_make_each_noise_client_its_own_cluster() -> None:
    rng = np.random.default_rng(0)
    blobs = np.concatenate([rng.normal(0, 0.01, (4, 2)), rng.normal(5, 0.01, (4, 2)), [[20.0, -20.0]]])
    labels = density_clusters(blobs, 2, None)
    assert labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2]


def test_each_descriptor_group_is_scaled_to_the_unit_interval_by_its_own_range() -> None:
    desc = np.array([[0.0, 2.0, 10.0], [1.0, 4.0, 30.0]])
    scaled, lo, hi = scale_groups(desc, [2, 1])
    assert np.allclose(scaled, [[0.0, 0.5, 0.0], [0.25, 1.0, 1.0]]) and lo.tolist() == [0, 10]
    again, _, _ = scale_groups(np.array([[2.0, 2.0, 20.0]]), [2, 1], lo, hi)
    assert np.allclose(again, [[0.5, 0.5, 0.5]])


@pytest.mark.parametrize(("algorithm", "message"), [
    ({"name": "flux", "min_cluster_size": 1}, "min_cluster_size must be >= 2"),
    ({"name": "flux", "accuracy_delta": -0.1}, "accuracy_delta must be >= 0"),
    ({"name": "flux", "descriptors": "pz"}, "descriptors"),
])
def test_bad_flux_parameters_are_refused(algorithm: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        fedcluster.load_config(algorithm=algorithm)


def test_regression_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a classification data set"):
        fedcluster.run(dataset="mixed-regression", scenario="mixed-regression", model="linear-nobias", rounds=1,
                       progress=False, device="cpu", algorithm="flux", out=str(tmp_path / "r"))

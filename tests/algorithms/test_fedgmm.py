"""FedGMM against what its paper shows (Wu et al., ICML 2023): on a federation with covariate and concept shift at once
(the paper's synthetic setting: each group of clients draws its inputs from its own Gaussian and labels them by its
own rule), federated EM recovers the input components and the predictors, and a new client that never trained
finds its mixture weights from its inputs alone, without labels, and predicts as well as the clients of its group.
Three seeds; 12 clients in 3 groups, 5-dimensional inputs, the logistic model, CPU."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

import fedcluster
from fedcluster.algorithms.fedgmm import joint_posterior
from fedcluster.data.federation import Federation, Split
from fedcluster.engine.round_evaluation import evaluate
from fedcluster.engine.runner import Run
from fedcluster.errors import ConfigError
from tests.support.method_runs import played

SEEDS = [0, 1, 2]
BASE = ["num_clients=12", "progress=false", "threads=1", "checkpoint_every=1000", "device=cpu", "model=logistic",
        "lr=0.5", "local_epochs=3", "algorithm=fedgmm", "algorithm.num_clusters=3"]


def mixture_federation(seed: int, per_group: int = 4, n: int = 120, d: int = 5, k: int = 3) -> Federation:
    """Group c: inputs N(μ_c, I) with the μ_c on a circle of radius 4, labels y = 1[x_{2+c} > 0]; one test client
    per group."""
    rng = np.random.default_rng(seed)
    centres = 4.0 * np.stack([np.cos(2 * np.pi * c / k) * np.eye(d)[0] + np.sin(2 * np.pi * c / k) * np.eye(d)[1]
                              for c in range(k)])

    def client(c: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        x = centres[c] + rng.standard_normal((size, d))
        return x.astype(np.float32), (x[:, 2 + c] > 0).astype(np.int64)

    groups = np.repeat(np.arange(k), per_group)
    train, val, test = ([client(c, n) for c in groups], [client(c, n // 4) for c in groups],
                        [client(c, n) for c in range(k)])

    def split(parts: list[tuple[np.ndarray, np.ndarray]]) -> Split:
        return Split.from_parts([p[0] for p in parts], [p[1] for p in parts])

    return Federation(split(train), split(val), split(test), groups, np.arange(k), 2,
                      info={"name": "gaussian-groups", "dataset": "synthetic"})


def _run(tmp_path: Path, seed: int, rounds: int = 30) -> Run:
    return played(tmp_path, [*BASE, f"seed={seed}"], rounds, fed=mixture_federation(seed))


@pytest.mark.parametrize("seed", SEEDS)
def test_fedgmm_recovers_the_input_components_and_the_predictors(tmp_path: Path, seed: int) -> None:
    """Each client's weight concentrates on one Gaussian component and one predictor, and both are its group's
    (ARI 1 on seeds 0-2)."""
    run = _run(tmp_path, seed)
    alg, truth = run.alg, run.fed.true_cluster
    components, predictors = alg.pi.sum(2), alg.pi.sum(1)
    assert adjusted_rand_score(truth, components.argmax(1)) >= 0.9, components.round(2)
    assert adjusted_rand_score(truth, predictors.argmax(1)) >= 0.9, predictors.round(2)
    assert predictors.max(1).mean() > 0.9


@pytest.mark.parametrize("seed", SEEDS)
def test_a_new_client_weights_the_predictors_from_its_inputs_alone(tmp_path: Path, seed: int) -> None:
    """A test client (one per group, never trained) puts its weight on its group's predictor by EM of the generative
    part on its inputs; scrambling its labels changes nothing; its accuracy is that of its group's clients (test
    accuracy 0.95-0.97 on seeds 0-2, against 0.6-0.7 for FedAvg's one model)."""
    run = _run(tmp_path, seed)
    alg, test = run.alg, run.fed.test
    weights = alg.unseen_pi(test).sum(1)
    own = [np.bincount(alg.pi.sum(1).argmax(1)[run.fed.true_cluster == c], minlength=3).argmax()
           for c in run.fed.test_cluster]
    assert weights.argmax(1).tolist() == own and weights.max(1).min() > 0.9, weights.round(2)
    scrambled = Split(test.x, torch.from_numpy(np.random.default_rng(seed).permutation(test.y.numpy())), test.ptr)
    assert np.array_equal(alg.unseen_pi(scrambled), alg.unseen_pi(Split(test.x, test.y, test.ptr)))
    scores = evaluate(alg, run.fed)[0]
    assert scores["test_acc"] > 0.9 and scores["test_acc"] > scores["val_acc"] - 0.05, scores


def test_the_joint_posterior_is_the_normalised_product() -> None:
    log_pi = np.log(np.array([[[0.5, 0.1], [0.3, 0.1]]]))  # one sample, M1 = 2, M2 = 2
    log_px = np.log(np.array([[0.2, 0.8]]))
    losses = np.array([[1.0, 0.0]])
    expected = np.array([[0.5 * 0.2 * np.e ** -1, 0.1 * 0.2], [0.3 * 0.8 * np.e ** -1, 0.1 * 0.8]])
    assert np.allclose(joint_posterior(log_pi, log_px, losses)[0], expected / expected.sum())
    no_labels = np.array([[0.5 * 0.2, 0.1 * 0.2], [0.3 * 0.8, 0.1 * 0.8]])
    assert np.allclose(joint_posterior(log_pi, log_px, None)[0], no_labels / no_labels.sum())


def test_one_component_is_the_mean_and_variance_of_the_trained_inputs(tmp_path: Path) -> None:
    """The server's M-step: with M1 = 1 every responsibility is 1, so the component is the inputs' mean and variance
    over the clients that trained (here all of them)."""
    run = played(tmp_path, [*BASE, "algorithm.num_components=1", "seed=0"], 1, fed=mixture_federation(0))
    mu, var = run.alg.gaussians()
    x = run.fed.train.x.double().numpy()
    assert np.allclose(mu[0], x.mean(0)) and np.allclose(var[0], np.maximum(x.var(0), 1e-2))


def test_fedgmm_writes_the_run_files_and_repeats_bitwise(tmp_path: Path) -> None:
    cfg = {"num_clients": 8, "rounds": 3, "progress": False, "device": "cpu", "threads": 1, "model": "logistic",
           "algorithm": {"name": "fedgmm", "num_clusters": 3}}
    fedcluster.run(**cfg, out=str(tmp_path / "a"))
    fedcluster.run(**cfg, out=str(tmp_path / "b"))

    def rows(run: str) -> list[dict[str, str]]:
        with open(tmp_path / run / "rounds.csv") as f:
            return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]

    assert rows("a") == rows("b") and len(rows("a")) == 3
    for name in ("clients.csv", "summary.json", "clusters.jsonl"):
        assert (tmp_path / "a" / name).is_file(), name


@pytest.mark.parametrize(("algorithm", "message"), [
    ({"name": "fedgmm", "num_components": 0}, "num_components must be >= 1"),
    ({"name": "fedgmm", "var_floor": 0}, "var_floor must be > 0"),
])
def test_bad_fedgmm_parameters_are_refused(algorithm: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        fedcluster.load_config(algorithm=algorithm)

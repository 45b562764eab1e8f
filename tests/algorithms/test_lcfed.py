"""lcfed: its low-rank similarity picks the cluster whose projected model points the client's way, its embedding is
one model shared by every cluster, it recovers the cluster-wise non-IID federation its paper evaluates (groups of
clients with disjoint label sets) and a two-concept label swap on three seeds, under full and partial
participation, it resumes to the rounds of an uninterrupted run, and bad settings are one line."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import fedcluster
from fedcluster.algorithms.lcfed import cosine_positions, low_rank_projection
from fedcluster.app.cli import main
from fedcluster.errors import ConfigError
from tests.support.method_runs import label_groups, played

SEEDS = [0, 1, 2]
BASE = ["num_clients=12", "progress=false", "threads=1", "checkpoint_every=1000", "algorithm=lcfed",
        "algorithm.num_clusters=3"]
GROUPS = ((0, 1, 2), (3, 4, 5), (6, 7, 8, 9))  # each group of clients holds its own digits
DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"


def test_low_rank_models_keep_the_directions_that_separate_the_models() -> None:
    rng = np.random.default_rng(0)
    models = np.concatenate([rng.normal(0, 0.01, (3, 6)) + [5, 0, 0, 0, 0, 0],
                             rng.normal(0, 0.01, (3, 6)) - [5, 0, 0, 0, 0, 0]])
    centre, directions = low_rank_projection(models, rank=1)
    z = (models - centre) @ directions
    assert directions.shape == (6, 1) and np.sign(z[:3]).tolist() == [np.sign(z[0])] * 3
    assert (np.sign(z[:3]) != np.sign(z[3:])).all()
    assert low_rank_projection(models, rank=50)[1].shape == (6, 5)  # at most n − 1 directions


def test_each_client_joins_the_cluster_of_highest_cosine_similarity() -> None:
    centres = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    z = np.array([[10.0, 1.0], [0.1, 3.0], [-0.5, -0.4], [0.2, 0.1]])
    assert cosine_positions(z, centres).tolist() == [0, 1, 2, 0]


@pytest.mark.parametrize("seed", SEEDS)
def test_lcfed_recovers_client_groups_with_disjoint_labels(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path, [*BASE, f"seed={seed}"], rounds=3, fed=label_groups(seed, GROUPS))
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0
    bodies = [v for n, v in run.alg.models.items() if n.startswith("body.")]
    assert bodies and all(bool((v == v[0]).all()) for v in bodies)  # one global embedding


@pytest.mark.parametrize("seed", SEEDS)
def test_lcfed_recovers_two_label_swap_concepts(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path, [*BASE, "num_clients=8", "algorithm.num_clusters=2", "scenario=concept-swap",
                            "scenario.concepts=2", "scenario.alpha=10", f"seed={seed}"], rounds=3)
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


def test_the_first_rounds_kmeans_of_the_low_rank_models_finds_the_groups(tmp_path: Path) -> None:
    run = played(tmp_path, [*BASE, "seed=1"], rounds=1, fed=label_groups(1, GROUPS))
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_lcfed_finds_the_demo_concepts_at_its_defaults(tmp_path: Path, seed: int) -> None:
    """The digits demo (label skew and three concepts): a proximal first round followed the label skew (ARI 0.31,
    0.74, 0.17); the plain first round finds the concepts, which the later rounds keep."""
    run = played(tmp_path, ["progress=false", "threads=1", "checkpoint_every=1000", "algorithm=lcfed", f"seed={seed}"],
                 rounds=4, config=DEMO)
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


def test_the_first_round_trains_without_the_proximal_term(tmp_path: Path) -> None:
    """Every cluster model is θ^0 before the first clustering: the first round trains plainly (μ applies after)."""
    runs = [played(tmp_path / str(mu), [*BASE, f"algorithm.mu={mu}"], rounds=1, fed=label_groups(0, GROUPS))
            for mu in (0, 20)]
    for n, v in runs[0].alg.models.items():
        np.testing.assert_array_equal(runs[1].alg.models[n].cpu().numpy(), v.cpu().numpy())


def test_lcfed_recovers_the_groups_with_half_the_clients_per_round(tmp_path: Path) -> None:
    run = played(tmp_path, [*BASE, "clients_per_round=6", "seed=0"], rounds=12, fed=label_groups(0, GROUPS))
    assert (run.alg.assigned >= 0).all()
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


@pytest.mark.parametrize(("key", "value", "message"), [("mu", -1, "mu must be >= 0"), ("rank", 0, "rank must be >= 1"),
                                                       ("pca_clients", 1, "pca_clients must be >= 2")])
def test_bad_settings_are_refused(key: str, value: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        fedcluster.load_config(algorithm={"name": "lcfed", key: value})


def _rounds(out: Path) -> list[dict[str, str]]:
    with open(out / "rounds.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(fh)]


def test_a_resumed_run_gives_the_rounds_of_an_uninterrupted_one(tmp_path: Path) -> None:
    common = ["algorithm=lcfed", "num_clients=8", "clients_per_round=4", "progress=false", "threads=1",
              "checkpoint_every=1"]
    assert main(["run", *common, "rounds=2", f"out={tmp_path / 'part'}"]) == 0
    assert main(["resume", str(tmp_path / "part"), "rounds=4"]) == 0
    assert main(["run", *common, "rounds=4", f"out={tmp_path / 'full'}"]) == 0
    assert _rounds(tmp_path / "part") == _rounds(tmp_path / "full")

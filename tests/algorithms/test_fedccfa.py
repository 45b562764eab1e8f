"""FedCCFA against what its paper shows (Chen et al., NeurIPS 2024, Algorithm 1: class-level clustering of balanced
classifiers): on a federation of three concepts that label the same digits alike except for one swapped pair each
(identity; 1 ↔ 2; 3 ↔ 4: the authors' code's drift swaps two labels for a group of clients), the class-level groups
of a swapped class are the clients that label it alike (ARI ≥ 0.9 against that grouping), every unchanged class is
pooled over all clients, and the clients' own models beat FedAvg's one model. Three seeds; 12 clients, an MLP, IID
inside each concept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from fedcluster.algorithms.fedccfa import dbscan_groups, madd
from fedcluster.engine.round_evaluation import evaluate
from tests.support.method_runs import played

SAME = list(range(10))
PERMS = [SAME, [0, 2, 1, *range(3, 10)], [0, 1, 2, 4, 3, *range(5, 10)]]
SWAPPED = [1, 2, 3, 4]
ROUNDS = 10
RUN = ["dataset=digits", "scenario=concept-swap", "scenario.maps=permutation",
       "scenario.perms=" + str(PERMS).replace(" ", ""), "scenario.split=iid", "num_clients=12", "model=mlp",
       "model.hidden=[32]", "lr=0.1", "local_epochs=2", "batch_size=32", "progress=false", "checkpoint_every=1000",
       "device=cpu", "threads=1"]


def class_truth(concept: np.ndarray, c: int) -> np.ndarray:
    """Each client's digit behind label c: clients that label class c alike share it."""
    return np.argsort(np.asarray(PERMS), axis=1)[concept, c]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fedccfa_groups_a_swapped_class_by_concept_and_pools_the_others(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path / "ccfa", [*RUN, "algorithm=fedccfa", f"seed={seed}"], ROUNDS)
    alg, concept = run.alg, run.fed.true_cluster
    for c in range(10):
        groups = alg.class_clusters[c]
        if c in SWAPPED:
            assert adjusted_rand_score(class_truth(concept, c), groups) >= 0.9, (c, groups, concept)
        else:
            assert len(np.unique(groups)) == 1, (c, groups)  # labelled alike everywhere: pooled over all clients
    ccfa = evaluate(alg, run.fed)[0]["val_acc"]
    fedavg = played(tmp_path / "fedavg", [*RUN, "algorithm=fedavg", f"seed={seed}"], ROUNDS)
    assert ccfa > evaluate(fedavg.alg, fedavg.fed)[0]["val_acc"] + 0.15


def test_madd_and_dbscan_find_the_two_directions() -> None:
    """The distance is the mean gap of the cosine profiles to the other rows; DBSCAN (min_samples = 1) groups rows
    within eps of each other, chained."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=8), rng.normal(size=8)
    rows = np.stack([a + 0.05 * rng.normal(size=8) for _ in range(3)] + [b + 0.05 * rng.normal(size=8)
                                                                         for _ in range(3)])
    d = madd(rows)
    assert d.shape == (6, 6) and np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    cos = unit @ unit.T
    assert d[0, 3] == pytest.approx(np.mean([abs(cos[0, z] - cos[3, z]) for z in (1, 2, 4, 5)]))
    assert list(dbscan_groups(d, 0.3)) == [0, 0, 0, 1, 1, 1]
    assert list(dbscan_groups(d, 10.0)) == [0] * 6
    assert madd(rows[:2])[0, 1] == pytest.approx(1 - cos[0, 1])

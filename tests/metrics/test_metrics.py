"""ARI against scikit-learn on known partitions."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import adjusted_rand_score

from fedcluster.metrics.clustering import clustering_ari


def test_ari_perfect_relabelled_and_random() -> None:
    true = np.array([0, 0, 1, 1, 2, 2])
    assert clustering_ari(true, np.array([2, 2, 0, 0, 1, 1]), 3) == 1.0  # label permutation does not matter
    pred = np.array([0, 1, 0, 1, 0, 1])
    assert np.isclose(clustering_ari(true, pred, 2), adjusted_rand_score(true, pred))
    assert clustering_ari(true, pred, 2) < 0.1


def test_ari_known_value() -> None:
    # sklearn docs example: [0,0,1,1] vs [0,0,1,2] → 0.5714...
    assert np.isclose(clustering_ari(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2]), 3), 0.5714285714)


def test_ari_single_model_is_zero() -> None:
    assert clustering_ari(np.array([0, 1, 1]), np.zeros(3, dtype=int), 1) == 0.0

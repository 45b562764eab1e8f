"""Clustering metrics against the ground truth."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score


def clustering_ari(true_cluster: np.ndarray, assignment: np.ndarray, num_clusters: int) -> float:
    """Adjusted Rand index of the client assignment vs the true clusters; 0 for a single model (K = 1)."""
    if num_clusters <= 1:
        return 0.0
    return float(adjusted_rand_score(true_cluster, assignment))


def clustering_nmi(true_cluster: np.ndarray, assignment: np.ndarray) -> float:
    return float(normalized_mutual_info_score(true_cluster, assignment))

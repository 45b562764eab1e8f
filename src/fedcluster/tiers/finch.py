"""FINCH (Sarfraz, Sharma & Stiefelhagen, CVPR 2019, "Efficient Parameter-free Clustering Using First Neighbor
Relations"): a parameter-free clustering, CLoVE's route for an unknown number of clusters.

Each point is linked to its first (nearest) neighbour; the clustering equation A_ij = 1 when j is i's first
neighbour, i is j's, or both share one, and the connected components of A form the first partition. The same step
on the partition's cluster means gives the next, coarser partition, until the number of clusters stops falling by
more than one. A merge whose first-neighbour distance exceeds the largest first-neighbour distance of the first
partition is cut (the paper's early exit, which keeps merges pure).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import pairwise_distances


def _first_neighbours(points: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Each row's nearest other row and the distance to it."""
    d = pairwise_distances(points, metric=metric)
    np.fill_diagonal(d, np.inf)
    nearest = d.argmin(1)
    return nearest, d[np.arange(len(points)), nearest]


def _linked_groups(nearest: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Connected components of the clustering equation's graph (i–κ_i links, shared first neighbours joined
    through them), over the links marked ``keep``."""
    n = len(nearest)
    rows, cols = np.arange(n)[keep], nearest[keep]
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    return connected_components(graph, directed=True, connection="weak")[1]


def _means(points: np.ndarray, labels: np.ndarray) -> np.ndarray:
    k = int(labels.max()) + 1
    sums = np.zeros((k, points.shape[1]))
    np.add.at(sums, labels, points)
    return sums / np.bincount(labels, minlength=k)[:, None]


def finch_partitions(points: np.ndarray, metric: str = "cosine", allow_one: bool = False) -> list[np.ndarray]:
    """FINCH's hierarchy of partitions of the rows of ``points`` [n, d], finest first (labels 0..K−1 each).

    ``allow_one``: also keep a last merge into a single cluster when it lies within the early-exit bound (the
    paper's algorithm drops a one-cluster partition; here it can say that the points form one group)."""
    x = np.asarray(points, dtype=np.float64)
    n = len(x)
    if n < 2:
        return [np.zeros(n, dtype=np.int64)]
    nearest, dist = _first_neighbours(x, metric)
    labels = _linked_groups(nearest, np.ones(n, dtype=bool))
    bound = float(dist.max())
    partitions = [labels]
    while (k := int(labels.max()) + 1) > 1:
        nearest, dist = _first_neighbours(_means(x, labels), metric)
        merged = _linked_groups(nearest, dist <= bound)
        fewer = int(merged.max()) + 1
        if fewer == k:
            break
        if fewer == 1:
            if allow_one:
                partitions.append(np.zeros(n, dtype=np.int64))
            break
        labels = merged[labels]
        partitions.append(labels)
        if k - fewer <= 1:
            break
    return partitions

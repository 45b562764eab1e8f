"""Tiers 3–4 of the one-shot and loss-embedding groupings: pure functions on client updates or client loss
vectors, composed by FL+HC, FedGroup and CLoVE (``fedcluster.algorithms.flhc``, ``fedgroup``, ``clove``).

* FL+HC (Briggs et al. 2020, Sec. III): :func:`agglomerative_groups` — agglomerative clustering of the clients'
  updates to the global model, cut at a distance threshold or at a cluster count; :func:`merge_heights` and
  :func:`gap_threshold` read the threshold off the dendrogram's gap.
* FedGroup (Duan et al. 2021, Sec. IV-B): :func:`update_directions` (truncated SVD of the update matrix ΔW),
  :func:`decomposed_cosine` (M_ij = cos(Δw_i, v_j), the rows whose Euclidean distance is EDC),
  :func:`edc_distance`, :func:`kmeans_groups`, :func:`most_similar` (the newcomer cold start) and
  :func:`inter_group_update` (the optional inter-group aggregation).
* CLoVE (Bhatia et al. 2026, Sec. 3): :func:`silhouette_kmeans` (``selectBestK``: k-means for every k in a
  range, the k with the best silhouette) and :func:`match_clusters_to_models` (min-cost cluster–model matching).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import AgglomerativeClustering, KMeans
from sklearn.metrics import silhouette_score

Linkage = Literal["ward", "complete", "average", "single"]
Metric = Literal["euclidean", "manhattan", "cosine"]


def first_seen_order(labels: np.ndarray) -> np.ndarray:
    """Relabel ``labels`` 0..K−1 in order of first appearance (a deterministic naming of the groups)."""
    labels = np.asarray(labels)
    _, first = np.unique(labels, return_index=True)
    rank = {lab: r for r, lab in enumerate(labels[np.sort(first)])}
    return np.array([rank[v] for v in labels], dtype=np.int64)


# -- FL+HC -----------------------------------------------------------------------------------------
def agglomerative_groups(updates: np.ndarray, linkage: Linkage = "ward", metric: Metric = "euclidean",
                         distance_threshold: float | None = None, n_clusters: int | None = None) -> np.ndarray:
    """FL+HC's clustering step: agglomerative clustering of the rows of ``updates`` [n, P] (each client's
    Δθ_i = θ_i − θ_global), merged until the closest pair of clusters is farther than ``distance_threshold``
    or until ``n_clusters`` remain (exactly one of the two). Ward linkage needs the Euclidean metric."""
    if (distance_threshold is None) == (n_clusters is None):
        raise ValueError("give exactly one of distance_threshold and n_clusters")
    if linkage == "ward" and metric != "euclidean":
        raise ValueError("ward linkage needs metric='euclidean'")
    x = np.asarray(updates, dtype=np.float64)
    if len(x) < 2:
        return np.zeros(len(x), dtype=np.int64)
    n = None if n_clusters is None else min(n_clusters, len(x))
    model = AgglomerativeClustering(n_clusters=n, distance_threshold=distance_threshold, linkage=linkage,
                                    metric=metric, compute_full_tree=True)
    return first_seen_order(model.fit_predict(x))


def merge_heights(updates: np.ndarray, linkage: Linkage = "ward", metric: Metric = "euclidean") -> np.ndarray:
    """The n − 1 merge heights of the full agglomerative tree of the rows of ``updates`` (ascending)."""
    x = np.asarray(updates, dtype=np.float64)
    if len(x) < 2:
        return np.zeros(0)
    model = AgglomerativeClustering(n_clusters=None, distance_threshold=0.0, linkage=linkage, metric=metric,
                                    compute_full_tree=True, compute_distances=True).fit(x)
    return np.sort(model.distances_)


def gap_threshold(heights: np.ndarray, gap_ratio: float) -> float | None:
    """A distance threshold read off a dendrogram's merge ``heights``, or None when the tree shows one cluster.

    The median merge stands for a merge inside a cluster (so fewer than half of the merges may join two clusters:
    K ≤ n/2). The tree has more than one cluster when its last merge is at least ``gap_ratio`` times the median;
    the cut then lies halfway, on a log scale, between the two (√(median · last)), inside the gap that opens
    between the merges within clusters and those across them."""
    h = np.sort(np.asarray(heights, dtype=np.float64))
    if len(h) < 2:
        return None
    median, last = float(np.median(h)), float(h[-1])
    if median <= 0 or last < gap_ratio * median:
        return None
    return float(np.sqrt(median * last))


# -- FedGroup ----------------------------------------------------------------------------------------
def update_directions(updates: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` leading directions [k, P] of the clients' updates ΔW = [Δw_1, …, Δw_n] (FedGroup eq. 9: the
    left singular vectors of the P × n matrix ΔW, i.e. the right singular vectors of ``updates`` [n, P]).
    Computed on the n × n side, so the cost is O(n² P) however large the model."""
    x = np.asarray(updates, dtype=np.float64)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    return vt[:min(k, len(vt))]


def decomposed_cosine(updates: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """M [n, k] with M_ij = cos(Δw_i, v_j) (FedGroup eq. 10): each client's update seen through the k
    decomposed directions. Euclidean distances between rows of M are the EDC measure."""
    x = np.asarray(updates, dtype=np.float64)
    v = np.asarray(directions, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True) * np.linalg.norm(v, axis=1)[None, :]
    return (x @ v.T) / np.maximum(norms, 1e-12)


def edc_distance(embedding: np.ndarray) -> np.ndarray:
    """EDC(Δw_i, Δw_j) = ‖M_i − M_j‖₂ (FedGroup eq. 11), the pairwise matrix [n, n]."""
    m = np.asarray(embedding, dtype=np.float64)
    return np.linalg.norm(m[:, None, :] - m[None, :, :], axis=-1)


def kmeans_groups(embedding: np.ndarray, k: int, seed: int, n_init: int = 10) -> np.ndarray:
    """K-means of the rows of ``embedding`` into min(k, n) groups (FedGroup Alg. 1: K-means with EDC, i.e.
    Euclidean k-means on M) → labels [n], 0..K−1 in order of first appearance; ``n_init`` k-means++ starts."""
    x = np.asarray(embedding, dtype=np.float64)
    return first_seen_order(KMeans(n_clusters=min(k, len(x)), n_init=n_init, random_state=seed).fit_predict(x))


def inter_group_update(models: np.ndarray, eta: float) -> np.ndarray:
    """FedGroup's optional inter-group aggregation (Sec. IV-D; the authors' ``inter_group_aggregation``): group g's
    flattened model θ_g [K, P] becomes (θ_g + η Σ_{h≠g} θ_h / ‖θ_h‖) / (1 + η Σ_{h≠g} 1 / ‖θ_h‖), a pull toward
    the other groups' models, each normalised by its scale; η = 0 leaves the groups independent."""
    theta = np.asarray(models, dtype=np.float64)
    if eta == 0 or len(theta) < 2:
        return theta
    w = eta / np.maximum(np.linalg.norm(theta, axis=1), 1e-12)  # weight of group h in every other group
    weights = np.broadcast_to(w, (len(theta), len(theta))).copy()
    np.fill_diagonal(weights, 1.0)
    return weights @ theta / weights.sum(1, keepdims=True)


def most_similar(updates: np.ndarray, references: np.ndarray) -> np.ndarray:
    """For each row of ``updates``, the reference row with the highest cosine similarity (FedGroup's newcomer
    cold start: the group whose cold-start update direction is closest to the newcomer's)."""
    return decomposed_cosine(updates, references).argmax(1).astype(np.int64)


# -- CLoVE -------------------------------------------------------------------------------------------
def silhouette_kmeans(embedding: np.ndarray, k_max: int, seed: int, k_min: int = 2) -> np.ndarray:
    """CLoVE's ``selectBestK`` + clustering: k-means of the loss vectors for every k in [k_min, k_max]
    (at most n − 1), keeping the labels with the highest silhouette score. Fewer than 3 rows, or identical
    rows, give one cluster."""
    x = np.asarray(embedding, dtype=np.float64)
    top = min(k_max, len(x) - 1)
    if top < max(k_min, 2) or np.allclose(x, x[0]):
        return np.zeros(len(x), dtype=np.int64)
    best, labels = -np.inf, np.zeros(len(x), dtype=np.int64)
    for k in range(max(k_min, 2), top + 1):
        lab = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(x)
        if len(np.unique(lab)) < 2:
            continue
        score = float(silhouette_score(x, lab))
        if score > best:
            best, labels = score, lab
    return first_seen_order(labels)


def ward_silhouette_k(embedding: np.ndarray, k_max: int, margin: float = 0.1) -> int:
    """The number of clusters of CLoVE's unknown-K search (the authors' code, ``find_best_K_by_silhouette``): Ward
    clustering of the loss vectors into k = 2 … min(k_max, n − 1) clusters scored by the silhouette, a larger k
    taken only when its score beats the best so far by the factor 1 + ``margin`` (a parsimonious k unless a larger
    one is clearly better). Fewer than 3 rows, or identical rows, give 1."""
    x = np.asarray(embedding, dtype=np.float64)
    top = min(k_max, len(x) - 1)
    if top < 2 or np.allclose(x, x[0]):
        return 1
    best, chosen = -1.0, 1
    for k in range(2, top + 1):
        lab = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(x)
        if len(np.unique(lab)) < 2:
            continue
        score = float(silhouette_score(x, lab))
        if score > best * (1 + margin):
            best, chosen = score, k
    return chosen


def prefers_one_cluster(points: np.ndarray, seed: int, references: int = 20) -> bool:
    """The gap statistic's test of one cluster against two (Tibshirani, Walther & Hastie 2001): True when
    Gap(1) ≥ Gap(2) − s_2, the within-cluster dispersion log W_k compared with that of ``references`` uniform
    samples of the points' bounding box (in their principal axes). A silhouette cannot say "one cluster";
    this can."""
    x = np.asarray(points, dtype=np.float64)
    if len(x) < 3 or np.allclose(x, x[0]):
        return True
    centred = x - x.mean(0)
    axes = np.linalg.svd(centred, full_matrices=False)[2]
    rotated = centred @ axes.T
    low, high = rotated.min(0), rotated.max(0)
    rng = np.random.default_rng([seed, 41])

    def log_dispersions(y: np.ndarray) -> tuple[float, float]:
        one = float(((y - y.mean(0)) ** 2).sum())
        two = float(KMeans(n_clusters=2, n_init=10, random_state=seed).fit(y).inertia_)
        return np.log(max(one, 1e-300)), np.log(max(two, 1e-300))

    observed = log_dispersions(rotated)
    drawn = np.array([log_dispersions(rng.uniform(low, high, size=rotated.shape)) for _ in range(references)])
    gap = drawn.mean(0) - np.array(observed)
    spread = drawn[:, 1].std() * np.sqrt(1 + 1 / references)
    return bool(gap[0] >= gap[1] - spread)


def match_clusters_to_models(cost: np.ndarray) -> np.ndarray:
    """Min-cost matching of client clusters (rows) to models (columns; cost = the cluster's summed loss on the
    model, CLoVE Sec. 3): the model of each cluster, distinct models (Hungarian algorithm)."""
    c = np.asarray(cost, dtype=np.float64)
    if c.shape[0] > c.shape[1]:
        raise ValueError(f"{c.shape[0]} clusters cannot be matched to {c.shape[1]} models")
    rows, cols = linear_sum_assignment(c)
    out = np.empty(c.shape[0], dtype=np.int64)
    out[rows] = cols
    return out

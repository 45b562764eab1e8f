"""Tier 3 — the hard methods' K-change rules, as the parts their rounds ask: ICFL's connectivity splits
(:class:`ICFLSplits`), StoCFL's merges (:class:`StoCFLMerges`), PACFL's threshold clustering
(:class:`ThresholdGroups`), FL+HC's tree cut (:class:`TreeCut`), FedGroup's direction groups
(:class:`DirectionGroups`) and FedGWC's spectral splits (:class:`SpectralSplits`), with the decision rules they use.
The base part and the soft methods' rules (HCFL's splits and removals, CFL's test) are in
:mod:`fedcluster.tiers.adaptation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.cluster import KMeans

from fedcluster.tiers.adaptation import Adaptation, order_parts
from fedcluster.tiers.distance import cosine_similarity
from fedcluster.tiers.gaussian_weighting import best_spectral_split, interaction_affinity
from fedcluster.tiers.grouping import (
    Linkage,
    Metric,
    agglomerative_groups,
    decomposed_cosine,
    gap_threshold,
    kmeans_groups,
    merge_heights,
    most_similar,
    update_directions,
)


# -- ICFL ----------------------------------------------------------------------------------------------
def icfl_threshold(round_: int, alpha0: float, eps1: float) -> float:
    """α_t = 1 − (e/ε1)^{t/ε2} with ε2 = log(1 − α*(0)) / (1 − log ε1) (reference code ICFL aggregator; HCFL paper E.2
    uses α*(0) ∈ {0.85, 0.98}, ε1 = 4). It grows from 0 towards 1 with t (for ε1 > e), faster for small α*(0)."""
    eps2 = np.log(1.0 - alpha0) / (1.0 - np.log(eps1))
    return float(1.0 - (np.e / eps1) ** (round_ / eps2))


def icfl_connectivity(similarity: np.ndarray) -> float:
    """α_G = λ_1(A)/n, the largest eigenvalue of the cosine-similarity matrix A [n, n] over its size
    (reference code: top singular value; 1 for identical directions, 1 for n = 1)."""
    a = np.asarray(similarity, dtype=np.float64)
    if len(a) < 2:
        return 1.0
    return float(np.linalg.eigvalsh((a + a.T) / 2).max() / len(a))


def icfl_bipartition(similarity: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-means on the top-2 eigenvectors of A (rows = clients); 0/1 labels (group 0 keeps the id).
    reference code takes two rows of V from ``torch.svd`` (an indexing slip); the eigenvector embedding is used."""
    a = np.asarray(similarity, dtype=np.float64)
    if len(a) < 2:
        return np.zeros(len(a), dtype=np.int64)
    vals, vecs = np.linalg.eigh((a + a.T) / 2)
    emb = vecs[:, np.argsort(vals)[::-1][:2]]
    if len(np.unique(emb.round(12), axis=0)) < 2:
        return np.zeros(len(a), dtype=np.int64)
    return order_parts(KMeans(n_clusters=2, n_init=10, random_state=seed).fit_predict(emb))


# -- StoCFL --------------------------------------------------------------------------------------------
def stocfl_merges(representations: np.ndarray, valid: np.ndarray, tau: float) -> list[tuple[int, list[int]]]:
    """StoCFL's merge rule (reference code STOCFL aggregator): with A_ab = cos(r_a, r_b) of the cluster
    representations (computed once per round), scan a = 0, 1, … and fold every later b not yet absorbed with
    A_ab > τ into a. Clusters without a representation (``valid`` false) never merge. Returns [(a, [b, …])]."""
    k = len(representations)
    valid = np.asarray(valid, dtype=bool)
    sim = cosine_similarity(representations)
    absorbed: set[int] = set()
    out = []
    for a in range(k):
        if a in absorbed or not valid[a]:
            continue
        bs = [b for b in range(a + 1, k) if b not in absorbed and valid[b] and sim[a, b] > tau]
        if bs:
            absorbed.update(bs)
            out.append((a, bs))
    return out


# -- PACFL ---------------------------------------------------------------------------------------------
def threshold_clusters(distance: np.ndarray, threshold: float,
                       link: Literal["average", "complete", "single"] = "average") -> np.ndarray:
    """Agglomerative clustering that merges while the closest pair of clusters is ≤ ``threshold`` (PACFL's
    ``hierarchical_clustering`` with threshold ν; labels 0..K−1 in order of first appearance). reference code
    ``average`` replaces a merged row by the plain mean of the two rows (scipy's WPGMA ``weighted``),
    ``complete``/``single`` are its ``maximum``/``minimum``."""
    d = np.asarray(distance, dtype=np.float64)
    if len(d) < 2:
        return np.zeros(len(d), dtype=np.int64)
    d = np.maximum((d + d.T) / 2, 0.0)
    np.fill_diagonal(d, 0.0)
    method = {"average": "weighted", "complete": "complete", "single": "single"}[link]
    raw = fcluster(linkage(squareform(d, checks=False), method=method), t=threshold, criterion="distance")
    _, first = np.unique(raw, return_index=True)
    order = {lab: rank for rank, lab in enumerate(raw[np.sort(first)])}
    return np.array([order[v] for v in raw], dtype=np.int64)


# -- the parts ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ICFLSplits(Adaptation):
    """ICFL's connectivity split, asked by its round for each cluster (reference code ICFL aggregator; HCFL paper
    E.2): a cluster whose members' update-similarity connectivity α_G = λ_1(A)/n falls below α_t
    (:func:`icfl_threshold` from α*(0) = ``alpha0`` and ε1 = ``eps1``) is bi-partitioned by 2-means on the top-2
    eigenvectors of A (:func:`icfl_bipartition`)."""

    alpha0: float
    eps1: float

    def threshold(self, round_: int) -> float:
        """α_t of (0-based) round ``round_``."""
        return icfl_threshold(round_, self.alpha0, self.eps1)

    def cluster_split(self, similarity: np.ndarray, threshold: float, seed: int) -> tuple[float, np.ndarray | None]:
        """(α_G of a cluster's members with cosine similarities ``similarity``, their 0/1 labels when the cluster
        splits into two non-empty parts, None when it stays whole)."""
        connectivity = icfl_connectivity(similarity)
        if connectivity >= threshold:
            return connectivity, None
        labels = icfl_bipartition(similarity, seed)
        return connectivity, labels if 0 < labels.sum() < len(labels) else None


@dataclass(frozen=True)
class StoCFLMerges(Adaptation):
    """StoCFL's merges, asked by its round: clusters whose representations' cosine exceeds τ = ``tau`` fold into
    the first of them (:func:`stocfl_merges`)."""

    tau: float

    def merges(self, representations: np.ndarray, valid: np.ndarray) -> list[tuple[int, list[int]]]:
        return stocfl_merges(representations, valid, self.tau)


@dataclass(frozen=True)
class ThresholdGroups(Adaptation):
    """PACFL's one-shot clustering: hierarchical clustering of the clients' proximity matrix, merging while the
    closest clusters are ≤ ν = ``nu`` with ``link`` (:func:`threshold_clusters`)."""

    nu: float
    link: Literal["average", "complete", "single"] = "average"

    def groups(self, distance: np.ndarray) -> np.ndarray:
        return threshold_clusters(distance, self.nu, self.link)


@dataclass(frozen=True)
class TreeCut(Adaptation):
    """FL+HC's one-shot clustering of the clients' updates (Briggs et al. Alg. 1): the agglomerative tree with
    ``linkage`` and ``metric`` cut at ``num_clusters``, else at ``distance_threshold``, else at the threshold read off
    the tree's gap (:func:`~fedcluster.tiers.grouping.gap_threshold` with ``gap_ratio``; one cluster without one)."""

    linkage: Linkage = "ward"
    metric: Metric = "euclidean"
    distance_threshold: float | None = None
    num_clusters: int | None = None
    gap_ratio: float = 1.8

    def groups(self, updates: np.ndarray) -> np.ndarray:
        """Each client's cluster from its update [M, P]."""
        if self.num_clusters is not None:
            return agglomerative_groups(updates, self.linkage, self.metric, None, self.num_clusters)
        threshold = self.distance_threshold
        if threshold is None:
            threshold = gap_threshold(merge_heights(updates, self.linkage, self.metric), self.gap_ratio)
            if threshold is None:
                return np.zeros(len(updates), dtype=np.int64)
        return agglomerative_groups(updates, self.linkage, self.metric, threshold, None)


@dataclass(frozen=True)
class DirectionGroups(Adaptation):
    """FedGroup's groups (Duan et al. Sec. IV): the cold start K-means into ``num_groups`` groups on the decomposed
    cosine of the pre-trained clients' updates to their top singular directions (EDC), and a newcomer joins the
    group whose cold-start direction its update is most cosine-similar to."""

    num_groups: int

    def groups(self, updates: np.ndarray, seed: int) -> np.ndarray:
        """Labels of the cold start's clients from their updates [n, P]."""
        return kmeans_groups(decomposed_cosine(updates, update_directions(updates, self.num_groups)), self.num_groups,
                             seed)

    def newcomers(self, updates: np.ndarray, directions: np.ndarray) -> np.ndarray:
        """The group of each newcomer from its update [n, P] and the groups' directions [K, P]."""
        return most_similar(updates, directions)


@dataclass(frozen=True)
class SpectralSplits(Adaptation):
    """FedGWC's split of a converged cluster (Licciardi et al. Sec. 3.3–3.4): spectral clustering of the RBF affinity
    (β = ``beta``, ``perception`` vectors) of its interaction matrix into 2 … ``max_clusters`` parts, kept when the
    best Davies–Bouldin score is below 1. A split needs interactions: the parts tried are also at most
    n_c / m, the cluster's size over the members sampled in a round (the authors' code's cap), so a cluster whose
    every member is sampled each round (P's rows constant, its columns equal: eq. 5 then records no interaction)
    stays whole."""

    beta: float
    perception: Literal["row", "column"] = "row"
    max_clusters: int = 4

    def split(self, interaction: np.ndarray, sampled: int, seed: int) -> np.ndarray | None:
        """Each member's part, or None when the cluster stays whole; ``sampled``: its members in this round."""
        parts = min(self.max_clusters, len(interaction) // max(sampled, 1))
        if parts < 2:
            return None
        return best_spectral_split(interaction_affinity(interaction, self.beta, self.perception), parts, seed)

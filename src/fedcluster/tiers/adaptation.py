"""Tier 3 — the adaptive clustering procedure: how K^t changes during a run (HCFL paper Sec. 3.1 / 4.3, Alg. 1
steps 5–7, Alg. 2, 4, 5), as parts a method holds and the decision rules they use. How a decided change applies to
the models and weights is the cluster book's (:mod:`fedcluster.tiers.cluster_book`); the client distance a split
reads is a tier-4 part of :mod:`fedcluster.tiers.distance`.

Decisions — ``fixed`` (never changes K); ``cfl`` (:class:`CFLRule`: Sattler's ‖mean Δθ‖ < tol1 and max ‖Δθ_i‖ > tol2
test, complete-linkage bi-partition on cosine distances); ``split`` / ``split-remove`` (HCFL+: :func:`choose_split`
with the eq. 8 test :func:`split_gap`, :func:`removal_set`); ``icfl`` (:func:`icfl_threshold`,
:func:`icfl_connectivity`, :func:`icfl_bipartition`); ``merge`` (StoCFL: :func:`stocfl_merges`); adaptive FedRC's
:func:`low_mass_clusters`; PACFL's one-shot :func:`threshold_clusters`.

Within a round (HCFL paper Alg. 2 lines 11–31) a part is asked, in this order: which positions to remove after the
split (:meth:`Adaptation.removals`, decided from the round's Ω before any change), which clusters to split
(:meth:`Adaptation.splits`, from the cohort's ω̃ and a :class:`~fedcluster.tiers.distance.CohortView`), and, after
both, which low-mass clusters to drop by FedRC's rule (:meth:`Adaptation.low_mass`). :data:`ADAPTATIONS` maps the
``adaptive`` names of ``algorithm=hcfl`` to parts. A hard method's round asks its own part: CFL's
:class:`CFLSplits`, ICFL's :class:`ICFLSplits`, StoCFL's :class:`StoCFLMerges`, PACFL's :class:`ThresholdGroups`,
FL+HC's :class:`TreeCut`, FedGroup's :class:`DirectionGroups`, FedGWC's :class:`SpectralSplits` (:class:`InRound`
names a rule a round applies itself, for a method of one's own).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.cluster import AgglomerativeClustering, KMeans

from fedcluster.tiers.distance import ClientDistance, CohortView, cluster_matrices, cosine_distance, cosine_similarity
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

Split = tuple[int, np.ndarray, np.ndarray]  # (k*, cohort rows of C_{k*,1}, cohort rows of C_{k*,2})
_NONE = np.zeros(0, np.int64)


# -- split decisions -------------------------------------------------------------------------------------
def bipartition(distance: np.ndarray) -> np.ndarray:
    """Labels 0/1 of a complete-linkage agglomerative clustering into 2 groups on a precomputed distance
    matrix (CFL's bi-partition, Sattler et al. via reference code; HCFL paper E.1-9 for HCFL+). Fewer than 2 rows:
    zeros."""
    d = np.asarray(distance, dtype=np.float64)
    if len(d) < 2:
        return np.zeros(len(d), dtype=np.int64)
    d = np.maximum((d + d.T) / 2, 0.0)
    np.fill_diagonal(d, 0.0)
    return AgglomerativeClustering(n_clusters=2, metric="precomputed", linkage="complete").fit(d).labels_.astype(
        np.int64)


def order_parts(labels: np.ndarray) -> np.ndarray:
    """Relabel a 0/1 partition so that group 0 (which keeps the old cluster id) is the larger one, ties going to
    the group of the first row — a deterministic choice; the papers do not say which half keeps the id."""
    labels = np.asarray(labels, dtype=np.int64)
    n1 = int(labels.sum())
    n0 = len(labels) - n1
    if n1 > n0 or (n1 == n0 and len(labels) and labels[0] == 1):
        return 1 - labels
    return labels


def cfl_statistics(updates: torch.Tensor | np.ndarray) -> tuple[float, float]:
    """(‖(1/n) Σ_i Δθ_i‖, max_i ‖Δθ_i‖) of a cluster's flattened updates [n, P] (Sattler et al.'s
    ``compute_mean_update_norm`` / ``compute_max_update_norm``: plain mean, not N_i-weighted)."""
    if len(updates) == 0:
        return 0.0, 0.0
    v = torch.as_tensor(updates).reshape(len(updates), -1).double()
    return float(v.mean(0).norm()), float(v.norm(dim=1).max())


@dataclass(frozen=True)
class CFLRule:
    """CFL's split rule (Sattler et al./A.7): a cluster c with |c| > 2 (``min_size`` = 3) is
    bi-partitioned when ‖mean_{i∈c} Δθ_i‖ < tol1 and max_{i∈c} ‖Δθ_i‖ > tol2, from round ``warmup`` on
    (0-based; Sattler's code splits only when c_round > 20, i.e. warmup = 20), never beyond ``max_clusters``
    ("CFL (3)" of FedRC paper; reference code caps at 100). The parts come from complete linkage on 1 − cos(Δθ_i,
    Δθ_j)."""

    tol1: float = 0.4
    tol2: float = 1.6
    warmup: int = 20
    max_clusters: int | None = None
    min_size: int = 3

    def test(self, mean_norm: float, max_norm: float, size: int) -> bool:
        return mean_norm < self.tol1 and max_norm > self.tol2 and size >= self.min_size

    def splits(self, round_: int, groups: Sequence[np.ndarray], updates: torch.Tensor, k: int
               ) -> tuple[list[tuple[int, np.ndarray]], list[tuple[float, float]]]:
        """For clusters ``groups[pos]`` (row indices into ``updates`` [m, P]) return the splits
        [(pos, labels over groups[pos], 0 = stays)] and every cluster's (mean norm, max norm)."""
        stats, out = [], []
        for pos, rows in enumerate(groups):
            mean_norm, max_norm = cfl_statistics(updates[torch.as_tensor(rows, dtype=torch.long)])
            stats.append((mean_norm, max_norm))
            room = self.max_clusters is None or k + len(out) < self.max_clusters
            if round_ >= self.warmup and room and self.test(mean_norm, max_norm, len(rows)):
                labels = order_parts(bipartition(cosine_distance(updates[torch.as_tensor(rows)])))
                if 0 < labels.sum() < len(labels):
                    out.append((pos, labels))
        return out, stats


def split_gap(distance: np.ndarray, include_diagonal: bool = True) -> float:
    """max(D_k) − mean(D_k), the left side of HCFL paper eq. 8. reference code averages the whole matrix, diagonal
    included (``include_diagonal=True``); otherwise the mean is over the off-diagonal entries."""
    d = np.asarray(distance, dtype=np.float64)
    if d.size == 0:
        return 0.0
    if include_diagonal or len(d) < 2:
        return float(d.max() - d.mean())
    off = d[~np.eye(len(d), dtype=bool)]
    return float(d.max() - off.mean())


def choose_split(matrices: Sequence[np.ndarray], rho: float, include_diagonal: bool = True, strict: bool = False
                 ) -> tuple[int, np.ndarray] | None:
    """HCFL paper Alg. 2 lines 21–23: k* = argmax_k max(D_k) (E.1-6), split it if max(D_{k*}) − mean(D_{k*}) ≥ ρ
    (eq. 8; ``strict`` uses ">" as the reference code does) into the two complete-linkage groups of D_{k*}
    (E.1-9). Returns (k*, labels over the rows of D_{k*}, 0 = stays in k*) or None."""
    best, best_max = None, -np.inf
    for k, d in enumerate(matrices):
        if len(d) >= 2 and float(np.max(d)) > best_max:
            best, best_max = k, float(np.max(d))
    if best is None:
        return None
    gap = split_gap(matrices[best], include_diagonal)
    if (gap > rho) if strict else (gap >= rho):
        labels = order_parts(bipartition(matrices[best]))
        if 0 < labels.sum() < len(labels):
            return best, labels
    return None


def removal_set(omega_tilde: np.ndarray) -> np.ndarray:
    """HCFL paper Alg. 2 lines 12–19: R^t = positions k that no client weights highest (c_i = argmax_k ω̃_{i;k})."""
    w = np.asarray(omega_tilde)
    return np.setdiff1d(np.arange(w.shape[1]), w.argmax(1))


def low_mass_clusters(gamma: np.ndarray, delta: float) -> np.ndarray:
    """Adaptive FedRC (FedRC paper App. H.4 Alg. 3 step 1): positions k with (1/N) Σ_{i,j} γ_{i,j;k} < δ."""
    return np.flatnonzero(np.asarray(gamma, dtype=np.float64).mean(0) < delta)


# -- ICFL ------------------------------------------------------------------------------------------
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


# -- the tier-3 parts a method holds ---------------------------------------------------------------
class Adaptation:
    """Base of the tier-3 parts; on its own (``fixed``) K never changes."""

    sends_weights: ClassVar[bool] = False  # clients upload ω̃ (K numbers) for the decision

    def columns(self) -> dict[str, float]:
        """The round's extra ``rounds.csv`` columns before any decision (NaN: not tested)."""
        return {"split_gap": float("nan")}

    def removals(self, omega: np.ndarray, round_: int) -> np.ndarray:
        return _NONE

    def splits(self, round_: int, omega: np.ndarray, view: CohortView, extra: dict[str, float]) -> list[Split]:
        return []

    def low_mass(self, gamma: np.ndarray, round_: int) -> np.ndarray:
        return _NONE


class Fixed(Adaptation):
    pass


@dataclass(frozen=True)
class InRound(Adaptation):
    """K changes by a rule the method's own round applies (``rule`` names it); the part is asked for nothing."""

    rule: str


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
    best Davies–Bouldin score is below 1."""

    beta: float
    perception: Literal["row", "column"] = "row"
    max_clusters: int = 4

    def split(self, interaction: np.ndarray, seed: int) -> np.ndarray | None:
        """Each member's part, or None when the cluster stays whole."""
        return best_spectral_split(interaction_affinity(interaction, self.beta, self.perception), self.max_clusters,
                                   seed)


@dataclass(frozen=True)
class CFLSplits(Adaptation):
    """Sattler's CFL on every cluster: tol1/tol2 on the members' updates, complete linkage on their cosine."""

    rule: CFLRule
    sends_weights: ClassVar[bool] = True

    def columns(self) -> dict[str, float]:
        return {**super().columns(), "mean_update_norm": float("nan"), "max_update_norm": float("nan")}

    def splits(self, round_: int, omega: np.ndarray, view: CohortView, extra: dict[str, float]) -> list[Split]:
        return self.member_splits(round_, omega.argmax(1), omega.shape[1], view.updates(), extra)

    def member_splits(self, round_: int, members: np.ndarray, k: int, updates: torch.Tensor,
                      extra: dict[str, float]) -> list[Split]:
        """The splits of the K clusters from the cohort's positions ``members`` [m] and updates [m, P] (a hard
        method's round: CFL), with the round's largest ‖mean Δθ‖ and ‖Δθ_i‖ in ``extra``."""
        groups = [np.flatnonzero(members == j) for j in range(k)]
        found, stats = self.rule.splits(round_, groups, updates, k)
        active = [s for s, g in zip(stats, groups, strict=True) if len(g)]
        extra.update(mean_update_norm=max((s[0] for s in active), default=float("nan")),
                     max_update_norm=max((s[1] for s in active), default=float("nan")))
        return [(j, groups[j][labels == 0], groups[j][labels == 1]) for j, labels in found]


@dataclass(frozen=True)
class GapSplits(Adaptation):
    """HCFL paper eq. 8: k* = argmax_k max D_k over the confidence-weighted (``confidence``) distance matrices of the
    sampled members, split when max D_{k*} − mean D_{k*} ≥ ρ (``strict``: >), bi-partition by complete linkage;
    with ``remove``, also Alg. 2 lines 13–19: remove the clusters nobody weights highest."""

    distance: ClientDistance
    rho: float = 0.1
    include_diagonal: bool = True
    strict: bool = False
    confidence: bool = True
    warmup: int = 0
    max_clusters: int | None = None
    remove: bool = False
    sends_weights: ClassVar[bool] = True

    def removals(self, omega: np.ndarray, round_: int) -> np.ndarray:
        return removal_set(omega) if self.remove and round_ >= self.warmup else _NONE

    def splits(self, round_: int, omega: np.ndarray, view: CohortView, extra: dict[str, float]) -> list[Split]:
        k = omega.shape[1]
        if round_ < self.warmup or (self.max_clusters is not None and k >= self.max_clusters):
            return []
        groups, mats = cluster_matrices(self.distance.matrix(view), omega, weighted=self.confidence)
        tested = [j for j in range(k) if len(mats[j]) >= 2]
        if tested:
            star = max(tested, key=lambda j: float(mats[j].max()))
            extra["split_gap"] = split_gap(mats[star], self.include_diagonal)
        choice = choose_split(mats, self.rho, self.include_diagonal, self.strict)
        if choice is None:
            return []
        j, labels = choice
        return [(j, groups[j][labels == 0], groups[j][labels == 1])]


@dataclass(frozen=True)
class LowMass(Adaptation):
    """Adaptive FedRC (FedRC paper App. H.4 Alg. 3): remove k when (1/N) Σ_{i,j} γ_{i,j;k} < δ, never every model
    (the heaviest stays)."""

    delta: float = 0.05
    warmup: int = 0

    def low_mass(self, gamma: np.ndarray, round_: int) -> np.ndarray:
        if round_ < self.warmup:
            return _NONE
        low = low_mass_clusters(gamma, self.delta)
        if len(low) == gamma.shape[1]:
            low = np.setdiff1d(low, [int(gamma.sum(0).argmax())])
        return low


def _gap(p: Any, distance: ClientDistance, remove: bool) -> GapSplits:
    return GapSplits(distance, p.rho, p.include_diagonal, p.strict, p.confidence, p.warmup, p.max_clusters, remove)


# the ``adaptive`` names of algorithm=hcfl → the part, from the method's parameters and its tier-4 part
ADAPTATIONS: dict[str, Callable[[Any, ClientDistance], Adaptation]] = {
    "fixed": lambda p, d: Fixed(),
    "cfl": lambda p, d: CFLSplits(CFLRule(p.tol1, p.tol2, p.warmup, p.max_clusters, p.min_size)),
    "split": lambda p, d: _gap(p, d, remove=False),
    "split-remove": lambda p, d: _gap(p, d, remove=True),
    "low-mass": lambda p, d: LowMass(p.delta, p.warmup),
}

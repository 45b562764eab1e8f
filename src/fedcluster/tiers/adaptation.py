"""Tier 3 — the adaptive clustering procedure: how K^t changes during a run (HCFL paper Sec. 3.1 / 4.3, Alg. 1
steps 5–7, Alg. 2, 4, 5), as parts a method holds and the decision rules they use. How a decided change applies to
the models and weights is the cluster book's (:mod:`fedcluster.tiers.cluster_book`); the client distance a split
reads is a tier-4 part of :mod:`fedcluster.tiers.distance`.

Decisions — ``fixed`` (never changes K); ``cfl`` (:class:`CFLRule`: Sattler's ‖mean Δθ‖ < tol1 and max ‖Δθ_i‖ > tol2
test, complete-linkage bi-partition on cosine distances); ``split`` / ``split-remove`` (HCFL+: :func:`choose_split`
with the eq. 8 test :func:`split_gap`, :func:`removal_set`); adaptive FedRC's :func:`low_mass_clusters`. The hard
methods' own rules (ICFL, StoCFL, PACFL, FL+HC, FedGroup, FedGWC) are in :mod:`fedcluster.tiers.regrouping`.

Within a round (HCFL paper Alg. 2 lines 11–31) a part is asked, in this order: which positions to remove after the
split (:meth:`Adaptation.removals`, decided from the round's Ω before any change), which clusters to split
(:meth:`Adaptation.splits`, from the cohort's ω̃ and a :class:`~fedcluster.tiers.distance.CohortView`), and, after
both, which low-mass clusters to drop by FedRC's rule (:meth:`Adaptation.low_mass`). :data:`ADAPTATIONS` maps the
``adaptive`` names of ``algorithm=hcfl`` to parts. A hard method's round asks its own part: CFL's
:class:`CFLSplits` here, the others' in :mod:`fedcluster.tiers.regrouping` (:class:`InRound` names a rule a round
applies itself, for a method of one's own).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.cluster import AgglomerativeClustering

from fedcluster.tiers.distance import ClientDistance, CohortView, cluster_matrices, cosine_distance

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
        stats: list[tuple[float, float]] = []
        out: list[tuple[int, np.ndarray]] = []
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

"""Tier 3 as parts a method holds: how K^t changes during a run (the rules themselves are the functions of
:mod:`fedcluster.tiers.adaptive`; the client distance they split on is a tier-4 part of
:mod:`fedcluster.tiers.distance`).

Within a round (HCFL paper Alg. 2 lines 11–31) a part is asked, in this order: which positions to remove after the
split (:meth:`Adaptation.removals`, decided from the round's Ω before any change), which clusters to split
(:meth:`Adaptation.splits`, from the cohort's ω̃ and a :class:`~fedcluster.tiers.distance.CohortView`), and, after
both, which low-mass clusters to drop by FedRC's rule (:meth:`Adaptation.low_mass`). :data:`ADAPTATIONS` maps the
``adaptive`` names of ``algorithm=hcfl`` to parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from fedcluster.tiers.adaptive import CFLRule, choose_split, low_mass_clusters, removal_set, split_gap
from fedcluster.tiers.distance import ClientDistance, CohortView, cluster_matrices

Split = tuple[int, np.ndarray, np.ndarray]  # (k*, cohort rows of C_{k*,1}, cohort rows of C_{k*,2})
_NONE = np.zeros(0, np.int64)


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


@dataclass
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


@dataclass
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


@dataclass
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

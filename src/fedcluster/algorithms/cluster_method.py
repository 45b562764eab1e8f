"""The one base of the cluster methods, soft and hard: K^t stacked cluster models in one
:class:`~fedcluster.tiers.cluster_state.ClusterState`, the tier-3 part that decides how K changes, and what every
such method writes and saves the same way.

* The round: :meth:`ClusterMethod.run_round` runs the family's :meth:`~ClusterMethod.step` (the soft/EM family's is
  one template over a :class:`~fedcluster.algorithms.round_plan.RoundPlan`; the hard family's methods write theirs),
  lets the family bring its weights up to date (:meth:`~ClusterMethod.after_step`), then writes the
  ``splits``/``merges``/``removals`` columns (when K can change) and the ``clusters.jsonl`` line, both from the
  cluster state.
* K changes: :meth:`~ClusterMethod.split_cluster`, :meth:`~ClusterMethod.merge_clusters`,
  :meth:`~ClusterMethod.remove_clusters` and a one-shot :meth:`~ClusterMethod.regroup` go through the state (soft
  splits: :meth:`ClusterState.split`), which keeps models, weights, the clients' positions and the
  :class:`~fedcluster.tiers.cluster_book.ClusterBook` (stable ids, the log of every change) consistent. A method
  whose K can change (``fixed_clusters = False``) starts with a book.
* Saved state: the fields the classes along the method's bases declare (:mod:`fedcluster.tiers.saved_fields`; the
  rounds done here, each client's position when the state keeps one and the book when K can change);
  :meth:`~ClusterMethod.state_problem` checks them on resume.
* Bytes on the wire (:meth:`~ClusterMethod.nbytes`): a shared feature extractor (``split``) counts once.

The two families are thin subclasses: :class:`~fedcluster.algorithms.clustered.ClusteredAlgorithm` (the soft/EM
machinery over Ω and γ) and :class:`~fedcluster.algorithms.hardclusters.HardClusters` (each client in one cluster).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from fedcluster.algorithms.base import Algorithm, Context, RoundResult
from fedcluster.algorithms.parts import required
from fedcluster.engine.params import Params, num_bytes, subset
from fedcluster.tiers.adaptation import Adaptation
from fedcluster.tiers.cluster_book import ClusterBook
from fedcluster.tiers.saved_fields import StateField
from fedcluster.tiers.saved_kinds import Book, Counts, Positions
from fedcluster.tracking.clusters import sample_groups


class ClusterMethod(Algorithm):
    """K^t cluster models ``models`` (passed to the constructor) and the tier-3 part ``adaptation`` (required:
    ``Fixed()`` for a fixed K, :class:`~fedcluster.tiers.adaptation.InRound` for a rule the round applies itself);
    ``split``: the models share one feature extractor (``body.*``). Subclasses implement :meth:`step`."""

    rounds_done = StateField[int](Counts(at_most_rounds=True))  # completed rounds
    # each client's hard position (−1: none yet), when the state keeps one (K can change, or the method sets it)
    assigned = StateField[np.ndarray](Positions(unassigned=True), kept=lambda alg: alg.state.assigned is not None)
    book = StateField[ClusterBook | None](Book(), kept=lambda alg: alg.book is not None)  # when K can change

    def __init__(self, ctx: Context, params: Any, *, models: Params, adaptation: Adaptation,
                 split: bool = False) -> None:
        super().__init__(ctx, params)
        self.adaptation: Adaptation = required(adaptation, Adaptation, "adaptation (tiers 3–4)")
        self.split = split
        self.models = models
        self.rounds_done = 0  # completed rounds
        self._round = 0  # 1-based label of the round in progress (the rounds of split/merge/remove events)
        self._groups = sample_groups(ctx.fed)
        self._owner = ctx.fed.train.owner()  # the client of every training row
        if not self.fixed_clusters:
            self.book = ClusterBook.start(self.num_clusters)
            self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)

    # -- the round -----------------------------------------------------------------------------
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        self._round = round_ + 1
        clients = np.asarray(clients, dtype=np.int64)
        res = self.step(round_, clients)
        self.after_step(clients)
        self.rounds_done = round_ + 1
        if self.book is not None:
            res.extra.update(self.state.changes(self._round))
        if res.clusters is None:
            res.clusters = self.clusters_record()
        return res

    @abstractmethod
    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        """One round of the method (weights, local training, aggregation, K changes)."""

    def after_step(self, clients: np.ndarray) -> None:
        """Hook: what the family keeps up to date after every round (Ω of a hard state, the clients estimated)."""

    def clusters_record(self) -> dict[str, Any]:
        """The round's ``clusters.jsonl`` line (:meth:`ClusterState.record`)."""
        return self.state.record(self._groups, self._owner)

    @property
    def body_shared(self) -> bool:
        """Whether the K models share φ (``split``): the body then runs once per row."""
        return self.split

    # -- cluster changes (models, weights, positions, ids) ---------------------------------------------
    def split_cluster(self, position: int, movers: np.ndarray) -> int:
        """Split ``movers`` (client ids) off ``position`` into a new cluster starting from a copy of its model."""
        return self.state.split_copy(position, movers, self._round)

    def merge_clusters(self, groups: list[tuple[int, list[int]]], models: Params | None = None) -> np.ndarray:
        """Fold the absorbed positions of each (keep, absorbed) into keep; ``models`` (the full stack before
        the drop, e.g. merged averages) replaces the current one. Returns the kept positions."""
        keep = self.state.merge(groups, self._round, models)
        self.on_reindex(keep)
        return keep

    def remove_clusters(self, positions: list[int] | np.ndarray, rule: str = "alg5") -> np.ndarray:
        """Delete clusters (a hard state: clusters without members; a soft one renormalises its weights by
        ``rule``, :meth:`ClusterState.remove`). Returns the kept positions."""
        keep = self.state.remove(positions, round_=self._round, owner=self._owner, rule=rule)
        self.on_reindex(keep)
        return keep

    def regroup(self, models: Params, clients: np.ndarray, positions: np.ndarray) -> None:
        """A one-shot clustering: ``models`` [K, ...] become the clusters (ids 0..K−1, a fresh book) and ``clients``
        take the hard ``positions``."""
        self.state.regroup(models, clients, positions)

    def on_reindex(self, keep: np.ndarray) -> None:
        """Hook: per-cluster state of a subclass follows the kept positions."""

    # -- communication -------------------------------------------------------------------------
    def nbytes(self, models: int, body: bool = True) -> int:
        """Bytes of ``models`` cluster models (split: φ once, if ``body``, plus that many heads)."""
        one = {n: v[0] for n, v in self.models.items()}
        if not self.split:
            return models * num_bytes(one)
        return (num_bytes(subset(one, "body.")) if body else 0) + models * num_bytes(subset(one, "head."))

    def model_bytes(self) -> int:
        """Bytes of one cluster model."""
        return self.nbytes(1)

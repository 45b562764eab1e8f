"""Shared machinery of the adaptive hard-clustering methods (CFL, ICFL, StoCFL, PACFL): K^t clusters with
stable ids, each client in exactly one of them.

State: the model stack (position k = cluster ``book.ids[k]``), ``cluster[i]`` = position of client i's
cluster, Ω = one-hot(cluster) (kept in sync after every round), and the :class:`ClusterBook` with the log of
every split, merge and removal. One round trains every sampled client from its cluster's model in ONE
trainer call; clusters change through :meth:`split_cluster`, :meth:`merge_clusters`, :meth:`remove_clusters`,
which the cluster state carries out (:class:`~fedcluster.tiers.cluster_state.ClusterState`), keeping models, the
clients' positions and ids consistent; Ω follows at the end of the round.

Per round the run directory gets: ``rounds.csv`` columns ``splits``, ``merges``, ``removals`` (events this
round; ``num_clusters`` is K^t), and a ``clusters.jsonl`` record with each cluster's data makeup (as for the
fixed-K methods, one row per position), the stable ``ids`` of the positions and this round's ``events``.
The whole event log is in the checkpoint (``state_dict()["book"]``).

Aggregation: θ_k ← θ_k + η_g Σ_{i∈S^t∩k} N_i (θ_i − θ_k) / Σ N_i; a cluster without
sampled members is unchanged. Test clients take the cluster with the lowest loss on their labelled data (FedRC paper
H.8, as the reference code does for CFL/ICFL/StoCFL); a participating client predicts with its own cluster's model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedcluster.algorithms.base import Algorithm, Context, RoundResult
from fedcluster.algorithms.parts import required
from fedcluster.algorithms.state_checks import first_problem, integers_within, num_models
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation import inference
from fedcluster.engine.params import Params, flatten, num_bytes, repeat, select
from fedcluster.engine.solver import Solver
from fedcluster.tiers.adaptation import Adaptation
from fedcluster.tiers.aggregation import cluster_update
from fedcluster.tiers.cluster_book import ClusterBook
from fedcluster.tiers.cluster_state import StateField
from fedcluster.tracking.clusters import sample_groups


class HardClusters(Algorithm):
    """K^t hard clusters with stable ids; subclasses implement :meth:`step`. ``cluster`` is the state's hard
    position of every client. The constructor takes the clusters at the start ``k0`` and the tier-3 part
    ``adaptation``, both required (:class:`~fedcluster.tiers.adaptation.InRound` names a rule the round applies
    itself)."""

    cluster: np.ndarray = StateField("assigned")  # type: ignore[assignment]
    book: ClusterBook = StateField()  # type: ignore[assignment]
    rounds_done: int = StateField()  # type: ignore[assignment]
    saved = ("cluster", "book", "rounds_done")

    def __init__(self, ctx: Context, params: Any, *, k0: int, adaptation: Adaptation) -> None:
        super().__init__(ctx, params)
        self.adaptation: Adaptation = required(adaptation, Adaptation, "adaptation (tier 3)")
        self.models = repeat({n: v[0] for n, v in ctx.fresh_models(1).items()}, k0)  # all from θ^0
        self.book = ClusterBook.start(k0)
        self.cluster = np.zeros(ctx.fed.num_clients, dtype=np.int64)
        self.rounds_done = 0
        self._round = 0  # 1-based label of the round in progress (event rounds)
        self._groups = sample_groups(ctx.fed)
        self._owner = ctx.fed.train.owner()
        self.sync()

    # -- the round -----------------------------------------------------------------------------
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        self._round = round_ + 1
        res = self.step(round_, np.asarray(clients, dtype=np.int64))
        self.sync()
        self.rounds_done = round_ + 1
        res.extra.update(self.state.changes(self._round))
        res.clusters = self.state.record(self._groups, self._owner)
        return res

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        raise NotImplementedError

    def sync(self) -> None:
        """Ω = one-hot of the hard assignment."""
        self.omega = np.eye(self.num_clusters)[self.cluster]

    # -- training and aggregation ------------------------------------------------------------
    def train(self, round_: int, clients: np.ndarray, positions: np.ndarray, solver: Solver | None = None,
              anchor: Params | None = None) -> tuple[Params, torch.Tensor]:
        """Every client trained from its cluster's model in one trainer call → (local stack [m, ...],
        flattened updates Δθ_i = θ_i − θ_{k_i} [m, P])."""
        init = select(self.models, positions)
        local = self.ctx.trainer.train(init, clients, solver or self.ctx.solver, round_, anchor=anchor)
        return local, flatten(local) - flatten(init)

    def fedavg(self, clients: np.ndarray, local: Params, positions: np.ndarray) -> None:
        """Per-cluster N_i-weighted server update of every position from the cohort's ``local`` models."""
        k = self.num_clusters
        a = torch.as_tensor(np.eye(k)[positions] * self.ctx.fed.train.sizes[clients][:, None], dtype=torch.float64,
                            device=self.ctx.device)
        self.models = cluster_update(self.models, local, a, self.ctx.cfg.global_lr)

    # -- cluster changes (models, Ω, ids) ----------------------------------------------------
    def split_cluster(self, position: int, movers: np.ndarray) -> int:
        """Split ``movers`` (client ids) off ``position`` into a new cluster starting from a copy of its model."""
        return self.state.split_copy(position, movers, self._round)

    def merge_clusters(self, groups: list[tuple[int, list[int]]], models: Params | None = None) -> np.ndarray:
        """Fold the absorbed positions of each (keep, absorbed) into keep; ``models`` (the full stack before
        the drop, e.g. merged averages) replaces the current one. Returns the kept positions."""
        keep = self.state.merge(groups, self._round, models)
        self.on_reindex(keep)
        return keep

    def remove_clusters(self, positions: list[int] | np.ndarray) -> np.ndarray:
        """Delete clusters that have no members. Returns the kept positions."""
        keep = self.state.remove(positions, round_=self._round)
        self.on_reindex(keep)
        return keep

    def on_reindex(self, keep: np.ndarray) -> None:
        """Hook: per-cluster state of a subclass follows the kept positions."""

    # -- communication -----------------------------------------------------------------------
    def model_bytes(self) -> int:
        return num_bytes({n: v[0] for n, v in self.models.items()})

    # -- evaluation --------------------------------------------------------------------------
    @torch.no_grad()
    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """Participating clients: their own cluster's model only, as one [1, N, out] stack with weight 1 (= the
        Ω-mix for one-hot Ω, without running all K^t models on every row); test clients: the base rule
        (lowest-loss cluster)."""
        if not participating:
            return super().prediction(split, participating)
        pos = self.cluster[split.owner()]
        ones = torch.ones(split.num_clients, 1, device=split.x.device)
        if inference.row_budget(split.x.device) is not None:  # the clusters vmapped, not one call each
            models = {n: v.unsqueeze(1) for n, v in self.models.items()}
            return inference.StackForward(self.ctx.module).grouped(models, split.x, np.arange(len(pos)), pos), ones
        return self.chosen_outputs(split, self.cluster)

    # -- checkpoints --------------------------------------------------------------------------
    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """Every client's position names one of the models; the book has one distinct id per model, each below
        its next id, and events it can read; the rounds done are those of the checkpoint at most."""
        k = num_models(state)
        problem = first_problem(super().state_problem(state, rounds),
                                integers_within(state["cluster"], "cluster", 0, k - 1),
                                integers_within([state["rounds_done"]], "rounds_done", 0, rounds))
        if problem is not None:
            return problem
        try:
            book = ClusterBook.from_state(state["book"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return "algorithm.book (the clusters' ids and events) cannot be read"
        if len(book.ids) != k or len(set(book.ids)) != k or min(book.ids) < 0 or max(book.ids) >= book.next_id:
            return (f"algorithm.book.ids {book.ids[:5]} are not {k} distinct cluster ids below next_id "
                    f"{book.next_id}")
        return None

"""The hard family of cluster methods (CFL, FedGroup, FedGWC, FL+HC, ICFL, PACFL, StoCFL) over the shared base
:class:`~fedcluster.algorithms.cluster_method.ClusterMethod`: K^t clusters with stable ids, each client in exactly one
of them.

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

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.cluster_method import ClusterMethod
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation import inference
from fedcluster.engine.params import Params, flatten, repeat, select
from fedcluster.engine.solver import Solver
from fedcluster.tiers.adaptation import Adaptation
from fedcluster.tiers.aggregation import cluster_update
from fedcluster.tiers.saved_fields import StateField
from fedcluster.tiers.saved_kinds import Positions


class HardClusters(ClusterMethod):
    """K^t hard clusters with stable ids (:class:`~fedcluster.algorithms.cluster_method.ClusterMethod`); subclasses
    implement :meth:`step` and keep it: this family is not on the soft/EM family's round template
    (:meth:`~fedcluster.algorithms.clustered.ClusteredAlgorithm.step` over a round plan). Its rounds read the cohort's
    updates Δθ_i (:meth:`train`) and change K inside the round (CFL's and ICFL's splits, StoCFL's merges toward a
    global model, FedGWC's loss trajectories) or regroup every client once (PACFL, FL+HC, FedGroup). ``cluster`` is
    the state's hard position of every client. The constructor takes the clusters at the start ``k0`` and the tier-3
    part ``adaptation``, both required (:class:`~fedcluster.tiers.adaptation.InRound` names a rule the round applies
    itself)."""

    # the state's ``assigned`` under the name ``cluster`` (saved so; every client is in one: never −1)
    cluster = StateField[np.ndarray](Positions(), path="assigned")

    def __init__(self, ctx: Context, params: Any, *, k0: int, adaptation: Adaptation) -> None:
        super().__init__(ctx, params, models=repeat({n: v[0] for n, v in ctx.fresh_models(1).items()}, k0),
                         adaptation=adaptation)  # all from θ^0
        self.cluster = np.zeros(ctx.fed.num_clients, dtype=np.int64)
        self.sync()

    def after_step(self, clients: np.ndarray) -> None:
        self.sync()

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

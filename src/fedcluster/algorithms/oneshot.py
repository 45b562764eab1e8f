"""One-shot clustering (Ghosh, Hong, Yin, Ramchandran 2019; FedMD paper ref. [29]/A.7).

1. First round: every client of the cohort fits its own model on its local data (``local_epochs``
   epochs of local SGD from the common initial model θ^0);
2. the server runs k-means (K clusters) once on the local models θ_i — exactly, on the Euclidean
   embedding of their Gram matrix (m × m, so the dimension of the models does not matter) — and sets each θ_k to the
   N_i-weighted mean of its members' models;
3. later rounds: FedAvg inside each fixed cluster. The clustering is never revisited; a client first seen
   after round 1 (partial participation) joins the cluster with the lowest loss on its data.

Tier view: tier 2 ``hard-distance`` computed once (k-means distance), fixed K. With ``split``, k-means
uses the whole local models and φ is then shared. Test clients take the lowest-loss cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.cluster import KMeans

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams, replace_solver
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.engine.params import Params, flatten
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.weighting import HardLoss, best_cluster

PAPER = ("Avishek Ghosh, Justin Hong, Dong Yin, Kannan Ramchandran. Robust Federated Learning in a Heterogeneous "
         "Environment. arXiv:1906.06629, 2019.")


@dataclass
class OneShotParams(ClusteredParams):
    local_epochs: int = ranged(5, ">= 1")  # epochs of the one-shot local fit


def kmeans_models(local: torch.Tensor, k: int, seed: int) -> np.ndarray:
    """k-means labels of the rows of ``local`` [m, P] via the exact embedding of their Gram matrix."""
    x = local - local.mean(0)
    gram = (x @ x.T).double()
    vals, vecs = torch.linalg.eigh(gram)
    emb = (vecs * vals.clamp_min(0).sqrt()).cpu().numpy()
    k = min(k, len(emb))
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit(emb).labels_


@ALGORITHMS.register("oneshot", "one-shot clustering: local models, k-means once, then FedAvg per cluster",
                     OneShotParams, paper=PAPER)
class OneShot(ClusteredAlgorithm):

    def __init__(self, ctx: Context, params: OneShotParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardLoss(), adaptation=Fixed())
        self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Step 1 (the first round): every client fits θ^0 for ``local_epochs`` and joins after training (step 2).
        Step 3: each client from its fixed cluster (a new one from its lowest-loss cluster, K models down to it). The
        trained models are aggregated in one piece (``fold=False``), as this method always has."""
        clients, k = cohort.clients, self.num_clusters
        if (self.assigned < 0).all():  # the one-shot phase
            solver = replace_solver(self.ctx.solver, epochs=self.params.local_epochs)
            return RoundPlan.hard(cohort, np.zeros(cohort.m, np.int64), k, solver=solver)
        fresh = self.assigned[clients] < 0
        new = clients[fresh]
        if len(new):
            rows, owner = self.rows(new)
            self.assigned[new] = best_cluster(-self.losses(rows), owner, len(new))
        assign = self.assigned[clients]
        return RoundPlan.hard(cohort, assign, k, sent=np.where(fresh, k, 1), fold=False).join(assign)

    def after_training(self, round_: int, plan: RoundPlan, local: Params) -> None:
        """Step 2 (the one-shot phase): k-means of the local models; θ_k starts from θ^0 and is aggregated from its
        members."""
        if plan.weights is not None:
            return
        assign = kmeans_models(flatten(local), self.num_clusters, self.ctx.cfg.seed)
        self.models = {n: v[:1].expand_as(v).clone() for n, v in self.models.items()}  # θ_k = θ^0 until set
        self.assigned[plan.cohort.clients] = assign
        plan.join(assign)

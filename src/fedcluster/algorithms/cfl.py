"""CFL (Sattler, Müller & Samek 2020, "Clustered Federated Learning: Model-Agnostic Distributed Multi-Task
Optimization under Privacy Constraints"; MADMO in CFL-GP paper): recursive bi-partitioning of clusters by the cosine
similarity of client updates.

One round, starting from one cluster:

1. every sampled client trains its cluster's model θ_k → Δθ_i = θ_i − θ_k (one trainer call for all);
2. for every cluster c with > 2 sampled members, from round ``warmup`` on (Sattler's code: c_round > 20):
   if ‖(1/|c|) Σ_{i∈c} Δθ_i‖ < tol1 and max_{i∈c} ‖Δθ_i‖ > tol2, bi-partition c by complete-linkage
   agglomerative clustering on 1 − cos(Δθ_i, Δθ_j) (reference code of FedRC paper/HCFL paper and Sattler's
   ``cluster_clients``);
   the larger part keeps the id, the other becomes a new cluster (``max_clusters`` caps K, "CFL (3)" of FedRC paper);
3. each (new) cluster aggregates its members' models from the common pre-split model (A.0 step 5).

[added] Sattler's CFL assumes full participation; with partial participation only the sampled members are
tested and partitioned, and the members not sampled stay in the part that keeps the id. The reference code and
Sattler's notebook append the sub-cluster's local row indices as if they were client ids (correct only for
the first split); here they are mapped back to client ids. Updates are compared unweighted, as in both codes.

``steps`` caps the local steps of a round: ``steps=1`` with ``batch_size`` b is one minibatch gradient step,
Δθ_i = −η ∇f_B(θ_k), as the CFL-GP paper's public code runs MADMO (``CentralUnit.run_MADMO``: one minibatch
gradient a round, EPS_1 = 0.4 and EPS_2 = 1.6 on the gradients' norms, splits when c_round > 5, i.e. ``warmup=6``;
on Δθ those tolerances are η·0.4 and η·1.6).

Extras per round: ``mean_update_norm`` (largest ‖mean Δθ‖ over clusters) and ``max_update_norm``
(largest ‖Δθ_i‖), the two quantities the tolerances are set against.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.tiers.adaptation import CFLRule, CFLSplits

PAPER = ("Felix Sattler, Klaus-Robert Müller, Wojciech Samek. Clustered Federated Learning: Model-Agnostic "
         "Distributed Multitask Optimization Under Privacy Constraints. IEEE Transactions on Neural Networks and "
         "Learning Systems 32(8):3710–3722, 2021.")


@dataclass
class CFLParams(RangeChecked):
    tol1: float = ranged(  # ε1: split only when the cluster's mean update is this small (HCFL paper Table 1: 0.4 / 0.2)
        0.4, ">= 0")
    tol2: float = ranged(1.6, ">= 0")  # ε2: ... and some client's update is larger than this (HCFL paper: 1.6 / 0.8)
    warmup: int = ranged(20, ">= 0")  # no split before this (0-based) round (Sattler's code: c_round > 20)
    max_clusters: int | None = ranged(None, ">= 1")  # cap on K ("CFL (3)"; the reference code uses 100)
    min_size: int = ranged(3, ">= 2")  # split only clusters with at least this many sampled members (> 2 in both codes)
    steps: int | None = ranged(None, ">= 1")  # cap on local steps a round (CFL-GP paper's code: 1)


@ALGORITHMS.register("cfl", "CFL (Sattler et al.): split a cluster when ‖mean Δθ‖ < tol1 and max ‖Δθ_i‖ > tol2",
                     CFLParams, paper=PAPER)
class CFL(HardClusters):
    def __init__(self, ctx: Context, params: CFLParams) -> None:
        splits = CFLSplits(CFLRule(params.tol1, params.tol2, params.warmup, params.max_clusters, params.min_size))
        super().__init__(ctx, params, k0=1, adaptation=splits)  # tier 3
        self.splits = splits

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        pos = self.cluster[clients]
        solver = self.ctx.solver
        if self.params.steps is not None:
            solver = dataclasses.replace(solver, max_steps=self.params.steps)
        local, delta = self.train(round_, clients, pos, solver)
        extra: dict[str, float] = {}
        splits = self.splits.member_splits(round_, pos, self.num_clusters, delta, extra)
        assign = pos.copy()
        for k, _, second in splits:
            assign[second] = self.split_cluster(k, clients[second])  # both parts start from the pre-split θ_k
        self.fedavg(clients, local, assign)
        payload = len(clients) * self.model_bytes()
        return RoundResult(payload, payload, extra=extra)

"""Oracle clustering (the FedMD paper's upper reference/A.7): every client knows its true cluster.

Client i always trains the model of its ground-truth concept (``true_cluster``) and the server runs FedAvg
inside each cluster: θ_k ← θ_k + η_g Σ_{i ∈ k} N_i (θ_i − θ_k) / Σ_{i ∈ k} N_i (FedMD paper on MNIST: "each client is
told its true cluster and updates only that model with FedAvg"). Test clients use their true concept too.
Needs ``num_clusters`` ≥ the number of true concepts. On a drifting federation (data.drift) a client that changes
concept trains its new concept's model from that round on (every concept of the schedule counts).
"""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.data.drift import Drift
from fedcluster.data.federation import Split
from fedcluster.errors import ConfigError
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.weighting import HardLoss, one_hot


@ALGORITHMS.register("oracle", "oracle: each client trains the model of its true cluster (upper reference)",
                     ClusteredParams)
class Oracle(ClusteredAlgorithm):
    def __init__(self, ctx: Context, params: ClusteredParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardLoss(), adaptation=Fixed())
        drift = Drift.of(ctx.fed)
        concepts = ctx.fed.num_concepts if drift is None else max(ctx.fed.num_concepts, len(drift.maps))
        if concepts > params.num_clusters:
            raise ConfigError(f"oracle needs algorithm.num_clusters >= the {concepts} true clusters, "
                              f"got {params.num_clusters}")
        self.set_hard(np.arange(ctx.fed.num_clients), ctx.fed.true_cluster)
        self.estimated[:] = True  # the true cluster is known for every client

    def data_changed(self, clients: np.ndarray) -> None:
        super().data_changed(clients)
        self.set_hard(clients, self.ctx.fed.true_cluster[clients])

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Each client trains its true cluster's model (one model each way). The trained models are aggregated
        in one piece (``fold=False``), as this method always has, so that its sums are formed in the same order."""
        assign = self.ctx.fed.true_cluster[cohort.clients]
        return RoundPlan.hard(cohort, assign, self.num_clusters, fold=False).join(assign)

    def test_weights(self, outputs: torch.Tensor, split: Split) -> np.ndarray:
        return one_hot(self.ctx.fed.test_cluster, self.num_clusters)

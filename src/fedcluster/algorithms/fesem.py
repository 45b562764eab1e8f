"""FeSEM (Long et al. 2023, multi-center FL): hard clustering by parameter distance.

Composition: tier 1 ``conditional`` (first assignment only), tier 2 ``hard-distance``, fixed K. One round:

1. a client seen for the first time is assigned by the lowest loss (ref-code) — it receives all K
   models; any other client receives only the model of its current cluster;
2. client i trains its cluster's model for E local epochs → θ_i;
3. re-assignment k_i = argmin_k ‖θ_k − θ_i‖₂ against the models sent this round (HCFL paper footnote 6);
   with ``split`` the distance is over the heads only (our reading for HCFL+(FeSEM), docs/fidelity.md);
4. θ_k ← θ_k + η_g Σ_{i: k_i = k} N_i (θ_i − θ_k) / Σ_{i: k_i = k} N_i (unchanged if empty).

The original's distance regulariser pulling local models to their centre is not in the seeds and is
left out. Test clients take the cluster with the lowest loss (FedRC paper H.8).

The method is its parts: the round template's hard plan (:meth:`~fedcluster.algorithms.clustered.ClusteredAlgorithm.
hard_plan`, steps 1–2: K models down to a new client, one to the others, one up) and the part's join after training
(:meth:`~fedcluster.algorithms.clustered.ClusteredAlgorithm.after_training`, step 3).
"""

from __future__ import annotations

import numpy as np

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.weighting import HardDistance

PAPER = ("Guodong Long, Ming Xie, Tao Shen, Tianyi Zhou, Xianzhi Wang, Jing Jiang. Multi-center Federated Learning: "
         "Clients Clustering for Better Personalization. World Wide Web 26(1):481–500, 2023.")


@ALGORITHMS.register("fesem", "FeSEM: hard assignment by parameter distance to the cluster models",
                     ClusteredParams, paper=PAPER)
class FeSEM(ClusteredAlgorithm):
    weighting: HardDistance  # tier 2

    def __init__(self, ctx: Context, params: ClusteredParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardDistance(), adaptation=Fixed())
        self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)


"""PACFL (Vahidian et al. 2023, "Efficient Distribution Similarity Identification in Clustered Federated
Learning via Principal Angles Between Client Data Subspaces"; CATALOG A.6/A.7, S3 App. F.3).

One-shot clustering before training:

1. in the first round every client (all M, not only the cohort) sends its signature U_i: for each class it
   holds, the top ``n_basis`` left singular vectors of its training-data matrix (truncated SVD;
   :func:`~fedcluster.tiers.distance.data_signature`);
2. the server forms the proximity matrix of angles between client subspaces in degrees
   (:func:`~fedcluster.tiers.distance.subspace_angles`) and clusters it hierarchically, merging while the
   closest clusters are ≤ ν (:func:`~fedcluster.tiers.adaptive.threshold_clusters`; larger ν → fewer clusters);
3. every cluster starts from θ^0 and runs FedAvg among its members for all rounds (the first included).

Defaults follow the authors' code ([ref-code] MMorafah/PACFL ``scripts/pacfl.sh``): n_basis = 3, average
linkage as the code computes it, ν = 4.9, and the ``entry-min`` angle of ``calculating_adjacency`` (S3 F.3
tunes ν ∈ {…, 4, 5, …} with it). The authors' per-label basis budget for Dirichlet label skew is not used.
Communication: the signatures (float32) go up once; then one model each way per sampled client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.engine.params import repeat
from fedcluster.registry import ALGORITHMS
from fedcluster.tiers.adaptive import ClusterBook, threshold_clusters
from fedcluster.tiers.distance import data_signature, subspace_angles


@dataclass
class PACFLParams:
    nu: float = 4.9  # ν: merge threshold on the subspace angle, degrees
    n_basis: int = 3  # singular vectors per class
    linkage: Literal["average", "complete", "single"] = "average"  # hierarchical-clustering linkage
    measure: Literal["entry-min", "principal"] = "entry-min"  # angle: smallest entry (code) / principal

    def __post_init__(self) -> None:
        if self.nu < 0:
            raise ValueError(f"nu must be >= 0, got {self.nu}")
        if self.n_basis < 1:
            raise ValueError(f"n_basis must be >= 1, got {self.n_basis}")


@ALGORITHMS.register("pacfl", "PACFL: one-shot clustering of data-subspace signatures (angle threshold ν), "
                     "then FedAvg per cluster", PACFLParams)
class PACFL(HardClusters):
    def __init__(self, ctx: Context, params: PACFLParams) -> None:
        super().__init__(ctx, params, k0=1)
        self.clustered = False

    def cluster_clients(self) -> int:
        """Steps 1–2; returns the bytes of the uploaded signatures."""
        p, tr = self.params, self.ctx.fed.train
        sigs = [data_signature(*tr.client(i), p.n_basis) for i in range(tr.num_clients)]
        labels = threshold_clusters(subspace_angles(sigs, p.measure), p.nu, p.linkage)
        k = int(labels.max()) + 1
        self.models = repeat({n: v[0] for n, v in self.models.items()}, k)
        self.book = ClusterBook.start(k)
        self.cluster = labels
        self.sync()
        self.clustered = True
        return sum(s.size for s in sigs) * 4

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        up = self.cluster_clients() if not self.clustered else 0
        pos = self.cluster[clients]
        local, _ = self.train(round_, clients, pos)
        self.fedavg(clients, local, pos)
        payload = len(clients) * self.model_bytes()
        return RoundResult(bytes_up=payload + up, bytes_down=payload)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "clustered": self.clustered}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.clustered = state["clustered"]

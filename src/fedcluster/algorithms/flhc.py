"""FL+HC (Briggs, Fan & Andras 2020, "Federated learning with hierarchical clustering of local updates to improve
training on non-IID data"): FedAvg, then one agglomerative clustering of the clients' updates, then FedAvg per
cluster (the paper's Algorithm 1).

1. rounds 0 … ``cluster_round`` − 1: FedAvg of one global model θ over the sampled clients;
2. round ``cluster_round`` (Alg. 1, the clustering step): every client (all M, as in the paper) trains θ for the
   run's local epochs → Δθ_i = θ_i − θ; the server clusters the Δθ_i agglomeratively
   (:func:`~fedcluster.tiers.grouping.agglomerative_groups`: ``linkage``, ``metric`` and a ``distance_threshold``
   or a cluster count ``num_clusters``); each cluster's model starts as θ plus the N_i-weighted mean of its
   members' Δθ_i (one FedAvg step per cluster on the clustering round's updates);
3. later rounds: FedAvg inside each fixed cluster (its sampled members only).

The paper studies linkage ∈ {ward, average, complete, single} and metric ∈ {euclidean, manhattan, cosine}
and recommends Ward linkage on Euclidean distances, the default here. Its distance threshold is a property of
the model and the data (the size of the updates), set by hand per experiment in the paper. With no
``distance_threshold`` and no ``num_clusters`` (the default) the threshold is read off the dendrogram
(:func:`~fedcluster.tiers.grouping.gap_threshold`): the tree has several clusters when its last merge is at
least ``gap_ratio`` times its median merge (the median standing for a merge inside a cluster, which assumes at
most M/2 clusters), and is then cut at √(median · last merge); otherwise every client stays in one cluster.
Measured (seeds 0–2): on the digits demo (12 clients, 3 concepts, round 10) the last merge is 2.0–2.5 times the
median, on one concept 1.4–1.5 times, on 8 digits clients of one concept after 2 rounds up to 1.6 times.
An explicit ``distance_threshold`` (the ``max_update_norm`` column prints the updates' scale) or
``num_clusters`` replaces the rule. A clustering that leaves every client alone prints a note. Test clients
take the cluster with the lowest loss on their labelled data.
Communication: one model each way per trained client (all M on the clustering round).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.notes import note
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import repeat
from fedcluster.tiers.grouping import Linkage, Metric
from fedcluster.tiers.regrouping import TreeCut
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, num_models

PAPER = ("Christopher Briggs, Zhong Fan, Peter Andras. Federated Learning with Hierarchical Clustering of Local "
         "Updates to Improve Training on Non-IID Data. International Joint Conference on Neural Networks (IJCNN), "
         "2020.")


@dataclass
class FLHCParams(RangeChecked):
    cluster_round: int = ranged(10, ">= 0")  # n: FedAvg rounds before the clustering step (0-based round that clusters)
    linkage: Linkage = "ward"  # agglomerative linkage (the paper recommends ward)
    metric: Metric = "euclidean"  # distance between updates (ward needs euclidean)
    distance_threshold: float | None = ranged(  # stop merging above this linkage distance (null: from the gap)
        None, "> 0")
    num_clusters: int | None = ranged(None, ">= 1")  # cut the tree at this many clusters instead of at the threshold
    gap_ratio: float = ranged(  # no threshold given: several clusters when the last merge is this many medians
        1.8, "> 1")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.linkage == "ward" and self.metric != "euclidean":
            raise ValueError("linkage=ward needs metric=euclidean")


@ALGORITHMS.register("flhc", "FL+HC: FedAvg, then agglomerative clustering of client updates once, then FedAvg "
                     "per cluster", FLHCParams, paper=PAPER)
class FLHC(HardClusters):
    adaptation: TreeCut
    clustered = Saved[bool](Flags())

    def __init__(self, ctx: Context, params: FLHCParams) -> None:
        super().__init__(ctx, params, k0=1, adaptation=TreeCut(params.linkage, params.metric, params.distance_threshold,
                                                                params.num_clusters, params.gap_ratio))
        self.clustered = False
        if params.cluster_round >= ctx.cfg.rounds:
            note(f"algorithm.cluster_round={params.cluster_round} is past the last round (rounds={ctx.cfg.rounds}, "
                 f"rounds 0..{ctx.cfg.rounds - 1}): FL+HC never clusters and runs as FedAvg; give a smaller "
                 "cluster_round or more rounds")

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        p = self.params
        if not self.clustered and round_ >= p.cluster_round:
            return self.cluster_step(round_)
        pos = self.cluster[clients]
        local, delta = self.train(round_, clients, pos)
        self.fedavg(clients, local, pos)
        payload = len(clients) * self.model_bytes()
        return RoundResult(payload, payload, extra={"max_update_norm": float(delta.norm(dim=1).max())})

    def cluster_step(self, round_: int) -> RoundResult:
        """Alg. 1's clustering step on every client's update to the global model."""
        everyone = np.arange(self.ctx.fed.num_clients, dtype=np.int64)
        local, delta = self.train(round_, everyone, np.zeros(len(everyone), dtype=np.int64))
        updates = delta.double().cpu().numpy()
        labels = self.adaptation.groups(updates)
        k = int(labels.max()) + 1
        if k > 1 and k == len(everyone):
            note(f"FL+HC made each of the {k} clients its own cluster: every merge lies above the distance threshold; "
                 "give a larger algorithm.distance_threshold, or leave it out to read it off the dendrogram")
        self.regroup(repeat({n: v[0] for n, v in self.models.items()}, k), everyone, labels)
        self.fedavg(everyone, local, labels)
        self.clustered = True
        payload = len(everyone) * self.model_bytes()
        return RoundResult(payload, payload, extra={"max_update_norm": float(delta.norm(dim=1).max())})

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """Before its clustering round FL+HC has one model."""
        if (problem := super().state_problem(state, rounds)) is not None:
            return problem
        if not state["clustered"] and num_models(state) != 1:
            return f"algorithm.clustered is false but the checkpoint has {num_models(state)} cluster models"
        return None


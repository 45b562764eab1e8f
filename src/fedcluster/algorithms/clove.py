"""CLoVE (Bhatia, Papadis, Kodialam, Lakshman & Chakrabarty, ICML 2026, "CLoVE: Personalized Federated Learning
through Clustering of Loss Vector Embeddings"): clients are embedded by their losses on all K̂ candidate models,
the embeddings are clustered with the number of clusters chosen each round, and clusters are matched to models.

One round (the paper's Algorithm 1, Sec. 3), while the assignment is not yet stable:

1. every sampled client evaluates the K̂ models on its training data → its loss vector
   L_i = [L_i(θ_1), …, L_i(θ_K̂)] (mean loss; the clients' E-step pass of the trainer);
2. clustering of the loss vectors into K clusters by k-means (``route=known``, the default: the authors' code's
   defaults, K known and ``clustering_alg`` KMEANS, ``KMeans(n_init="auto")``: one k-means++ start seeded by the
   run's seed); with K unknown (``route=ward``), the authors' code's
   ``selectBestK`` search (``find_best_K_by_silhouette``): Ward clustering of the loss vectors for every
   k = 2 … K̂ (at most m − 1) scored by the silhouette, a larger k kept only when its score beats the best so far
   by 10 % (:func:`~fedcluster.tiers.grouping.ward_silhouette_k`), then k-means into that K^t;
3. min-cost matching of clusters to models, the cost of (cluster, model) being the cluster's summed losses on the
   model (Hungarian algorithm, :func:`~fedcluster.tiers.grouping.match_clusters_to_models`);
4. each client trains only its matched model; θ_j ← N_i-weighted FedAvg of the clients matched to it (a model
   no cluster was matched to is unchanged).

Stability: a client whose model has not changed for ``stable_rounds`` of its rounds is stable; once a
``stable_fraction`` of all clients is stable, the server stops computing loss vectors and each client keeps
training its model (the paper's switch back to plain per-cluster FedAvg). ``sqrt_loss`` embeds √L_i instead of
L_i (the square-root loss vector of the paper's analysis and ablation).

``num_clusters`` is K with ``route=known`` and K̂, an upper bound on the clusters, with the other routes;
``rounds.csv`` gets ``clusters_found`` (K^t, the number of models in use) and ``stable`` (the stable fraction);
``num_clusters`` there stays K̂.

Choosing K^t when K is unknown: ``route=ward`` (the authors' code's unknown-K search above), ``route=silhouette``
(k-means for every k, the highest silhouette kept, no margin) or ``route=finch``, the authors' code's
parameter-free route: FINCH (Sarfraz et al. 2019, :mod:`~fedcluster.tiers.finch`) on the loss
vectors with the cosine distance, its coarsest partition of at most K̂ clusters. A silhouette needs two clusters;
``one_cluster_test`` adds the gap statistic's test of one cluster against two
(:func:`~fedcluster.tiers.grouping.prefers_one_cluster`), so K^t = 1 can be answered. It is off by default: in
the first rounds the K̂ random models give every client nearly the same loss vector, the test answers one
cluster, and the clients stabilise on one model (measured on the digits demo: one cluster on seeds 0–2).

When CLoVE cannot separate concepts: two concepts whose clients land on one model in the first rounds keep equal
losses on it (it is trained on both alike) and on the models of the third (trained on another labelling, it is as
wrong for both), so nothing in their loss vectors tells them apart again and the assignment stays put. On the
digits demo (12 clients, 3 concepts) with K = 3 known, CLoVE recovers the concepts (ARI 1.0) on seeds 0–6 and 8
and freezes at a mixed assignment on seeds 7 and 9 (ARI 0.44, 0.41). With ten k-means starts per round (the
global k-means optimum of each round's loss vectors; fedcluster's earlier choice) it froze on seeds 0, 7 and 8
(seed 0: ARI 0.41, stable from round 6): a single start is the authors' code's, kept. With K̂ = 4 and the Ward
route it ends with 2 clusters (ARI 0.52, 0.0, 0.52 on seeds 0–2), the silhouette route with 2 (each concept
whole), FINCH with 3, 2 and 3 (ARI 1.0, 0.52, 1.0 on seeds 0–2). On the demo's seed 0 at
rounds 4–6 the silhouette of the Ward split into 2 clusters is 0.84–0.90 and that of the true 3-concept partition
0.45–0.51: no silhouette search, with or without the margin, picks 3 there. A larger K̂ gives more models, hence
more chances that each concept gets its own (K̂ = 11 on the demo, Ward route: ARI 0.52, 1.0, 0.41 on seeds 0–2).
Where the authors' search would try k = m it repeats every loss vector five times; here k stops at m − 1. The
number of rounds that make a client stable is not given in the paper: the authors' code stops after three equal
assignments (``number_of_rounds_for_clustering_stability`` = 3), here ``stable_rounds=3`` counts rounds with an
unchanged model, i.e. four equal assignments (one round more; ``stable_rounds=2`` is the code's count: on the
demo's seeds 0–9 it freezes on seeds 3, 7 and 9 instead of 7 and 9). Models start from
independent random initialisations (CLoVE needs no careful initialisation). Test clients take the model with the
lowest loss on their labelled data.
Communication: K̂ models down while clustering (one after), one model up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import segment_mean
from fedcluster.tiers.finch import finch_partitions
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.grouping import (
    kmeans_groups,
    match_clusters_to_models,
    prefers_one_cluster,
    silhouette_kmeans,
    ward_silhouette_k,
)
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Counts, Flags, Positions
from fedcluster.tiers.weighting import HardLoss, best_cluster

PAPER = ("Randeep Bhatia, Nikos Papadis, Murali Kodialam, TV Lakshman, Sayak Chakrabarty. CLoVE: Personalized "
         "Federated Learning through Clustering of Loss Vector Embeddings. International Conference on Machine "
         "Learning (ICML), PMLR 306, 2026 (arXiv:2506.22427).")

KMEANS_STARTS = 1  # the authors' KMeans(n_init="auto"): one k-means++ start (scikit-learn >= 1.4)


@dataclass
class CLoVEParams(ClusteredParams):
    num_clusters: int = ranged(  # K (route=known) or K̂, an upper bound on the clusters (the other routes)
        3, ">= 2", "the number of models: K, or an upper bound on the clusters with route=ward|silhouette|finch")
    stable_rounds: int = ranged(3, ">= 1")  # rounds with an unchanged model that make a client stable
    stable_fraction: float = ranged(1.0, "(0, 1]")  # stop clustering once this share of all clients is stable
    sqrt_loss: bool = False  # embed √loss (the square-root loss vector) instead of the loss
    route: Literal["known", "ward", "silhouette", "finch"] = "known"  # K known, or K^t by Ward/k-means/FINCH
    one_cluster_test: bool = False  # K^t = 1 when the gap statistic prefers one cluster to two


@ALGORITHMS.register("clove", "CLoVE: per-client loss vectors over the models clustered (K known, or K^t by Ward "
                     "+ silhouette with a 10 % margin), min-cost cluster-model matching", CLoVEParams, paper=PAPER)
class CLoVE(ClusteredAlgorithm):
    model_of = Saved[np.ndarray](Positions(unassigned=True))  # each client's current model (-1: never sampled)
    unchanged = Saved[np.ndarray](Counts(at_most_rounds=True))  # consecutive rounds with the same model
    converged = Saved[bool](Flags())

    def __init__(self, ctx: Context, params: CLoVEParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardLoss(), adaptation=Fixed())
        m = ctx.fed.num_clients
        self.model_of = np.full(m, -1, dtype=np.int64)  # each client's current model (-1: never sampled)
        self.unchanged = np.zeros(m, dtype=np.int64)  # consecutive rounds with the same model
        self.converged = False

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        m, k = len(clients), self.num_clusters
        rows, owner = self.rows(clients)
        clustering = not self.converged
        if clustering:
            vectors = segment_mean(self.losses(rows), owner, m)  # [m, K̂] loss vector embeddings
            embed = np.sqrt(np.maximum(vectors, 0)) if self.params.sqrt_loss else vectors
            labels = self.group(embed)
            cost = np.stack([vectors[labels == c].sum(0) for c in range(int(labels.max()) + 1)])
            assign = match_clusters_to_models(cost)[labels]
            same = self.model_of[clients] == assign
            self.unchanged[clients] = np.where(same, self.unchanged[clients] + 1, 0)
            self.model_of[clients] = assign
            stable = self.unchanged >= self.params.stable_rounds
            self.converged = bool(stable.mean() >= self.params.stable_fraction)
        else:
            new = self.model_of[clients] < 0
            if new.any():  # a client first seen after convergence takes its lowest-loss model
                part, part_owner = self.rows(clients[new])
                self.model_of[clients[new]] = best_cluster(-self.losses(part), part_owner, int(new.sum()))
            assign = self.model_of[clients]
        local = self.train_single(clients, assign, round_)
        self.aggregate(local, self.cluster_sizes_weights(clients, assign))
        self.set_hard(clients, assign)
        in_use = np.unique(self.model_of[self.model_of >= 0])
        extra = {"clusters_found": float(len(in_use)),
                 "stable": float((self.unchanged >= self.params.stable_rounds).mean())}
        down = self.nbytes(k) if clustering else self.nbytes(1)
        return RoundResult(bytes_up=m * self.nbytes(1), bytes_down=m * down, extra=extra)

    def group(self, embed: np.ndarray) -> np.ndarray:
        """The clusters of the loss vectors: k-means into K (``route=known``), k-means into K^t chosen by the Ward
        search or the silhouette, or FINCH's coarsest partition of at most K̂ clusters (k-means into K̂ when even
        its finest has more)."""
        p = self.params
        if p.one_cluster_test and prefers_one_cluster(embed, self.ctx.cfg.seed):
            return np.zeros(len(embed), dtype=np.int64)
        if p.route == "known":
            return kmeans_groups(embed, self.num_clusters, self.ctx.cfg.seed, n_init=KMEANS_STARTS)
        if p.route == "ward":
            k = ward_silhouette_k(embed, self.num_clusters)
            if k == 1:
                return np.zeros(len(embed), dtype=np.int64)
            return kmeans_groups(embed, k, self.ctx.cfg.seed, n_init=KMEANS_STARTS)
        if p.route == "silhouette":
            return silhouette_kmeans(embed, self.num_clusters, self.ctx.cfg.seed)
        fitting = [lab for lab in finch_partitions(embed) if lab.max() < self.num_clusters]
        if fitting:
            return fitting[-1]
        return silhouette_kmeans(embed, self.num_clusters, self.ctx.cfg.seed, k_min=self.num_clusters)


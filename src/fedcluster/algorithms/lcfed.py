"""LCFed (Zhang, Chen, Lin, Chen & Zhao 2025, "LCFed: An Efficient Clustered Federated Learning Framework for
Heterogeneous Data", ICASSP 2025, arXiv:2501.01850): each model is partitioned into an embedding sub-model φ
shared by the whole federation and a decision sub-model per cluster; clients are clustered online by the cosine
similarity of low-rank (PCA-projected) models.

What the paper states (its abstract and published summaries): "model partitioning and ... distinct aggregation
strategies for each sub-model" — the embedding Φ is aggregated over every device (global knowledge), the decision
part within each cluster (intra-cluster co-training); the local objective joins the local loss with terms that keep
the device's model near the global embedding and near its cluster's model; and "a computationally efficient model
similarity measurement method based on low-rank models" (a PCA projection M learned from a sample of devices'
models, each model compared through its projection z = vec(ω) M) enables "real-time cluster updates". This
implementation is built from those statements; the paper's step-by-step listing was not consulted, so the steps
below, in particular the first round's K-means and the single proximal weight, are fedcluster's composition of them
from the tier parts (the CFLA library's ``serveur_lcfed.py`` / ``client_lcfed.py`` have the same structure, with
random initial clusters and projections fitted to untrained models). The same authors' FedAC (arXiv:2403.16460) is
summarised with this design: a bi-level objective of the local loss, an intra-cluster regulariser and a
global-embedding regulariser, minimised alternately, with an EM-like re-clustering by low-rank cosine similarity.

0. every cluster starts from one model θ^0 (embedding Φ and the K decision parts equal);
1. distribution: client i receives Φ and the decision part h_{k_i} of its cluster (a client seen for the first time
   takes the cluster with the lowest loss on its data, as WeCFL and FeSEM do);
2. local update: E local epochs of SGD on f_i(ω) + (μ/2)‖ω − (Φ, h_{k_i})‖² from (Φ, h_{k_i}) → ω_i. The
   cluster's model is (Φ, h_{k_i}), so one proximal term holds both regularisers: their two weights (an
   intra-cluster one on ω and a global one on φ, which add up on φ) become one weight μ; μ = 0 is plain local
   training;
3. low-rank clustering: the first round, the PCA projection is fitted to the trained models of up to
   ``pca_clients`` devices (centre c, top ``rank`` principal directions V: :func:`low_rank_projection`) and kept;
   each model's low-rank model is z = (vec(ω) − c) V. That round, the K clusters are the K-means groups of the
   cohort's normalised z_i (all cluster models are still equal); every later round each sampled client joins the
   cluster whose model's low-rank model has the highest cosine similarity with its z_i (:func:`cosine_positions`);
4. aggregation: Φ ← the N_i-weighted mean of every sampled client's embedding, h_k ← that of cluster k's sampled
   members (``cluster_update`` with the shared body; a cluster no sampled client joined keeps its decision part).

With ``split=false`` the whole model is per cluster (no global embedding). Test clients take the cluster with the
lowest loss (FedRC paper H.8). Communication: Φ and one decision part each way per sampled client (K decision parts
down to a new client), and the r-dimensional z_i on top of the model up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.cluster import KMeans

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.engine.params import Params, flatten, repeat
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.weighting import HardDistance

PAPER = ("Yuxin Zhang, Haoyu Chen, Zheng Lin, Zhe Chen, Jin Zhao. LCFed: An Efficient Clustered Federated Learning "
         "Framework for Heterogeneous Data. IEEE International Conference on Acoustics, Speech and Signal Processing "
         "(ICASSP), 2025 (arXiv:2501.01850).")


def low_rank_projection(models: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre c [P], directions V [P, r]) of the PCA of ``models`` [n, P]: r = min(rank, n − 1, P) ≥ 1."""
    centre = models.mean(axis=0)
    _, _, vt = np.linalg.svd(models - centre, full_matrices=False)
    r = max(1, min(rank, len(models) - 1, models.shape[1]))
    return centre, vt[:r].T


def normalised(z: np.ndarray) -> np.ndarray:
    return z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)


def cosine_positions(z: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """[m] the centre (row of ``centres`` [K, r]) with the highest cosine similarity to each row of ``z`` [m, r]."""
    return (normalised(z) @ normalised(centres).T).argmax(axis=1)


@dataclass
class LCFedParams(ClusteredParams):
    split: bool = True  # the model partition: a global embedding φ and one decision part per cluster
    mu: float = ranged(1.0, ">= 0", "proximal weight; 0 is plain local training")  # μ toward the received model
    rank: int = ranged(10, ">= 1", "dimensions of the low-rank models")  # r, the PCA directions kept
    pca_clients: int = ranged(20, ">= 2", "a PCA needs two models")  # devices whose models fit the projection


@ALGORITHMS.register("lcfed", "LCFed: a global embedding and per-cluster decision parts; clients clustered by the "
                     "cosine similarity of PCA low-rank models", LCFedParams, paper=PAPER)
class LCFed(ClusteredAlgorithm):
    """Tier 1: ``conditional`` (a new client's first cluster, test clients); tier 2: the cluster whose low-rank
    model is most similar (:func:`cosine_positions`); a fixed K."""

    saved = ("assigned", "centre", "directions")

    def __init__(self, ctx: Context, params: LCFedParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardDistance(), adaptation=Fixed())
        self.models = repeat({n: v[0] for n, v in self.models.items()}, self.num_clusters)  # step 0: one θ^0
        self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)
        self.centre = np.zeros(0, dtype=np.float64)  # c [P] of the PCA (none before the first round)
        self.directions = np.zeros((0, 0), dtype=np.float64)  # V [P, r]

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        new = int((self.assigned[clients] < 0).sum())
        mu = self.params.mu if (self.assigned >= 0).any() else 0.0  # no cluster formed yet: no proximal term
        start = self.weighting.start(self.loglik_of, clients, self.state)  # step 1
        solver = dataclasses.replace(self.ctx.solver, prox_mu=mu)
        local = self.train_single(clients, start, round_, solver)  # step 2 (proximal centre: the start)
        assign = self.cluster(local)  # step 3
        self.assigned[clients] = assign
        self.aggregate(local, self.cluster_sizes_weights(clients, assign))  # step 4
        self.set_hard(clients, assign)
        down = new * self.nbytes(self.num_clusters) + (len(clients) - new) * self.nbytes(1)
        low_rank = len(clients) * self.directions.shape[1] * 4
        return RoundResult(bytes_up=len(clients) * self.nbytes(1) + low_rank, bytes_down=down)

    def cluster(self, local: Params) -> np.ndarray:
        """Step 3 on the cohort's trained models ``local`` [m, ...]."""
        models = flatten(local).double().cpu().numpy()
        first = self.directions.size == 0
        if first:
            self.centre, self.directions = low_rank_projection(models[:self.params.pca_clients], self.params.rank)
        z = (models - self.centre) @ self.directions
        if first:
            k = min(self.num_clusters, len(z))
            return KMeans(n_clusters=k, n_init=10, random_state=self.ctx.cfg.seed).fit_predict(normalised(z))
        centres = (flatten(self.models).double().cpu().numpy() - self.centre) @ self.directions
        return cosine_positions(z, centres)

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """The PCA: none before the first round, else a finite centre and directions over the model's size."""
        if (problem := super().state_problem(state, rounds)) is not None:
            return problem
        size = sum(v[0].numel() for v in self.models.values())
        centre, directions = np.asarray(state["centre"]), np.asarray(state["directions"])
        if centre.size and (centre.shape != (size,) or directions.ndim != 2 or directions.shape[0] != size):
            return (f"algorithm.centre/directions have shapes {list(centre.shape)}/{list(directions.shape)}; this "
                    f"run needs [{size}] and [{size}, r] (the PCA over the model's parameters)")
        if not (np.isfinite(centre).all() and np.isfinite(directions).all()):
            return "algorithm.centre/directions hold non-finite values"
        return None

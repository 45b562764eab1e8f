"""LCFed (Zhang, Chen, Lin, Chen & Zhao 2025, "LCFed: An Efficient Clustered Federated Learning Framework for
Heterogeneous Data", ICASSP 2025, arXiv:2501.01850): each model is partitioned into an embedding sub-model φ
shared by the whole federation and a decision sub-model per cluster; clients are clustered online by the cosine
similarity of low-rank (PCA-projected) models.

Sources read: the paper's abstract and introduction (arxiv.org/html/2501.01850v1); a published review of it
(themoonlight.io), which says the split puts the shallow layers in the embedding (aggregated over every device:
global knowledge) and the deeper ones in the decision part (aggregated within each cluster); the opening of the
same authors' FedAC (arXiv:2403.16460), whose framework LCFed condenses (a decoupled network with one aggregation
rule per sub-module, an online similarity metric by dimensionality reduction); and the CFLA library's reading
(github.com/Totorino02/CFLA, ``framework/client/client_lcfed.py``, ``framework/server/serveur_lcfed.py``): the
local loss f_i(ω) + (μ/2)‖ω − Ω_k‖² + (λ/2)‖φ − Φ‖² (μ = 1, λ = 2 in its runs), a PCA projection M fitted to a
sample of devices' models, z_i = vec(ω_i) M, the cluster of highest cos(z_i, vec(Ω_k) M), Φ averaged over every
sampled device and Ω_k within each cluster. The paper's method section (its equations and algorithm listing)
could not be read: the steps below are fedcluster's composition of those statements from the tier parts, and
equation numbers are not cited.

0. every cluster starts from one model θ^0 (embedding Φ and the K decision parts equal);
1. distribution: client i receives Φ and the decision part h_{k_i} of its cluster (a client seen for the first time
   takes the cluster with the lowest loss on its data, as WeCFL and FeSEM do);
2. local update: E local epochs of SGD on f_i(ω) + (μ/2)‖ω − (Φ, h_{k_i})‖² from (Φ, h_{k_i}) → ω_i. Here the
   cluster's model Ω_k is (Φ, h_k), so the two regularisers act on φ with weight μ + λ and on the decision part
   with μ; fedcluster's trainer takes one proximal weight, so both are the one weight μ (a departure: CFLA's
   μ = 1, λ = 2 weigh φ three times as much as h). μ = 0 is plain local training. The round that forms the first
   clusters trains without the proximal term: every cluster model is still θ^0, so the term carries no cluster
   knowledge and only shrinks the differences the clustering reads (the WeCFL authors' proximal variant,
   FedBase ``wecfl.py`` with ``reg_lam``, skips it in round 0 likewise). With it, on the digits demo the first
   clustering followed the clients' label skew instead of their concepts, and stayed (ARI 0.31, 0.74, 0.17 on
   seeds 0–2 after 40 rounds);
3. low-rank clustering: the first round, the PCA projection is fitted to the trained models of up to
   ``pca_clients`` devices (centre c, top ``rank`` principal directions V: :func:`low_rank_projection`) and kept;
   each model's low-rank model is z = (vec(ω) − c) V. That round, the K clusters are the K-means groups of the
   cohort's normalised z_i (all cluster models are still equal; CFLA starts from random clusters and fits M to
   the untrained models, which are all equal); every later round each sampled client joins the cluster whose
   model's low-rank model has the highest cosine similarity with its z_i (:func:`cosine_positions`);
4. aggregation: Φ ← the N_i-weighted mean of every sampled client's embedding, h_k ← that of cluster k's sampled
   members (``cluster_update`` with the shared body; a cluster no sampled client joined keeps its decision part).

With ``split=false`` the whole model is per cluster (no global embedding). Test clients take the cluster with the
lowest loss (FedRC paper H.8). Communication: Φ and one decision part each way per sampled client (K decision parts
down to a new client), and the r-dimensional z_i on top of the model up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.cluster import KMeans

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.engine.params import Params, flatten, repeat
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Reals
from fedcluster.tiers.weighting import HardDistance

PAPER = ("Yuxin Zhang, Haoyu Chen, Zheng Lin, Zhe Chen, Jin Zhao. LCFed: An Efficient Clustered Federated Learning "
         "Framework for Heterogeneous Data. IEEE International Conference on Acoustics, Speech and Signal Processing "
         "(ICASSP), 2025 (arXiv:2501.01850).")


def low_rank_projection(models: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre c [P], directions V [P, r]) of the PCA of ``models`` [n, P]: r = min(rank, n − 1, P) ≥ 1."""
    centre = models.mean(axis=0)
    _, _, vt = np.linalg.svd(models - centre, full_matrices=False)
    r = max(1, min(rank, len(models) - 1, models.shape[1]))
    return centre, np.ascontiguousarray(vt[:r].T)  # C order, as a saved state loads it back


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

    centre = Saved[np.ndarray](Reals())  # c [P] of the PCA (none before the first round)
    directions = Saved[np.ndarray](Reals())  # V [P, r]
    weighting: HardDistance  # tier 2

    def __init__(self, ctx: Context, params: LCFedParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardDistance(), adaptation=Fixed())
        self.models = repeat({n: v[0] for n, v in self.models.items()}, self.num_clusters)  # step 0: one θ^0
        self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)
        self.centre = np.zeros(0, dtype=np.float64)  # c [P] of the PCA (none before the first round)
        self.directions = np.zeros((0, 0), dtype=np.float64)  # V [P, r]

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Steps 1–2: the hard plan (each client from its cluster; a new one from its lowest-loss cluster) with the
        proximal weight μ toward the start (none before a cluster is formed)."""
        mu = self.params.mu if (self.assigned >= 0).any() else 0.0  # no cluster formed yet: no proximal term
        return replace(self.hard_plan(cohort), solver=dataclasses.replace(self.ctx.solver, prox_mu=mu))

    def after_training(self, round_: int, plan: RoundPlan, local: Params) -> None:
        """Step 3; each client also uploads its r-dimensional low-rank model z_i (float32)."""
        assign = self.cluster(local)
        self.assigned[plan.cohort.clients] = assign
        plan.join(assign)
        plan.extra_up = self.directions.shape[1] * 4

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

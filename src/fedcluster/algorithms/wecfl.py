"""WeCFL (Ma et al. 2022, "On the Convergence of Clustered Federated Learning"): hard clustering of the clients'
trained models by a weighted k-means, the cluster models being its centres.

Sources read: the paper's abstract (arXiv:2202.06187) and published summaries of it, which state the bi-level
formulation, an EM-like alternation of an assignment (E) step and a weighted-aggregation (M) step, and a weighted
Euclidean distance between client models; and the authors' code, github.com/jsmjie/FedBase
(``fedbase/baselines/wecfl.py`` and ``server.weighted_clustering``). The paper's body (its equations and algorithm
listing) could not be read, so the objective below is written from those sources and equation numbers are not cited.

The problem is bi-level: the upper level trains each client's model θ_i on its data (min Σ_i p_i F_i(θ_i)), the
lower level clusters the trained models, min_{r, W} Σ_i Σ_k r_ik p_i ‖θ_i − w_k‖² with r_ik ∈ {0, 1},
Σ_k r_ik = 1 and p_i = N_i / N, whose centres w_k = Σ_i r_ik p_i θ_i / Σ_i r_ik p_i are the cluster models. The
round follows the authors' code: local update; ``weighted_clustering`` (k-means with ``sample_weight`` = N_i / N);
per-cluster aggregation and distribution. Every cluster starts from one model θ^0, as there, so that the first
clustering sees the clients' data, not K random starts. Each round:

1. distribution: client i receives the model w_{k_i} of its cluster (a client seen for the first time picks the
   cluster with the lowest loss on its data, as FeSEM's tier-2 part does);
2. local update: E local epochs from w_{k_i} → θ_i;
3. clustering (the E-step of the lower level): weighted k-means of the cohort's θ_i with weights p_i (Lloyd's
   iterations from k-means++ starts, ``n_init`` restarts, scikit-learn's ``KMeans`` with ``sample_weight``);
   the k-means groups are matched one-to-one to the K cluster positions by the least Σ p_i ‖θ_i − w_k‖² over each
   group's members (Hungarian matching), so that a cluster keeps its model and its absent members across rounds;
4. aggregation (the M-step): w_k ← w_k + η_g Σ_{i: k_i = k} N_i (θ_i − w_k) / Σ_{i: k_i = k} N_i — the group's
   weighted k-means centre at η_g = 1; a cluster no sampled client joined is unchanged.

Departures from the authors' code: it clusters the last layer's weight matrix only (``state_dict`` key [-2]);
here the whole model is clustered (the paper's θ_i), and with ``split`` the heads only (the body is shared). Its
k-means keeps the best of 5 restarts (``n_init`` = 10 here). Its code runs every client every round, where the
k-means labels need no matching; the matching of step 3 keeps a sampled cohort's labels meaningful. Test clients
take the cluster with the lowest loss (FedRC paper H.8). Communication: one model each way (K down to a new client).

What decides the result is the first clustering: from then on each client trains from its cluster's model, the
trained models lie nearer their starting model than the other clusters' models, and every later k-means returns
the same groups. The first local models must therefore already reflect the clusters: on the digits demo
(``configs/demo.yaml``: 2 local epochs at lr 0.5) they do (ARI 1 from round 1); after 1 epoch at lr 0.1 from an
untrained MLP (the package defaults) they reflect the clients' label skew more than their concepts, and the first
groups stay (docs/methods.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.engine.params import Params, flatten, repeat
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.weighting import HardDistance

PAPER = ("Jie Ma, Guodong Long, Tianyi Zhou, Jing Jiang, Chengqi Zhang. On the Convergence of Clustered Federated "
         "Learning. arXiv:2202.06187, 2022.")


def weighted_kmeans_positions(models: np.ndarray, weights: np.ndarray, distances: np.ndarray, seed: int,
                              n_init: int) -> np.ndarray:
    """[m] cluster position of each client: weighted k-means of its trained model (rows of ``models`` [m, P],
    weights p_i) into min(K, m) groups (step 3), each group matched to the position k with the least
    Σ_{i in group} p_i ‖θ_i − w_k‖² (``distances`` [m, K] = ‖θ_i − w_k‖)."""
    m, k = distances.shape
    groups = KMeans(n_clusters=min(k, m), n_init=n_init, random_state=seed).fit_predict(
        models, sample_weight=weights)
    member = np.eye(min(k, m))[groups]  # [m, groups]
    cost = member.T @ (weights[:, None] * distances ** 2)  # [groups, K]
    rows, cols = linear_sum_assignment(cost)
    position = np.empty(len(rows), dtype=np.int64)
    position[rows] = cols
    return position[groups]


@dataclass
class WeCFLParams(ClusteredParams):
    n_init: int = ranged(  # k-means restarts per round (the best of n_init k-means++ starts is kept)
        10, ">= 1", "k-means restarts per round")


def weighted_kmeans_step(alg: Any, local: Params, clients: np.ndarray) -> np.ndarray:
    """Step 3 of WeCFL (and CGPFL's matching): the size-weighted k-means of the cohort's trained models (their heads
    when the body is shared) against the K cluster models; each client's position kept in ``alg.assigned``."""
    names = [n for n in local if n.startswith("head." if alg.split else "")]
    models = flatten({n: local[n] for n in names}).double().cpu().numpy()
    sizes = alg.sizes(clients).astype(np.float64)
    assign = weighted_kmeans_positions(models, sizes / sizes.sum(), alg.model_distances(local), alg.ctx.cfg.seed,
                                       alg.params.n_init)
    alg.assigned[clients] = assign
    return assign


@ALGORITHMS.register("wecfl", "WeCFL: weighted k-means of the trained client models; the centres are the K models",
                     WeCFLParams, paper=PAPER)
class WeCFL(ClusteredAlgorithm):
    """Tier 1: ``conditional`` (a new client's first cluster, test clients); tier 2: the cluster by a weighted
    k-means of the trained models (:func:`weighted_kmeans_positions`); a fixed K."""

    weighting: HardDistance  # tier 2

    def __init__(self, ctx: Context, params: WeCFLParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardDistance(), adaptation=Fixed())
        self.models = repeat({n: v[0] for n, v in self.models.items()}, self.num_clusters)  # step 0: one θ^0
        self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)

    def after_training(self, round_: int, plan: RoundPlan, local: Params) -> None:
        """Step 3 (steps 1–2: the round template's hard plan; step 4: its aggregation)."""
        plan.join(self.cluster(local, plan.cohort.clients))

    def cluster(self, local: Params, clients: np.ndarray) -> np.ndarray:
        """Step 3 on the cohort's trained models (their heads when the body is shared); kept in ``assigned``."""
        return weighted_kmeans_step(self, local, clients)

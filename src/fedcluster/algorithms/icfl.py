"""ICFL (Yan et al. 2023, incremental clustered FL/A.7): clusters split when the average
connectivity of their clients' update-similarity graph falls below a threshold that rises over the rounds.

Implements the original's incremental clustering (not in the seeds; HCFL paper only gives α*(0) and ε1, App. E.2) as
the ICFL paper's steps 1–5, with the formulas of the HCFL authors' reference code ``ICFLAggregator.mix`` (LINs-lab/FedRC
``aggregator.py``): α_G, ε2 and α_t below (:func:`~fedcluster.tiers.regrouping.icfl_connectivity`,
:func:`~fedcluster.tiers.regrouping.icfl_threshold`, :func:`~fedcluster.tiers.regrouping.icfl_bipartition`).

State: a pool (cluster id 0 at the start, holding every client) and the clusters split off it. One round:

1. every sampled client trains its cluster's (or the pool's) model → Δθ_i (one trainer call);
2. when clusters besides the pool exist, sampled pool clients join the cluster whose sampled members' mean
   update is most cosine-similar to theirs;
3. for every cluster (the pool only while it is alone) with ≥ 2 sampled members: A_ij = cos(Δθ_i, Δθ_j),
   α_G = λ_1(A)/n; with ε2 = log(1 − α*(0))/(1 − log ε1) and α_t = 1 − (e/ε1)^{t/ε2}, split if α_G < α_t by
   2-means on the top-2 eigenvectors of A (reference code formulas; HCFL paper E.2: α*(0) ∈ {0.85, 0.98}, ε1 = 4).
   A split of the lone pool turns both halves into new clusters (the pool keeps its unsampled clients,
   reference code); any other split moves one half to a new cluster;
4. per-cluster FedAvg (A.0); the pool is removed once it has no clients left.

[added] The reference code builds A over all members' latest stored updates and averages the pool model from the
other clusters' models; here A uses the sampled members' updates of the round (identical with full
participation) and the pool is averaged like any cluster. Extras: ``icfl_threshold`` (α_t) and
``min_connectivity`` (smallest α_G tested this round).

Behaviour (``tests/algorithms/test_cfl_baselines_behaviour.py``): α_t rises from 0 to 1, so a cluster splits as soon as
α_t passes its connectivity — first the pool of a multi-concept federation along the concepts (8 digits
clients, two label maps: α_G ≈ 0.33–0.40, split at t = 6 with α*(0) = 0.85), later every cluster whose
clients' updates are not all parallel: one concept (α_G 0.60–0.87) ends with one client per cluster at
t = 20–22, in line with HCFL paper Tables 1/8 (98–100 clusters of 100 at α*(0) = 0.85).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.tiers.distance import cosine_similarity
from fedcluster.tiers.regrouping import ICFLSplits
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import StableId

PAPER = ("Yihan Yan, Xiaojun Tong, Shen Wang. Clustered Federated Learning in Heterogeneous Environment. IEEE "
         "Transactions on Neural Networks and Learning Systems, 2023.")


@dataclass
class ICFLParams(RangeChecked):
    alpha0: float = ranged(0.85, "(0, 1)")  # α*(0) (HCFL paper: 0.85 or 0.98; larger → fewer splits)
    eps1: float = 4.0  # ε1 (HCFL paper: 4.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.eps1 <= 0 or abs(1 - math.log(self.eps1)) < 1e-9:
            raise ValueError(f"eps1 must be > 0 and != e, got {self.eps1}")


@ALGORITHMS.register("icfl", "ICFL: split clusters whose update-similarity connectivity falls below α_t (α*(0), ε1)",
                     ICFLParams, paper=PAPER)
class ICFL(HardClusters):
    adaptation: ICFLSplits
    pool = Saved[int | None](StableId())  # stable id of the pool cluster, None once removed

    def __init__(self, ctx: Context, params: ICFLParams) -> None:
        super().__init__(ctx, params, k0=1, adaptation=ICFLSplits(params.alpha0, params.eps1))
        self.pool = 0

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        pos = self.cluster[clients]
        local, delta = self.train(round_, clients, pos)
        assert self.book is not None  # K changes: the state keeps a book
        pool = self.book.position(self.pool) if self.pool is not None else -1
        alone = self.num_clusters == 1
        assign = pos.copy()
        if pool >= 0 and not alone:
            self._join(assign, delta, pool)
        threshold = self.adaptation.threshold(round_)
        conn: list[float] = []
        for k in range(self.num_clusters):  # the clusters before this round's splits
            rows = np.flatnonzero(assign == k)
            if (k == pool and not alone) or len(rows) < 2:
                continue
            connectivity, labels = self.adaptation.cluster_split(cosine_similarity(delta[torch.as_tensor(rows)]),
                                                                 threshold, self.ctx.cfg.seed + round_)
            conn.append(connectivity)
            if labels is None:
                continue
            if k == pool:  # the lone pool: both halves become clusters, the pool keeps the rest
                for part in (0, 1):
                    moved = rows[labels == part]
                    assign[moved] = self.split_cluster(k, clients[moved])
            else:
                moved = rows[labels == 1]
                assign[moved] = self.split_cluster(k, clients[moved])
        self.cluster[clients] = assign
        self.fedavg(clients, local, assign)
        if self.pool is not None and self.num_clusters > 1:
            pool = self.book.position(self.pool)  # the book asserted above
            if not (self.cluster == pool).any():
                self.remove_clusters([pool])
                self.pool = None
        payload = len(clients) * self.model_bytes()
        return RoundResult(payload, payload, extra={"icfl_threshold": threshold,
                                                    "min_connectivity": min(conn, default=float("nan"))})

    def _join(self, assign: np.ndarray, delta: torch.Tensor, pool: int) -> None:
        """Sampled pool clients join the cluster with the most cosine-similar mean update of the round."""
        joiners = np.flatnonzero(assign == pool)
        targets = [k for k in range(self.num_clusters) if k != pool and (assign == k).any()]
        if not len(joiners) or not targets:
            return
        reps = torch.stack([delta[torch.as_tensor(np.flatnonzero(assign == k))].mean(0) for k in targets])
        sim = cosine_similarity(torch.cat([delta[torch.as_tensor(joiners)], reps]))[: len(joiners), len(joiners):]
        assign[joiners] = np.asarray(targets)[sim.argmax(1)]

"""Split and removal of clusters on the whole server state of a soft or hard K-model method (HCFL paper Alg. 2 lines
21–31 with Alg. 4 and 5; FedRC paper App. H.4 Alg. 3), keeping models, weights, statistics and stable ids consistent.

The state (held by :class:`~fedcluster.algorithms.hcfl.HCFL`): the model stack (position k = cluster
``book.ids[k]``), client-wise weights Ω / ω̃ [M, K], the latest per-sample responsibilities γ [N, K], the
sample-wise prior ω_{i,j;k} [N, K] (sample scope), the clients' latest soft label counts F_i [M, K, C] with
the label marginal C_{y,k}, the per-client Gaussian statistics of the ``joint`` formulation and, for
``hard-distance``, each client's assigned position. The server holds every client's weights, so the client
sides of Alg. 4/5 are applied to all clients at once (the replay of missed events of [added]).
"""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.algorithms.fedem import FedEM
from fedcluster.engine.params import Params
from fedcluster.tiers.adaptive import (
    ClusterBook,
    hard_split_weights,
    remove_clusters,
    remove_statistics,
    remove_weights,
    reposition,
    split_off,
    split_statistics,
    split_weights,
)
from fedcluster.tiers.aggregation import server_step, weighted_mean
from fedcluster.tiers.formulation import GaussianStats, label_marginal
from fedcluster.tiers.weights import segment_mean


def part_average(old: torch.Tensor, local: torch.Tensor, weights: np.ndarray, global_lr: float) -> torch.Tensor:
    """θ ← θ + η_g (Σ_i w_i θ_i / Σ_i w_i − θ) over the rows of ``local`` [m, ...] (HCFL paper Alg. 2 line 23 / Alg. 4
    line 2: the N_i-weighted mean of one part's local models); unchanged when the part has no weight."""
    if float(np.sum(weights)) <= 0:
        return old.clone()
    return server_step(old, weighted_mean(local, torch.as_tensor(weights, dtype=torch.float64, device=local.device)),
                       global_lr)


class ClusterChanges(FedEM):
    """Split / remove on the state of a K-model method; subclasses set ``book``, ``assigned`` and ``_round``."""

    fixed_clusters = False  # splits and removals change K

    book: ClusterBook
    assigned: np.ndarray
    _round: int

    def split_cluster(self, position: int, first: np.ndarray, second: np.ndarray, local: Params,
                      aggregation: np.ndarray, cohort: np.ndarray, old: Params, soft_update: bool) -> int:
        """Split ``position`` (k*) into the cohort rows ``first`` (C_{k*,1}, keeps the id) and ``second``
        (C_{k*,2}, the new cluster at position K^t). ``local`` holds the cohort's local models [m, K, ...] (or
        [m, ...] for hard methods), ``aggregation`` their aggregation weights A [m, K] and ``old`` the models
        θ^t. HCFL paper Alg. 2 line 23 and Alg. 4 line 2: θ_{k*} and θ_{K^t+1} are the A-weighted means of θ_{k*,i}
        over each part (only the heads when the feature extractor is shared; φ is already averaged).
        Weights: ``soft_update`` = SCWU (Alg. 4 lines 6–9, halving for every client and sample), otherwise the
        hard re-assignment of C_{k*,1} / C_{k*,2} (the "w/o SCWU" reading, and any hard method). Server
        statistics: F_{·,K^t+1} ← F_{·,k*} (Alg. 4 lines 3–4). Returns the new position."""
        lr = self.ctx.cfg.global_lr
        a = aggregation[:, position]
        new_unit: Params = {}
        for name, cur in self.models.items():
            if self.split and name.startswith("body."):
                new_unit[name] = cur[position].clone()
                continue
            loc = local[name] if local[name].dim() == cur.dim() else local[name][:, position]
            mask1, mask2 = np.zeros(len(a)), np.zeros(len(a))
            mask1[first], mask2[second] = 1.0, 1.0
            cur[position] = part_average(old[name][position], loc, a * mask1, lr)
            new_unit[name] = part_average(old[name][position], loc, a * mask2, lr)
        movers = cohort[second]
        self.models, new = split_off(self.models, self.book, self._round, position, new_unit, movers)
        if soft_update:
            self.omega = split_weights(self.omega, position)
            self.gamma = split_weights(self.gamma, position).astype(np.float32)
            if self.sample_prior is not None:
                self.sample_prior = split_weights(self.sample_prior, position).astype(np.float32)
        else:
            m = self.ctx.fed.num_clients
            second_c = np.zeros(m, dtype=bool)
            second_c[movers] = True
            first_c = (self.omega.argmax(1) == position) & ~second_c
            owner = self.ctx.fed.train.owner()
            self.omega = hard_split_weights(self.omega, position, second_c, first_c)
            self.gamma = hard_split_weights(self.gamma, position, second_c[owner], first_c[owner]).astype(np.float32)
            if self.sample_prior is not None:
                self.sample_prior = hard_split_weights(self.sample_prior, position, second_c[owner],
                                                       first_c[owner]).astype(np.float32)
        self.assigned[movers[self.assigned[movers] == position]] = new
        self.counts = split_statistics(self.counts, position, axis=1)
        self.client_stats = {c: _stats_split(s, position) for c, s in self.client_stats.items()}
        self._refresh_statistics()
        return new

    def remove_clusters(self, positions: np.ndarray, rule: str = "alg5") -> None:
        """Delete ``positions``. ``rule="alg5"`` (HCFL paper Alg. 5 lines 5–7): ω̃, ω_{i,j;k} and γ rows renormalised
        over
        the survivors. ``rule="s4"`` (FedRC paper Alg. 3 step 2): γ renormalised, then ω_{i;k} = mean_j γ_{i,j;k}.
        Server statistics F_{·,k_r} are dropped (Alg. 5 lines 2–3)."""
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == 0:
            return
        k = self.num_clusters
        self.models, keep = remove_clusters(self.models, self.book, self._round, positions)
        self.gamma = remove_weights(self.gamma, positions).astype(np.float32)
        if rule == "s4":
            tr = self.ctx.fed.train
            self.omega = segment_mean(self.gamma.astype(np.float64), tr.owner(), self.ctx.fed.num_clients)
        else:
            self.omega = remove_weights(self.omega, positions)
        if self.sample_prior is not None:
            self.sample_prior = remove_weights(self.sample_prior, positions).astype(np.float32)
        self.assigned = reposition(self.assigned, keep, k)
        self.counts = remove_statistics(self.counts, positions, axis=1)
        self.client_stats = {c: _stats_remove(s, positions) for c, s in self.client_stats.items()}
        self._refresh_statistics()

    def _refresh_statistics(self) -> None:
        """C_{y,k} and ν_k from the (split / trimmed) per-client statistics."""
        self.marginal = label_marginal(self.counts.sum(0))
        stats = list(self.client_stats.values())
        self.density = sum(stats[1:], stats[0]) if stats else None


def _stats_split(s: GaussianStats, position: int) -> GaussianStats:
    return GaussianStats(split_statistics(s.s0, position), split_statistics(s.s1, position),
                         split_statistics(s.s2, position))


def _stats_remove(s: GaussianStats, positions: np.ndarray) -> GaussianStats:
    return GaussianStats(remove_statistics(s.s0, positions), remove_statistics(s.s1, positions),
                         remove_statistics(s.s2, positions))

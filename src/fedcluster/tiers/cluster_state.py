"""The server's clustering state, one type for hard and soft methods: K stacked models, client weights Ω, the
per-sample responsibilities γ and sample-wise prior (soft methods), the tier-1 statistics, stable cluster ids,
each client's hard position, which clients a round has estimated and the rounds done.

A method keeps one :class:`ClusterState` (``alg.state``) and reads its fields through :class:`StateField`
attributes (``alg.models``, ``alg.omega``, ``alg.gamma`` …). :meth:`ClusterState.split` and
:meth:`ClusterState.remove` change K on the whole soft or hard state at once (HCFL paper Alg. 2 lines 21–31 with
Alg. 4 and 5; FedRC paper App. H.4 Alg. 3), keeping models, weights, statistics and stable ids consistent. The
server holds every client's weights, so the client sides of Alg. 4/5 are applied to all clients at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedcluster.models.params import Params
from fedcluster.tiers.adaptive import (
    ClusterBook,
    hard_split_weights,
    remove_clusters,
    remove_weights,
    reposition,
    split_off,
    split_weights,
)
from fedcluster.tiers.aggregation import server_step, weighted_mean
from fedcluster.tiers.formulation import ServerStatistics
from fedcluster.tiers.weights import segment_mean


@dataclass
class ClusterState:
    models: Params  # K stacked models; position k is cluster book.ids[k]
    omega: np.ndarray  # [M, K] client weights Ω (one-hot for hard methods; ω̃ in HCFL+)
    gamma: np.ndarray | None = None  # [N, K] the latest per-sample responsibilities (fixed-K and soft methods)
    sample_prior: np.ndarray | None = None  # [N, K] ω_{i,j;k} (HCFL+'s sample scope)
    stats: ServerStatistics | None = None  # tier-1 statistics (label counts, input densities)
    book: ClusterBook | None = None  # stable ids and the log of every split, merge and removal
    assigned: np.ndarray | None = None  # [M] each client's hard position (−1: not assigned yet)
    estimated: np.ndarray | None = None  # [M] Ω row set by a round (or known: oracle)
    rounds_done: int = 0  # completed rounds

    @property
    def num_clusters(self) -> int:
        return len(next(iter(self.models.values())))

    def split(self, position: int, first: np.ndarray, second: np.ndarray, local: Params, aggregation: np.ndarray,
              cohort: np.ndarray, old: Params, *, soft_update: bool, global_lr: float, shared_body: bool,
              owner: np.ndarray, round_: int) -> int:
        """Split ``position`` (k*) into the cohort rows ``first`` (C_{k*,1}, keeps the id) and ``second``
        (C_{k*,2}, the new cluster at position K^t). ``local`` holds the cohort's local models [m, K, ...] (or
        [m, ...] for hard methods), ``aggregation`` their aggregation weights A [m, K] and ``old`` the models
        θ^t. HCFL paper Alg. 2 line 23 and Alg. 4 line 2: θ_{k*} and θ_{K^t+1} are the A-weighted means of θ_{k*,i}
        over each part (only the heads when the feature extractor is shared; φ is already averaged).
        Weights: ``soft_update`` = SCWU (Alg. 4 lines 6–9, halving for every client and sample), otherwise the
        hard re-assignment of C_{k*,1} / C_{k*,2} (the "w/o SCWU" reading, and any hard method); ``owner``: the
        client of every training row. Server statistics: F_{·,K^t+1} ← F_{·,k*} (Alg. 4 lines 3–4). Returns the
        new position."""
        assert self.book is not None and self.assigned is not None and self.gamma is not None
        a = aggregation[:, position]
        new_unit: Params = {}
        for name, cur in self.models.items():
            if shared_body and name.startswith("body."):
                new_unit[name] = cur[position].clone()
                continue
            loc = local[name] if local[name].dim() == cur.dim() else local[name][:, position]
            mask1, mask2 = np.zeros(len(a)), np.zeros(len(a))
            mask1[first], mask2[second] = 1.0, 1.0
            cur[position] = part_average(old[name][position], loc, a * mask1, global_lr)
            new_unit[name] = part_average(old[name][position], loc, a * mask2, global_lr)
        movers = cohort[second]
        self.models, new = split_off(self.models, self.book, round_, position, new_unit, movers)
        if soft_update:
            self.omega = split_weights(self.omega, position)
            self.gamma = split_weights(self.gamma, position).astype(np.float32)
            if self.sample_prior is not None:
                self.sample_prior = split_weights(self.sample_prior, position).astype(np.float32)
        else:
            second_c = np.zeros(len(self.omega), dtype=bool)
            second_c[movers] = True
            first_c = (self.omega.argmax(1) == position) & ~second_c
            self.omega = hard_split_weights(self.omega, position, second_c, first_c)
            self.gamma = hard_split_weights(self.gamma, position, second_c[owner], first_c[owner]).astype(np.float32)
            if self.sample_prior is not None:
                self.sample_prior = hard_split_weights(self.sample_prior, position, second_c[owner],
                                                       first_c[owner]).astype(np.float32)
        self.assigned[movers[self.assigned[movers] == position]] = new
        if self.stats is not None:
            self.stats.split(position)
        return new

    def remove(self, positions: np.ndarray, *, owner: np.ndarray, round_: int, rule: str = "alg5") -> None:
        """Delete ``positions``. ``rule="alg5"`` (HCFL paper Alg. 5 lines 5–7): ω̃, ω_{i,j;k} and γ rows
        renormalised over the survivors. ``rule="s4"`` (FedRC paper Alg. 3 step 2): γ renormalised, then
        ω_{i;k} = mean_j γ_{i,j;k} over each client's rows (``owner``). Server statistics F_{·,k_r} are dropped
        (Alg. 5 lines 2–3)."""
        assert self.book is not None and self.assigned is not None and self.gamma is not None
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == 0:
            return
        k = self.num_clusters
        self.models, keep = remove_clusters(self.models, self.book, round_, positions)
        self.gamma = remove_weights(self.gamma, positions).astype(np.float32)
        if rule == "s4":
            self.omega = segment_mean(self.gamma.astype(np.float64), owner, len(self.omega))
        else:
            self.omega = remove_weights(self.omega, positions)
        if self.sample_prior is not None:
            self.sample_prior = remove_weights(self.sample_prior, positions).astype(np.float32)
        self.assigned = reposition(self.assigned, keep, k)
        if self.stats is not None:
            self.stats.remove(positions)


def part_average(old: torch.Tensor, local: torch.Tensor, weights: np.ndarray, global_lr: float) -> torch.Tensor:
    """θ ← θ + η_g (Σ_i w_i θ_i / Σ_i w_i − θ) over the rows of ``local`` [m, ...] (HCFL paper Alg. 2 line 23 / Alg. 4
    line 2: the N_i-weighted mean of one part's local models); unchanged when the part has no weight."""
    if float(np.sum(weights)) <= 0:
        return old.clone()
    return server_step(old, weighted_mean(local, torch.as_tensor(weights, dtype=torch.float64, device=local.device)),
                       global_lr)


class StateField:
    """A method attribute that reads and writes a field of its ``state`` (``alg.omega`` is ``alg.state.omega``);
    a dotted path reaches into a part of the state (``stats.counts``)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path

    def __set_name__(self, owner: type, name: str) -> None:
        self.path = self.path or name

    def _holder(self, obj: Any) -> tuple[Any, str]:
        assert self.path is not None
        *parts, last = self.path.split(".")
        holder = obj.state
        for part in parts:
            holder = getattr(holder, part)
        return holder, last

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        holder, last = self._holder(obj)
        return getattr(holder, last)

    def __set__(self, obj: Any, value: Any) -> None:
        holder, last = self._holder(obj)
        setattr(holder, last, value)

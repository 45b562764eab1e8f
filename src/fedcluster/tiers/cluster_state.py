"""The server's clustering state, one type for hard and soft methods: K stacked models, client weights Ω, the
per-sample responsibilities γ and sample-wise prior (soft methods), the tier-1 statistics, stable cluster ids,
each client's hard position, which clients a round has estimated and the rounds done.

A method keeps one :class:`ClusterState` (``alg.state``) and reads its fields through
:class:`~fedcluster.tiers.saved_fields.StateField` attributes (``alg.models``, ``alg.omega``, ``alg.gamma`` …), which
also declare how each is saved. Every change of K goes through the state, which keeps
models, weights, statistics, the clients' positions and stable ids consistent:

* :meth:`ClusterState.split` — a soft or hard split from the cohort's local models (HCFL paper Alg. 2 line 23,
  Alg. 4); :meth:`ClusterState.split_copy` — a hard split whose new cluster starts from a copy of the model (CFL,
  ICFL, FedGWC);
* :meth:`ClusterState.merge` — merged clusters (StoCFL);
* :meth:`ClusterState.regroup` — a one-shot clustering that replaces every cluster (PACFL, FL+HC, FedGroup);
* :meth:`ClusterState.remove` — removed clusters (HCFL paper Alg. 5; FedRC paper App. H.4 Alg. 3; a hard state's
  clusters without members).

The server holds every client's weights, so the client sides of Alg. 4/5 are applied to all clients at once.
:meth:`ClusterState.record` is the round's ``clusters.jsonl`` line and :meth:`ClusterState.changes` its
``splits``/``merges``/``removals`` columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedcluster.models.param_dict import Params
from fedcluster.tiers.aggregation import server_step, weighted_mean
from fedcluster.tiers.cluster_book import (
    ClusterBook,
    hard_split_weights,
    merge_clusters,
    remove_clusters,
    remove_weights,
    reposition,
    split_off,
    split_weights,
)
from fedcluster.tiers.cohort import segment_mean
from fedcluster.tiers.formulation import ServerStatistics

Groups = dict[str, tuple[np.ndarray, list[str]]]  # grouping -> (group of every training sample, group names)


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

    def split_copy(self, position: int, movers: np.ndarray, round_: int) -> int:
        """A hard split: the clients ``movers`` leave ``position`` for a new cluster at position K^t that starts from
        a copy of its model (CFL, ICFL, FedGWC). Returns the new position."""
        assert self.book is not None and self.assigned is not None
        self.models, new = split_off(self.models, self.book, round_, position,
                                     {n: v[position] for n, v in self.models.items()}, movers)
        self.assigned[np.asarray(movers, dtype=np.int64)] = new
        return new

    def regroup(self, models: Params, clients: np.ndarray, positions: np.ndarray) -> None:
        """A one-shot clustering (PACFL, FL+HC, FedGroup's cold start): the stack ``models`` replaces the current
        one, the book starts again with ids 0..K−1 and no events, and ``clients`` take the hard ``positions``."""
        assert self.assigned is not None
        self.models = models
        self.book = ClusterBook.start(self.num_clusters)
        self.assigned[np.asarray(clients, dtype=np.int64)] = positions

    def merge(self, groups: list[tuple[int, list[int]]], round_: int, models: Params | None = None) -> np.ndarray:
        """Fold the absorbed positions of each (keep, absorbed) into keep (StoCFL); ``models`` (the full stack
        before the drop, e.g. merged averages) replaces the current one. Returns the kept positions."""
        assert self.book is not None and self.assigned is not None
        k = self.num_clusters
        self.models, keep, remap = merge_clusters(self.models if models is None else models, self.book, round_,
                                                  groups)
        self.assigned = reposition(self.assigned, keep, k, remap)
        return keep

    def remove(self, positions: np.ndarray | list[int], *, round_: int, owner: np.ndarray | None = None,
               rule: str = "alg5") -> np.ndarray:
        """Delete ``positions``; returns the kept positions. A hard state (no γ) removes clusters without members
        only. Otherwise ``rule="alg5"`` (HCFL paper Alg. 5 lines 5–7): ω̃, ω_{i,j;k} and γ rows renormalised over
        the survivors; ``rule="s4"`` (FedRC paper Alg. 3 step 2): γ renormalised, then ω_{i;k} = mean_j γ_{i,j;k}
        over each client's rows (``owner``). Server statistics F_{·,k_r} are dropped (Alg. 5 lines 2–3)."""
        assert self.book is not None and self.assigned is not None
        positions = np.asarray(positions, dtype=np.int64)
        k = self.num_clusters
        if self.gamma is None:
            if np.isin(self.assigned, positions).any():
                raise ValueError("only clusters without members can be removed")
            self.models, keep = remove_clusters(self.models, self.book, round_, positions)
            self.assigned = reposition(self.assigned, keep, k)
            return keep
        if len(positions) == 0:
            return np.arange(k)
        self.models, keep = remove_clusters(self.models, self.book, round_, positions)
        self.gamma = remove_weights(self.gamma, positions).astype(np.float32)
        if rule == "s4":
            assert owner is not None
            self.omega = segment_mean(self.gamma.astype(np.float64), owner, len(self.omega))
        else:
            self.omega = remove_weights(self.omega, positions)
        if self.sample_prior is not None:
            self.sample_prior = remove_weights(self.sample_prior, positions).astype(np.float32)
        self.assigned = reposition(self.assigned, keep, k)
        if self.stats is not None:
            self.stats.remove(positions)
        return keep

    # -- what a round writes -----------------------------------------------------------------------------
    def record(self, groups: Groups, owner: np.ndarray | None = None) -> dict[str, Any]:
        """The round's ``clusters.jsonl`` line: for each grouping, ``mass[k][g]`` = Σ over training samples j of
        group g of γ_{j;k} (a hard state: the samples of group g whose client, ``owner[j]``, is in cluster k),
        rounded to 6 significant digits, with the names of the groups that have samples; with a cluster book, the
        positions' stable ``ids`` and the ``events`` of the round just done."""
        rec: dict[str, Any] = {}
        for key, (g, names) in groups.items():
            mass = self.mass(g, len(names), owner)
            used = mass.sum(0) > 0  # drop groups without samples (e.g. unused style names)
            rec[key] = {"names": [n for n, u in zip(names, used, strict=True) if u],
                        "mass": [[float(f"{v:.6g}") for v in row[used]] for row in mass]}
        if self.book is not None:
            rec["ids"] = list(self.book.ids)
            rec["events"] = [e.to_dict() for e in self.book.events_in(self.rounds_done)]
        return rec

    def mass(self, groups: np.ndarray, num_groups: int, owner: np.ndarray | None = None) -> np.ndarray:
        """[K, G] Σ_{j in group g} γ_{j;k} (summed in row order, a column at a time); a hard state counts the
        samples of each (cluster, group)."""
        k = self.num_clusters
        if self.gamma is None:
            assert self.assigned is not None and owner is not None
            pos = self.assigned[owner]
            return np.bincount(pos * num_groups + groups, minlength=k * num_groups).reshape(k, num_groups
                                                                                           ).astype(float)
        return cluster_mass(self.gamma, groups, num_groups)

    def changes(self, round_: int) -> dict[str, float]:
        """The ``splits``, ``merges``, ``removals`` columns: the book's events of (1-based) ``round_``."""
        assert self.book is not None
        return {"splits": float(self.book.count(round_, "split")), "merges": float(self.book.count(round_, "merge")),
                "removals": float(self.book.count(round_, "remove"))}

    # -- the fields a method reads and writes (fedcluster.tiers.saved_fields.StateField) -------------------
    def get(self, path: str) -> Any:
        holder, last = self._holder(path)
        return getattr(holder, last)

    def put(self, path: str, value: Any) -> None:
        holder, last = self._holder(path)
        setattr(holder, last, value)

    def _holder(self, path: str) -> tuple[Any, str]:
        *parts, last = path.split(".")
        holder: Any = self
        for part in parts:
            holder = getattr(holder, part)
        return holder, last


def cluster_mass(gamma: np.ndarray, groups: np.ndarray, num_groups: int) -> np.ndarray:
    """[K, G] Σ_{j in group g} γ_{j;k} (summed in row order, as ``np.add.at`` would, but a column at a time)."""
    return np.stack([np.bincount(groups, weights=gamma[:, k], minlength=num_groups) for k in range(gamma.shape[1])])


def part_average(old: torch.Tensor, local: torch.Tensor, weights: np.ndarray, global_lr: float) -> torch.Tensor:
    """θ ← θ + η_g (Σ_i w_i θ_i / Σ_i w_i − θ) over the rows of ``local`` [m, ...] (HCFL paper Alg. 2 line 23 / Alg. 4
    line 2: the N_i-weighted mean of one part's local models); unchanged when the part has no weight."""
    if float(np.sum(weights)) <= 0:
        return old.clone()
    return server_step(old, weighted_mean(local, torch.as_tensor(weights, dtype=torch.float64, device=local.device)),
                       global_lr)


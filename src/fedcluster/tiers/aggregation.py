"""The server update, written once: θ ← θ + η_g (mean − θ), where mean is a weighted average of local models.

``η_g`` is the run's ``global_lr`` (1 gives plain model averaging, FedAvg paper Alg. 1). Every method's server
step goes through :func:`server_step`:

* one model from a cohort (FedAvg, FedProx, StoCFL's global model): :func:`server_update`;
* K cluster models with an aggregation weight per (client, cluster), A [m, K] (hard methods: N_i at the client's
  cluster; soft ones: N_i times the E-step weight), a cluster nobody weights keeping its model, and optionally a
  shared feature extractor φ averaged over all clients (HCFL paper Sec. 4.1): :func:`cluster_update`;
* one part of a split cluster (HCFL paper Alg. 4 line 2): :func:`weighted_mean` then :func:`server_step`;
* clusters merged in a round (StoCFL): :func:`merged_update`;
* FedRC-FT's average of the fine-tuned models and FedMD's per-cluster update: :func:`weighted_mean`.

Weights are float64; the means are formed in the models' dtype (fp32), exactly as each method did before.

Where the weights are known before local training, the weighted sums can be formed as the trained models come in,
call by call (:class:`ModelSums`, :class:`ClusterSums`; backends.fold): no method then holds every client's trained
model. Added in one piece, they compute exactly what :func:`server_update` / :func:`cluster_update` compute;
added in several, the sum over units is split into partial sums (equal to float rounding).
"""

from __future__ import annotations

import torch

from fedcluster.models.param_dict import Params


def server_step(current: torch.Tensor, mean: torch.Tensor, global_lr: float) -> torch.Tensor:
    """θ ← θ + η_g (mean − θ)."""
    return current + global_lr * (mean - current)


def weighted_mean(stacked: torch.Tensor, weights: torch.Tensor, total: torch.Tensor | None = None) -> torch.Tensor:
    """Σ_u w_u θ_u / Σ_u w_u over the leading (unit) dimension of ``stacked``; with ``total``, Σ_u w_u θ_u / total
    (a part of a larger cohort: FedMD's within-cluster updates weighted against the whole cohort)."""
    w = weights.to(torch.float64) / (weights.sum() if total is None else total)
    return torch.tensordot(w.to(stacked.device, stacked.dtype), stacked, dims=([0], [0]))


def server_update(current: Params, local: Params, weights: torch.Tensor, global_lr: float) -> Params:
    """One model: θ ← θ + η_g Σ_u w_u (θ_u − θ) / Σ_u w_u."""
    return {k: server_step(v, weighted_mean(local[k], weights), global_lr) for k, v in current.items()}


def cluster_update(models: Params, local: Params, weights: torch.Tensor, global_lr: float,
                   shared_body: bool = False) -> Params:
    """K models [K, ...] from the cohort's ``local`` models — [m, K, ...] (client i's model for cluster k) or
    [m, ...] (one model per client) — with aggregation weights A [m, K] (float64): θ_k ← θ_k + η_g (Σ_i A_ik θ_i /
    Σ_i A_ik − θ_k), unchanged where Σ_i A_ik = 0. ``shared_body``: the ``body.*`` parameters (φ, stored K times)
    become the Σ_k A_ik-weighted mean over every client (HCFL paper Sec. 4.1)."""
    total = weights.sum(0)
    new: Params = {}
    for name, cur in models.items():
        loc = local[name]
        if shared_body and name.startswith("body."):
            w = weights.sum(1)
            if w.sum() <= 0:
                new[name] = cur
                continue
            one = loc if loc.dim() == cur.dim() else loc[:, 0]
            new[name] = server_step(cur[0], weighted_mean(one, w), global_lr).unsqueeze(0).expand_as(cur).clone()
            continue
        norm = (weights / total.clamp_min(1e-300)).to(cur.dtype)  # [m, K]
        mean = torch.einsum("mk,m...->k..." if loc.dim() == cur.dim() else "mk,mk...->k...", norm, loc)
        new[name] = cluster_step(cur, mean, total, global_lr)
    return new


def cluster_step(cur: torch.Tensor, mean: torch.Tensor, total: torch.Tensor, global_lr: float) -> torch.Tensor:
    """θ_k ← θ_k + η_g (mean_k − θ_k) for the clusters with a positive total weight; the others keep θ_k."""
    keep = (total <= 0).view(-1, *[1] * (cur.dim() - 1))
    return torch.where(keep, cur, server_step(cur, mean, global_lr))


def merged_update(models: Params, local: Params, base: torch.Tensor, kept: torch.Tensor, trained: torch.Tensor,
                  global_lr: float) -> Params:
    """Clusters that merge this round (StoCFL, A.0 step 4), in float64: for every new cluster c, the start
    θ̄_c = Σ_k B_ck θ_k / Σ_k B_ck and the mean (Σ_k O_ck θ_k + Σ_i L_ci θ_i) / Σ_k B_ck of the old models ``models``
    [K, ...] with weights ``kept`` O [C, K] and the local models ``local`` [m, ...] with weights ``trained`` L [C, m];
    ``base`` B [C, K] weights every old model by all its members. θ_c ← θ̄_c + η_g (mean − θ̄_c)."""
    k, m = len(next(iter(models.values()))), len(next(iter(local.values())))
    total = base.sum(1, keepdim=True).clamp_min(1e-300)
    out: Params = {}
    for name, cur in models.items():
        flat_cur, flat_loc = cur.reshape(k, -1).double(), local[name].reshape(m, -1).double()
        start = base @ flat_cur / total
        mean = (kept @ flat_cur + trained @ flat_loc) / total
        out[name] = server_step(start, mean, global_lr).to(cur.dtype).view_as(cur)
    return out


class ModelSums:
    """One model's weighted mean Σ_u w_u θ_u / Σ_u w_u, added call by call (:func:`server_update`'s mean): units
    ``lo:hi`` of the cohort come in through :meth:`add`."""

    group = 1  # units per client

    def __init__(self, weights: torch.Tensor) -> None:
        self.norm = weights.to(torch.float64) / weights.sum()
        self.sums: Params = {}

    def add(self, lo: int, hi: int, trained: Params) -> None:
        for name, loc in trained.items():
            part = torch.tensordot(self.norm[lo:hi].to(loc.device, loc.dtype), loc, dims=([0], [0]))
            self.sums[name] = part if name not in self.sums else self.sums[name] + part

    def update(self, current: Params, global_lr: float) -> Params:
        """θ ← θ + η_g (mean − θ) with the mean of every unit added."""
        return {k: server_step(v, self.sums[k], global_lr) if k in self.sums else v for k, v in current.items()}


class ClusterSums:
    """The K clusters' weighted means Σ_i A_ik θ_ik / Σ_i A_ik (:func:`cluster_update` without a shared body), added
    call by call. ``pairs``: the units are the (client, cluster) pairs, client-major (unit i·K + k, so calls hold
    whole clients: ``group`` = K); else one unit per client, offered to every cluster."""

    def __init__(self, models: Params, weights: torch.Tensor, pairs: bool) -> None:
        self.k = len(next(iter(models.values())))
        self.group = self.k if pairs else 1
        self.total = weights.sum(0)
        self.norm = weights / self.total.clamp_min(1e-300)  # [m, K] float64
        self.sums: Params = {}

    def add(self, lo: int, hi: int, trained: Params) -> None:
        first, last = lo // self.group, hi // self.group
        for name, loc in trained.items():
            n = last - first
            offered = (loc.view(n, self.k, *loc.shape[1:]) if self.group > 1
                       else loc.unsqueeze(1).expand(n, self.k, *loc.shape[1:]))
            part = torch.einsum("mk,mk...->k...", self.norm[first:last].to(loc.dtype), offered)
            self.sums[name] = part if name not in self.sums else self.sums[name] + part

    def update(self, models: Params, global_lr: float) -> Params:
        """The K models after the server step with the means of every unit added (a cluster nobody weights, or
        any model no unit came in for, is kept)."""
        return {name: cluster_step(cur, self.sums[name], self.total, global_lr) if name in self.sums else cur
                for name, cur in models.items()}

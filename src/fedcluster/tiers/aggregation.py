"""The server update, written once: θ ← θ + η_g (mean − θ), where mean is a weighted average of local models.

``η_g`` is the run's ``global_lr`` (1 gives plain model averaging, FedAvg paper Alg. 1). Every method's server
step goes through :func:`server_step`:

* one model from a cohort (FedAvg, FedProx, StoCFL's global model): :func:`server_update`;
* K cluster models with an aggregation weight per (client, cluster), A [m, K] (hard methods: N_i at the client's
  cluster; soft ones: N_i times the E-step weight), a cluster nobody weights keeping its model, and optionally a
  shared feature extractor φ averaged over all clients (HCFL paper Sec. 4.1): :func:`cluster_update`;
* one part of a split cluster (HCFL paper Alg. 4 line 2) or a merged cluster (StoCFL): :func:`weighted_mean`
  then :func:`server_step`.

Weights are float64; the means are formed in the models' dtype (fp32), exactly as each method did before.
"""

from __future__ import annotations

import torch

from fedcluster.models.params import Params


def server_step(current: torch.Tensor, mean: torch.Tensor, global_lr: float) -> torch.Tensor:
    """θ ← θ + η_g (mean − θ)."""
    return current + global_lr * (mean - current)


def weighted_mean(stacked: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ_u w_u θ_u / Σ_u w_u over the leading (unit) dimension of ``stacked``."""
    w = weights.to(torch.float64) / weights.sum()
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
        keep = (total <= 0).view(-1, *[1] * (cur.dim() - 1))
        new[name] = torch.where(keep, cur, server_step(cur, mean, global_lr))
    return new

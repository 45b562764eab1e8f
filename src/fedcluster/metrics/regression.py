"""Regression metrics of the papers: FedMD paper's estimation error and CFL-GP paper's rounds-to-ARI.

* :func:`param_error` — FedMD paper's d(θ̂, θ*) = min over permutations π of max_ℓ ‖θ̂_π(ℓ) − θ*_ℓ‖₂ (a
  bottleneck assignment; exact enumeration for k ≤ 7, threshold search with Hungarian feasibility checks
  beyond).
* :func:`regression_extras` — the extra ``rounds.csv`` columns of a regression run whose federation holds
  ``extras["theta_star"]``: ``param_error``, ``client_error`` (FedMD paper's per-client ‖θ̂_{z_{i,t}} − θ*_{z_i}‖,
  averaged) and ``mse`` (mean over clients of the validation MSE of the client's assigned model).
* :func:`rounds_to_ari` — CFL-GP paper App. D Tables 3–4: first round at which a run's peak ARI and ARI = 1 are reached.

Linear models: θ̂ is the flattened ``head.weight`` of the ``linear`` / ``linear-nobias`` models, followed by
``head.bias`` when θ* has one more coordinate than the weight (CFL-GP paper's line ŷ = θ_1 x + θ_2); FedMD paper's θ*
has no
bias, so only the weight part is compared there (train FedMD paper runs with ``linear-nobias`` to match its model).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from fedcluster.models.param_dict import Params

if TYPE_CHECKING:
    from fedcluster.data.federation import Federation, Split


def bottleneck_permutation(cost: np.ndarray) -> tuple[np.ndarray, float]:
    """Permutation π minimising max_ℓ cost[π(ℓ), ℓ]; returns (π, value). ``cost`` is square."""
    k = cost.shape[0]
    if k <= 7:
        best, best_val = None, np.inf
        cols = np.arange(k)
        for perm in itertools.permutations(range(k)):
            v = cost[list(perm), cols].max()
            if v < best_val:
                best, best_val = np.array(perm), v
        return best, float(best_val)
    # Smallest threshold τ whose "cost ≤ τ" graph has a perfect matching (binary search over the values).
    values = np.unique(cost)
    lo, hi = 0, len(values) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        r, c = linear_sum_assignment((cost > values[mid]).astype(float))
        if (cost[r, c] > values[mid]).any():
            lo = mid + 1
        else:
            hi = mid
    r, c = linear_sum_assignment(np.where(cost <= values[lo], cost, cost.max() * k + 1.0))
    perm = np.empty(k, dtype=np.int64)
    perm[c] = r
    return perm, float(values[lo])


def param_error(theta_hat: np.ndarray, theta_star: np.ndarray) -> float:
    """FedMD paper's estimation error min_π max_ℓ ‖θ̂_π(ℓ) − θ*_ℓ‖₂.

    With fewer estimates than true models the missing ones count as infinitely far (error ∞); extra
    estimates are allowed (the best k of them are matched).
    """
    theta_hat = np.asarray(theta_hat, dtype=np.float64).reshape(len(theta_hat), -1)
    theta_star = np.asarray(theta_star, dtype=np.float64).reshape(len(theta_star), -1)
    if len(theta_hat) < len(theta_star):
        return float("inf")
    dist = np.linalg.norm(theta_hat[:, None, :] - theta_star[None, :, :], axis=-1)  # [K_hat, k]
    if dist.shape[0] > dist.shape[1]:  # pad θ* with dummy models at distance 0
        dist = np.concatenate([dist, np.zeros((dist.shape[0], dist.shape[0] - dist.shape[1]))], 1)
    return bottleneck_permutation(dist)[1]


def linear_params(models: Params, dim: int | None = None) -> np.ndarray:
    """[K, d] (or [K, d+1] with the bias when ``dim`` = d+1) parameter vectors of stacked linear models."""
    w = models["head.weight"].detach().double()
    w = w.reshape(len(w), -1).cpu().numpy()
    if dim is not None and dim == w.shape[1] + 1:
        b = models.get("head.bias")
        b = np.zeros((len(w), 1)) if b is None else b.detach().double().reshape(len(w), -1).cpu().numpy()
        return np.concatenate([w, b], 1)
    return w


def rounds_to_ari(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(first round reaching the run's maximal ARI, first round with ARI = 1; NaN if never), CFL-GP paper Tables 3–4."""
    rounds = np.array([r["round"] for r in rows if not np.isnan(r["ari"])], dtype=float)
    ari = np.array([r["ari"] for r in rows if not np.isnan(r["ari"])], dtype=float)
    if not len(ari):
        return float("nan"), float("nan")
    to_max = float(rounds[np.argmax(ari >= ari.max() - 1e-12)])
    hit = np.flatnonzero(ari >= 1.0 - 1e-12)
    return to_max, float(rounds[hit[0]]) if len(hit) else float("nan")


def regression_extras(fed: Federation, models: Params, assignment: Callable[[], np.ndarray],
                      predict: Callable[[Split, bool], torch.Tensor],
                      per_client: Callable[[Split, Callable[[Split], np.ndarray]], np.ndarray]) -> dict[str, float]:
    """``param_error``, ``client_error`` and ``mse`` of a regression method's current ``models`` (else {}): the
    method supplies its client assignment, its prediction and the engine's per-client map (``Trainer.per_client``,
    which runs on the rank holding each client)."""
    if fed.task != "regression" or "theta_star" not in fed.extras or "head.weight" not in models:
        return {}
    theta_star = np.asarray(fed.extras["theta_star"], dtype=np.float64)
    est = linear_params(models, theta_star.shape[1])
    if est.shape[1] != theta_star.shape[1]:
        return {}
    assign = assignment()
    per_client_error = np.linalg.norm(est[assign] - theta_star[fed.true_cluster], axis=1)

    @torch.no_grad()
    def client_mse(part: Split) -> np.ndarray:
        sq = ((predict(part, True).squeeze(-1) - part.y) ** 2).double().cpu().numpy()
        return np.bincount(part.owner(), sq, part.num_clients) / np.maximum(part.sizes, 1)

    mse = per_client(fed.val, client_mse)
    return {"param_error": param_error(est, theta_star), "client_error": float(per_client_error.mean()),
            "mse": float(mse.mean())}

"""Tier 2 — cluster weights: hard or soft, client-wise or sample-wise (HCFL paper Sec. 3–4–A.3).

Every rule works on a cohort at once: ``loglik`` [N, K] holds the tier-1 log-likelihoods of the cohort's
samples stored back to back, and ``owner`` [N] says which cohort client (0..m−1) each row belongs to.
Per-sample responsibilities γ [N, K] and client weights ω [m, K] are rows on the simplex.

* ``hard-loss`` (IFCA): k_i = argmax_k mean_j log L_k — the lowest mean loss for ``conditional`` —
  one-hot ω_i; sample scope takes the argmax per sample instead.
* ``hard-distance`` (FeSEM, HCFL paper footnote 6): k_i = argmin_k ‖θ_k − θ_i‖₂ between cluster and local models
  (the distances come from ``engine.params.distances``).
* ``soft-em`` (FedEM/FedRC E-step, FedRC paper eq. 3): γ_{i,j;k} = softmax_k(log ω_{i;k} + log L_k), ω_{i;k} = mean_j γ.
  With ``weights_scope=sample`` it is HCFL+'s eq. 4–5:
  γ uses the per-sample prior ω_{i,j;·}, γ̃ the client prior ω̃_{i;·}, ω̃ = mean_j γ̃ and
  ω_{i,j;k} ← μ̃ γ_{i,j;k} + (1 − μ̃) ω̃_{i;k}; μ̃ = 0 gives back the client-wise rule.
* ``fedsoft`` (Ruan & Joe-Wong 2022): u_{i;k} = share of client i's samples whose loss is
  lowest under θ_k, floored at σ and renormalised onto the simplex.
* FedRC-Adam (FedRC paper App. H.3): γ moved by Adam on g = γ^{t−1} − γ̂^t, clipped at 0 and renormalised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

WeightRule = Literal["hard-loss", "hard-distance", "soft-em", "fedsoft"]
Scope = Literal["client", "sample"]
_TINY = 1e-30


def segment_sum(values: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    """[m, K] sums of the rows of ``values`` [N, K] per owner."""
    out = np.zeros((m, values.shape[1]))
    np.add.at(out, owner, values)
    return out


def segment_mean(values: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    counts = np.bincount(owner, minlength=m)[:, None]
    return segment_sum(values, owner, m) / np.maximum(counts, 1)


def one_hot(index: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k)[np.asarray(index, dtype=np.int64)]


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def log_prior(prior: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(prior, _TINY))


# -- hard rules ------------------------------------------------------------------------------
def best_cluster(loglik: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    """[m] k_i = argmax_k mean_j log L_k (IFCA's lowest mean loss for ``conditional``)."""
    return segment_mean(loglik, owner, m).argmax(1)


def hard_loss(loglik: np.ndarray, owner: np.ndarray, m: int, scope: Scope = "client") -> np.ndarray:
    """γ [N, K]: one-hot at the client's best cluster (client scope) or each sample's (sample scope)."""
    k = loglik.shape[1]
    if scope == "sample":
        return one_hot(loglik.argmax(1), k)
    return one_hot(best_cluster(loglik, owner, m)[owner], k)


def hard_distance(distances: np.ndarray) -> np.ndarray:
    """ω [m, K]: one-hot at argmin_k ‖θ_k − θ_i‖ from the [m, K] local-to-cluster model distances."""
    return one_hot(np.asarray(distances).argmin(1), distances.shape[1])


# -- soft rules ------------------------------------------------------------------------------
@dataclass
class EStep:
    """Result of one E-step over a cohort."""

    gamma: np.ndarray  # [N, K] responsibilities that weight local training
    omega: np.ndarray  # [m, K] client-wise weights ω (ω̃ in HCFL+)
    sample_prior: np.ndarray | None = None  # [N, K] updated ω_{i,j;k} (sample scope only)


def soft_em(loglik: np.ndarray, owner: np.ndarray, client_prior: np.ndarray,
            sample_prior: np.ndarray | None = None, mu_tilde: float = 0.0) -> EStep:
    """One E-step (FedRC paper eq. 3; with ``sample_prior``, HCFL paper eq. 4–5)."""
    m = len(client_prior)
    tilde = softmax(log_prior(client_prior)[owner] + loglik)
    omega = segment_mean(tilde, owner, m)
    if sample_prior is None:
        return EStep(tilde, omega)
    gamma = softmax(log_prior(sample_prior) + loglik)
    return EStep(gamma, omega, mu_tilde * gamma + (1 - mu_tilde) * omega[owner])


def em_weights(loglik: np.ndarray, owner: np.ndarray, m: int, iters: int) -> np.ndarray:
    """ω [m, K] of clients with fixed models: ``iters`` E-steps from the uniform prior (test clients)."""
    omega = np.full((m, loglik.shape[1]), 1.0 / loglik.shape[1])
    for _ in range(iters):
        omega = soft_em(loglik, owner, omega).omega
    return omega


def fedsoft(loglik: np.ndarray, owner: np.ndarray, m: int, floor: float) -> np.ndarray:
    """u [m, K]: share of each client's samples that cluster k fits best, floored at σ, on the simplex."""
    k = loglik.shape[1]
    u = np.maximum(segment_mean(one_hot(loglik.argmax(1), k), owner, m), floor)
    return u / u.sum(1, keepdims=True)


def adam_em(gamma_prev: np.ndarray, gamma_hat: np.ndarray, m1: np.ndarray, m2: np.ndarray, lr: float,
            beta1: float, beta2: float, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FedRC-Adam (FedRC paper App. H.3): Adam step on g = γ^{t−1} − γ̂^t with the paper's constant bias
    correction (1 − β), then max(·, 0) and renormalisation over k. Rows that clip to all zeros fall back
    to the plain E-step γ̂. Returns (γ, first moment, second moment)."""
    g = gamma_prev - gamma_hat
    m1 = beta1 * m1 + (1 - beta1) * g
    m2 = beta2 * m2 + (1 - beta2) * g**2
    gamma = np.maximum(gamma_prev - lr * (m1 / (1 - beta1)) / (np.sqrt(m2 / (1 - beta2)) + eps), 0.0)
    total = gamma.sum(1, keepdims=True)
    gamma = np.where(total > 0, gamma / np.where(total > 0, total, 1.0), gamma_hat)
    return gamma, m1, m2

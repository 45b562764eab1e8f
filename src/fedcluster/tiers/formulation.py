"""Tier 1 — cluster formulation: the per-sample log-likelihood log L_k(x, y) of every cluster k.

HCFL's unified objective (HCFL paper eq. 1) is (1/N) Σ_i Σ_j log Σ_k ω_{i;k} L_k(x_ij, y_ij). The
choices, all returned as an [N, K] matrix from the per-sample losses ℓ_k = f(x, y; θ_k):

* ``conditional`` — L_k = P(y | x; θ_k) = exp(−ℓ_k)  (FedEM, IFCA, FeSEM);
* ``fedrc-ratio`` — FedRC's Ĩ = exp(−ℓ_k) / C_{y,k} (FedRC paper eq. 2), i.e. log L = −ℓ − log C_{y,k}, with
  C_{y,k} = Σ_{i,j} 1{y_ij = y} γ_{i,j;k} / Σ_{i,j} γ_{i,j;k}, the γ-weighted share of label y inside
  cluster k, computed by the server from the clients' soft label counts (FedRC paper Alg. 1 step 4:
  the formula, not the wording, and uniform 1/C before any statistics exist);
* ``joint`` — FedGMM's L_k = P(y | x; θ_k) · P(x; ν_k) (HCFL paper Sec. 3.1). FedGMM fits a Gaussian mixture to
  P(x); here ν_k is one diagonal Gaussian per cluster on the flattened input, fitted from γ-weighted
  sufficient statistics aggregated like the label counts (the cheap reading; FedGMM's own mixture is
  not in the seeds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from fedcluster.storage.state_file import persistable

Formulation = Literal["conditional", "fedrc-ratio", "joint"]
FORMULATIONS: tuple[str, ...] = ("conditional", "fedrc-ratio", "joint")


def log_likelihood(losses: np.ndarray, formulation: str, y: np.ndarray | None = None,
                   label_marginal: np.ndarray | None = None, log_px: np.ndarray | None = None) -> np.ndarray:
    """[N, K] log L_k from per-sample losses ``losses`` [N, K].

    ``label_marginal`` is C as [K, classes] (rows sum to 1), needed with ``y`` for ``fedrc-ratio``;
    ``log_px`` [N, K] is log P(x; ν_k), needed for ``joint``.
    """
    ll = -np.asarray(losses, dtype=np.float64)
    if formulation == "conditional":
        return ll
    if formulation == "fedrc-ratio":
        if y is None or label_marginal is None:
            raise ValueError("fedrc-ratio needs the labels and the label marginal C_{y,k}")
        return ll - np.log(np.maximum(label_marginal[:, y].T, 1e-12))
    if formulation == "joint":
        if log_px is None:
            raise ValueError("joint needs log P(x; ν_k)")
        return ll + log_px
    raise ValueError(f"unknown formulation {formulation!r}; choose one of: {', '.join(FORMULATIONS)}")


def label_counts(gamma: np.ndarray, y: np.ndarray, num_classes: int) -> np.ndarray:
    """Soft label counts F[k, c] = Σ_j 1{y_j = c} γ_{j;k}  (HCFL paper Alg. 3 line 4; FedRC paper Alg. 1 step 3)."""
    counts = np.zeros((gamma.shape[1], num_classes))
    np.add.at(counts.T, np.asarray(y), gamma)
    return counts


def label_marginal(counts: np.ndarray) -> np.ndarray:
    """C[k, y] = F[k, y] / Σ_y' F[k, y'] (FedRC paper eq. 2); uniform for a cluster without any mass."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum(1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / counts.shape[1])
    return np.where(total > 0, counts / np.where(total > 0, total, 1.0), uniform)


@persistable
@dataclass
class GaussianStats:
    """γ-weighted sufficient statistics of the flattened inputs per cluster: Σγ, Σγx, Σγx²."""

    s0: np.ndarray  # [K]
    s1: np.ndarray  # [K, D]
    s2: np.ndarray  # [K, D]

    @staticmethod
    def of(x: torch.Tensor, gamma: np.ndarray) -> GaussianStats:
        flat = x.reshape(len(x), -1).double()
        g = torch.as_tensor(gamma, dtype=torch.float64, device=flat.device)
        return GaussianStats(g.sum(0).cpu().numpy(), (g.T @ flat).cpu().numpy(), (g.T @ flat.square()).cpu().numpy())

    def __add__(self, other: GaussianStats) -> GaussianStats:
        return GaussianStats(self.s0 + other.s0, self.s1 + other.s1, self.s2 + other.s2)


def gaussian_log_density(x: torch.Tensor, stats: GaussianStats | None, var_floor: float = 1e-2) -> np.ndarray:
    """[N, K] log N(x; μ_k, diag σ_k²) with μ, σ² from ``stats`` (σ² floored); zeros when no stats yet."""
    flat = x.reshape(len(x), -1).double()
    if stats is None:
        return np.zeros((len(x), 1))
    s0 = np.maximum(stats.s0, 1e-12)[:, None]
    mean = stats.s1 / s0
    var = np.maximum(stats.s2 / s0 - mean**2, var_floor)
    mu, v = torch.as_tensor(mean, device=flat.device), torch.as_tensor(var, device=flat.device)
    # Σ_d (x_d − μ_d)² / σ_d² expanded, so no [N, K, D] tensor is built.
    quad = (flat.square() @ (1 / v).T) - 2 * (flat @ (mu / v).T) + (mu.square() / v).sum(1)
    logdet = torch.log(v).sum(1) + flat.shape[1] * math.log(2 * math.pi)
    return (-0.5 * (quad + logdet)).cpu().numpy()

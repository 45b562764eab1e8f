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
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
import torch

from fedcluster.storage.state_file import persistable
from fedcluster.tiers.cluster_book import remove_statistics, split_statistics
from fedcluster.tiers.cohort import Cohort

Formulation = Literal["conditional", "fedrc-ratio", "joint"]


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


def _stats_split(s: GaussianStats, position: int) -> GaussianStats:
    return GaussianStats(split_statistics(s.s0, position), split_statistics(s.s1, position),
                         split_statistics(s.s2, position))


def _stats_remove(s: GaussianStats, positions: np.ndarray) -> GaussianStats:
    return GaussianStats(remove_statistics(s.s0, positions), remove_statistics(s.s1, positions),
                         remove_statistics(s.s2, positions))


@dataclass
class ServerStatistics:
    """The tier-1 statistics the server keeps: each client's latest soft label counts F_i [M, K, C] (HCFL paper
    Alg. 2 step 3; the FedRC paper is silent on partial participation: the latest are kept) with the label
    marginal C_{y,k} [K, C], and for ``joint`` each client's latest γ-weighted input statistics with their sum ν."""

    counts: np.ndarray
    marginal: np.ndarray
    client_stats: dict[int, GaussianStats] = field(default_factory=dict)
    density: GaussianStats | None = None

    @staticmethod
    def start(num_clients: int, k: int, num_classes: int) -> ServerStatistics:
        c = max(num_classes, 1)
        return ServerStatistics(np.zeros((num_clients, k, c)), np.full((k, c), 1.0 / c))

    def split(self, position: int) -> None:
        """F_{·,K^t+1} ← F_{·,k*} (HCFL paper Alg. 4 lines 3–4), likewise the input statistics."""
        self.counts = split_statistics(self.counts, position, axis=1)
        self.client_stats = {c: _stats_split(s, position) for c, s in self.client_stats.items()}
        self.refresh()

    def remove(self, positions: np.ndarray) -> None:
        """F_{·,k_r} dropped (HCFL paper Alg. 5 lines 2–3)."""
        self.counts = remove_statistics(self.counts, positions, axis=1)
        self.client_stats = {c: _stats_remove(s, positions) for c, s in self.client_stats.items()}
        self.refresh()

    def refresh(self) -> None:
        """C_{y,k} and ν_k from the per-client statistics."""
        self.marginal = label_marginal(self.counts.sum(0))
        stats = list(self.client_stats.values())
        self.density = sum(stats[1:], stats[0]) if stats else None


# -- the tier-1 parts a method holds ------------------------------------------------------------
class FormulationPart(ABC):
    """Tier 1: log L_k of every sample from its losses, and the statistics the server keeps for it."""

    name: ClassVar[str]
    reads_inputs: ClassVar[bool] = False  # the server reads the cohort's inputs (``joint``)
    label_table: ClassVar[bool] = False  # clients download and upload the K × C table (``fedrc-ratio``)

    @property
    def uses_statistics(self) -> bool:
        """Whether the part reads and updates the server statistics (label counts, input densities)."""
        return self.label_table or self.reads_inputs

    @abstractmethod
    def loglik(self, losses: np.ndarray, x: torch.Tensor | None, labels: np.ndarray,
               stats: ServerStatistics | None) -> np.ndarray:
        """[N, K] log L_k from the per-sample losses [N, K] of rows with inputs ``x`` and ``labels``."""

    def update(self, stats: ServerStatistics, cohort: Cohort, gamma: np.ndarray,  # noqa: B027 (none by default)
               rounds_done: int) -> None:
        """Upload of the round's statistics (γ-weighted over the cohort's rows) and the server's new ones."""


class Conditional(FormulationPart):
    """L_k = P(y | x; θ_k) = exp(−ℓ_k) (FedEM, IFCA, FeSEM)."""

    name = "conditional"

    def loglik(self, losses: np.ndarray, x: torch.Tensor | None, labels: np.ndarray,
               stats: ServerStatistics | None) -> np.ndarray:
        return log_likelihood(losses, self.name)


@dataclass(frozen=True)
class LabelRatio(FormulationPart):
    """FedRC's Ĩ = exp(−ℓ_k) / C_{y,k} (FedRC paper eq. 2) with the clients' soft label counts. ``noise`` ξ > 0:
    each client adds N(0, ξ_i²) to every count it uploads (FedRC paper App. E, eq. 96), ξ_i = ξ · (N_i / C) /
    ``noise_ref`` with a reference, drawn from (seed, round, client) so that a resumed run draws the same noise;
    a noisy summed count below one sample counts as one sample."""

    num_classes: int
    noise: float = 0.0
    noise_ref: float = 0.0
    seed: int = 0
    name: ClassVar[str] = "fedrc-ratio"
    label_table: ClassVar[bool] = True

    def loglik(self, losses: np.ndarray, x: torch.Tensor | None, labels: np.ndarray,
               stats: ServerStatistics | None) -> np.ndarray:
        assert stats is not None
        return log_likelihood(losses, self.name, labels, stats.marginal)

    def update(self, stats: ServerStatistics, cohort: Cohort, gamma: np.ndarray, rounds_done: int) -> None:
        y = cohort.labels
        for c, own in zip(cohort.clients, cohort.own_rows(), strict=True):
            stats.counts[c] = label_counts(gamma[own], y[own], self.num_classes)
        stats.marginal = label_marginal(stats.counts.sum(0))
        if self.noise <= 0:
            return
        for c, n in zip(cohort.clients, cohort.sizes, strict=True):
            std = self.noise * ((n / self.num_classes) / self.noise_ref if self.noise_ref > 0 else 1.0)
            rng = np.random.default_rng([self.seed, 81, rounds_done, int(c)])
            stats.counts[c] = stats.counts[c] + rng.normal(0.0, std, stats.counts[c].shape)
        stats.marginal = label_marginal(np.maximum(stats.counts.sum(0), 1.0))


class Joint(FormulationPart):
    """FedGMM's L_k = P(y | x; θ_k) · P(x; ν_k) with one diagonal Gaussian ν_k per cluster."""

    name = "joint"
    reads_inputs = True

    def loglik(self, losses: np.ndarray, x: torch.Tensor | None, labels: np.ndarray,
               stats: ServerStatistics | None) -> np.ndarray:
        assert stats is not None and x is not None
        return log_likelihood(losses, self.name, log_px=gaussian_log_density(x, stats.density))

    def update(self, stats: ServerStatistics, cohort: Cohort, gamma: np.ndarray, rounds_done: int) -> None:
        assert cohort.x is not None
        for c, own in zip(cohort.clients, cohort.own_rows(), strict=True):
            stats.client_stats[int(c)] = GaussianStats.of(cohort.x[torch.as_tensor(own)], gamma[own])
        parts = list(stats.client_stats.values())
        stats.density = sum(parts[1:], parts[0])


# name → the part of a formulation with its defaults (a method with options, e.g. FedRC's noise, builds its own)
FORMULATION_PARTS: dict[str, Callable[[int], FormulationPart]] = {
    "conditional": lambda num_classes: Conditional(),
    "fedrc-ratio": lambda num_classes: LabelRatio(num_classes),
    "joint": lambda num_classes: Joint(),
}
FORMULATIONS: tuple[str, ...] = tuple(FORMULATION_PARTS)

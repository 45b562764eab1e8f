"""FedEM (Marfoq et al. 2021): soft EM over K models with client-wise mixture weights.

Composition (HCFL tiers, HCFL paper Sec. 3): tier 1 ``formulation`` (default ``conditional``, L_k = P(y|x; θ_k)),
tier 2 ``soft-em`` (client scope, or HCFL+'s sample scope with μ̃), fixed K. One round:

1. send the K models to the cohort (all K forward passes of the whole cohort run as one batched pass);
2. E-step: γ_{i,j;k} = softmax_k(log ω_{i;k} + log L_k(x_ij, y_ij)), ω_{i;k} = mean_j γ_{i,j;k}
   (FedRC paper eq. 3; HCFL paper eq. 4–5 with ``weights_scope=sample``);
3. every (client, k) pair runs one local epoch on Σ_j γ_{i,j;k} f(x_ij, y_ij; θ_k) / |batch|
   (FedRC paper eq. 5), all pairs as units of one trainer call (with ``split``: one unit per client, HCFL paper eq.
   6–7);
4. server: θ_k ← θ_k + η_g Σ_i N_i Δθ_{i,k} / Σ_i N_i (FedRC paper Alg. 1 step 4).

Prediction: Σ_k ω_{i;k} softmax(m_k(x)) (FedRC paper App. H.2). Test clients that never train run the E-step on
their labelled data with the models fixed (``test_em_iters`` iterations from ω = 1/K), as FedRC paper does.
``fedrc`` is this class with ``formulation=fedrc-ratio``; the tier-1 statistics the server keeps
(soft label counts for C_{y,k}, Gaussian input statistics for ``joint``) live here so any formulation
composes with any scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.tiers.formulation import (
    Formulation,
    GaussianStats,
    gaussian_log_density,
    label_counts,
    label_marginal,
    log_likelihood,
)
from fedcluster.tiers.weights import EStep, soft_em

MAX_TEST_EM_ITERS = 10_000  # E-steps of a test client (each a pass over the K models' losses): beyond, no change


@dataclass
class FedEMParams(ClusteredParams):
    formulation: Formulation = "conditional"  # tier 1
    weights_scope: Literal["client", "sample"] = "client"  # tier 2: FedEM's ω_{i;k} or HCFL+'s ω_{i,j;k}
    mu_tilde: float = 0.0  # HCFL+ μ̃ (sample scope): ω_{i,j;k} ← μ̃ γ + (1 − μ̃) ω̃
    test_em_iters: int = 10  # E-steps a non-participating client runs on its labelled data

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.mu_tilde <= 1:
            raise ValueError(f"mu_tilde must be in [0, 1], got {self.mu_tilde}")
        if not 1 <= self.test_em_iters <= MAX_TEST_EM_ITERS:
            raise ValueError(f"test_em_iters must be in 1..{MAX_TEST_EM_ITERS}, got {self.test_em_iters}")


@ALGORITHMS.register("fedem", "FedEM: soft EM over K models, client-wise mixture weights, ensemble prediction",
                     FedEMParams)
class FedEM(ClusteredAlgorithm):
    soft = True

    def __init__(self, ctx: Context, params: FedEMParams) -> None:
        super().__init__(ctx, params)
        fed, k = ctx.fed, params.num_clusters
        self.sample_prior = (np.full((len(fed.train.y), k), 1.0 / k, dtype=np.float32)
                             if params.weights_scope == "sample" else None)
        # Server-side tier-1 statistics: each client's latest soft label counts F_i [K, C] (HCFL paper Alg. 2
        # step 3; the FedRC paper is silent on partial participation: the latest are kept) and for
        # ``joint`` its latest γ-weighted input statistics.
        self.counts = np.zeros((fed.num_clients, k, max(fed.num_classes, 1)))
        self.marginal = np.full((k, max(fed.num_classes, 1)), 1.0 / max(fed.num_classes, 1))
        self.client_stats: dict[int, GaussianStats] = {}
        self.density: GaussianStats | None = None
        self._labels: np.ndarray | None = None  # the training labels on the host, copied once (not every round)

    def labels(self) -> np.ndarray:
        """The training labels on the host (the clients' own labels: the E-step and the counts use them)."""
        if self._labels is None:
            self._labels = self.ctx.fed.train.y.cpu().numpy()
        return self._labels

    def reads_every_input(self) -> str | None:
        if self.params.formulation == "joint":
            return "formulation=joint (the server fits a Gaussian density to the cohort's inputs)"
        return None

    # -- tier 1 --------------------------------------------------------------------------------
    def loglik(self, losses: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        p = self.params
        log_px = gaussian_log_density(x, self.density) if p.formulation == "joint" else None
        labels = y if isinstance(y, np.ndarray) else y.cpu().numpy()
        return log_likelihood(losses, p.formulation, labels, self.marginal, log_px)

    def update_statistics(self, clients: np.ndarray, rows: np.ndarray, owner: np.ndarray, gamma: np.ndarray) -> None:
        """Upload of the round's statistics and the server's new C_{y,k} (FedRC paper Alg. 1 step 4) / ν_k."""
        fed, p = self.ctx.fed, self.params
        if p.formulation == "fedrc-ratio":
            y = self.labels()[rows]
            for c, own in zip(clients, _rows_of(owner, len(clients)), strict=True):
                self.counts[c] = label_counts(gamma[own], y[own], fed.num_classes)
            self.marginal = label_marginal(self.counts.sum(0))
        elif p.formulation == "joint":
            x = fed.train.take(rows)
            for c, own in zip(clients, _rows_of(owner, len(clients)), strict=True):
                self.client_stats[int(c)] = GaussianStats.of(x[torch.as_tensor(own)], gamma[own])
            stats = list(self.client_stats.values())
            self.density = sum(stats[1:], stats[0])

    # -- tier 2 --------------------------------------------------------------------------------
    def e_step(self, ll: np.ndarray, clients: np.ndarray, rows: np.ndarray, owner: np.ndarray) -> EStep:
        prior = None if self.sample_prior is None else self.sample_prior[rows]
        est = soft_em(ll, owner, self.omega[clients], prior, self.params.mu_tilde)
        if est.sample_prior is not None:
            self.sample_prior[rows] = est.sample_prior
        return est

    # -- one round -----------------------------------------------------------------------------
    def local_training(self, clients: np.ndarray, est: EStep, round_: int) -> tuple[Any, np.ndarray, int]:
        """Train every (client, k) pair; returns (local models, aggregation weights A, models uploaded)."""
        local = self.train_pairs(clients, est.gamma, round_)
        weights = np.repeat(self.sizes(clients)[:, None], self.num_clusters, 1)
        return local, weights, self.num_clusters

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        fed, tr = self.ctx.fed, self.ctx.fed.train
        rows, owner = self.rows(clients)
        x = tr.take(rows if self.params.formulation == "joint" else rows[:0])  # only ``joint`` looks at x
        ll = self.loglik(self.losses(rows), x, self.labels()[rows])  # tier 1 with the received models, one batched pass
        est = self.e_step(ll, clients, rows, owner)  # tier 2
        self.gamma[rows] = est.gamma
        self.omega[clients] = est.omega
        local, weights, uploaded = self.local_training(clients, est, round_)
        self.aggregate(local, weights)
        self.update_statistics(clients, rows, owner, est.gamma)
        m, k = len(clients), self.num_clusters
        table = 4 * k * max(fed.num_classes, 1) if self.params.formulation == "fedrc-ratio" else 0  # C / F_i
        # The cohort's objective (FedRC paper eq. 1 / HCFL paper eq. 1) at the E-step: mean_j log Σ_k ω_{i;k} L_k(x_j,
        # y_j).
        objective = float(np.mean(_logsumexp(np.log(np.maximum(est.omega[owner], 1e-30)) + ll))) if len(ll) else 0.0
        return RoundResult(bytes_up=m * (self.nbytes(uploaded) + table), bytes_down=m * (self.nbytes(k) + table),
                           extra={"objective": objective})

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "sample_prior": self.sample_prior, "counts": self.counts,
                "marginal": self.marginal, "client_stats": self.client_stats, "density": self.density}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        for key in ("sample_prior", "counts", "marginal", "client_stats", "density"):
            setattr(self, key, state[key])


def _rows_of(owner: np.ndarray, m: int) -> list[np.ndarray]:
    """Each cohort client's positions in row order (what ``owner == i`` selects), all found in one sort rather
    than one pass over the cohort's rows per client."""
    order = np.argsort(owner, kind="stable")
    return np.split(order, np.cumsum(np.bincount(owner, minlength=m))[:-1])


def _logsumexp(a: np.ndarray) -> np.ndarray:
    mx = a.max(1)
    return mx + np.log(np.exp(a - mx[:, None]).sum(1))

"""Tier 2 — cluster weighting: how much each client / sample belongs to each cluster, hard or soft, client-wise or
sample-wise (HCFL paper Sec. 3–4–A.3): the rules as functions and the parts a method holds.

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

Soft parts (:class:`SoftWeighting`) give every (client, k) pair a training weight γ and an aggregation weight;
hard parts (:class:`HardWeighting`) give each client one position to train from and, after training, the cluster it
joins. Every part also says how a client that never trained weights the clusters from its labelled data
(:meth:`Weighting.test`). :data:`WEIGHTINGS` maps the ``weights`` names of ``algorithm=hcfl`` to parts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tiers.cohort import Cohort, segment_mean

Scope = Literal["client", "sample"]
_TINY = 1e-30


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


# -- the tier-2 parts a method holds ----------------------------------------------------------
CohortLogLik = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # clients → (log L [n, K], owner [n])


class Weighting(ABC):
    soft: ClassVar[bool]

    @abstractmethod
    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray:
        """ω [m, K] of clients that never trained, from their labelled rows with the models fixed."""


class SoftWeighting(Weighting):
    soft = True

    @abstractmethod
    def estimate(self, loglik: np.ndarray, cohort: Cohort, state: ClusterState) -> EStep:
        """γ [n, K] and ω [m, K] of the cohort (the state's priors read and, for the sample scope, updated)."""

    def aggregation(self, est: EStep, sizes: np.ndarray) -> np.ndarray:
        """A [m, K]: N_i for every pair (FedRC paper Alg. 1 step 4)."""
        return np.repeat(sizes[:, None], est.omega.shape[1], 1)


@dataclass(frozen=True)
class SoftEM(SoftWeighting):
    """FedEM/FedRC's E-step (FedRC paper eq. 3); with a sample-wise prior in the state, HCFL+'s eq. 4–5 with μ̃.
    Test clients run ``test_iters`` E-steps from ω = 1/K (FedRC paper App. H.2). Its parameters are the EM block
    the other EM parts hold (:class:`AdamEM`)."""

    mu_tilde: float = 0.0
    test_iters: int = 10

    def estimate(self, loglik: np.ndarray, cohort: Cohort, state: ClusterState) -> EStep:
        prior = None if state.sample_prior is None else state.sample_prior[cohort.rows]
        est = soft_em(loglik, cohort.owner, state.omega[cohort.clients], prior, self.mu_tilde)
        if est.sample_prior is not None:
            assert state.sample_prior is not None
            state.sample_prior[cohort.rows] = est.sample_prior
        return est

    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray:
        return em_weights(loglik, owner, m, self.test_iters)


@dataclass
class AdamMoments:
    """FedRC-Adam's first and second moments [N, K], the state of an :class:`AdamEM` part."""

    m1: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    m2: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


@dataclass(frozen=True)
class AdamEM(SoftWeighting):
    """FedRC-Adam (FedRC paper App. H.3): γ moved by Adam from the last γ towards the E-step's, ω = mean_j γ
    (client scope); test clients weight the clusters as the EM block ``em`` does."""

    em: SoftEM
    moments: AdamMoments
    lr: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8

    def estimate(self, loglik: np.ndarray, cohort: Cohort, state: ClusterState) -> EStep:
        assert state.gamma is not None
        rows, mom = cohort.rows, self.moments
        hat = soft_em(loglik, cohort.owner, state.omega[cohort.clients]).gamma
        gamma, mom.m1[rows], mom.m2[rows] = adam_em(state.gamma[rows].astype(np.float64), hat, mom.m1[rows],
                                                    mom.m2[rows], self.lr, self.beta1, self.beta2, self.eps)
        return EStep(gamma, segment_mean(gamma, cohort.owner, cohort.m))

    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray:
        return self.em.test(loglik, owner, m, k)


@dataclass(frozen=True)
class FedSoftShares(SoftWeighting):
    """FedSoft's u_{i;k}: the share of client i's samples cluster k fits best, floored at σ; every sample of the
    client trains with u_i and cluster k aggregates with u_{i;k} N_i."""

    floor: float = 1e-3

    def estimate(self, loglik: np.ndarray, cohort: Cohort, state: ClusterState) -> EStep:
        omega = fedsoft(loglik, cohort.owner, cohort.m, self.floor)
        return EStep(omega[cohort.owner], omega)

    def aggregation(self, est: EStep, sizes: np.ndarray) -> np.ndarray:
        return est.omega * sizes[:, None]

    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray:
        return fedsoft(loglik, owner, m, self.floor)


class HardWeighting(Weighting):
    """One position per client. Test clients take the cluster with the lowest mean loss (FedRC paper H.8)."""

    soft = False

    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray:
        return one_hot(best_cluster(loglik, owner, m), k)

    @abstractmethod
    def start(self, cohort_loglik: CohortLogLik, clients: np.ndarray, state: ClusterState) -> np.ndarray:
        """[m] the position each client trains from."""

    @abstractmethod
    def assign(self, start: np.ndarray, distances: Callable[[], np.ndarray], clients: np.ndarray,
               state: ClusterState) -> np.ndarray:
        """[m] the cluster each client joins after training (``distances``: [m, K] local-to-cluster ‖θ_i − θ_k‖)."""

    def receivers(self, new: np.ndarray) -> np.ndarray:
        """[m] whether each client of the cohort downloads all K models (the others download their own cluster's);
        ``new``: [m] the clients without a cluster yet."""
        return np.ones(len(new), dtype=bool)


class HardLoss(HardWeighting):
    """IFCA: k_i = argmax_k mean_j log L_k, before training."""

    def start(self, cohort_loglik: CohortLogLik, clients: np.ndarray, state: ClusterState) -> np.ndarray:
        ll, owner = cohort_loglik(clients)
        return best_cluster(ll, owner, len(clients))

    def assign(self, start: np.ndarray, distances: Callable[[], np.ndarray], clients: np.ndarray,
               state: ClusterState) -> np.ndarray:
        return start


class HardDistance(HardWeighting):
    """FeSEM: a client seen for the first time starts from its lowest-loss cluster, any other from its current
    one; after training it joins argmin_k ‖θ_k − θ_i‖ (HCFL paper footnote 6). ``state.assigned`` keeps it."""

    def start(self, cohort_loglik: CohortLogLik, clients: np.ndarray, state: ClusterState) -> np.ndarray:
        assert state.assigned is not None
        new = clients[state.assigned[clients] < 0]
        if len(new):
            ll, owner = cohort_loglik(new)
            state.assigned[new] = best_cluster(ll, owner, len(new))
        return state.assigned[clients].copy()

    def assign(self, start: np.ndarray, distances: Callable[[], np.ndarray], clients: np.ndarray,
               state: ClusterState) -> np.ndarray:
        assert state.assigned is not None
        assign = hard_distance(distances()).argmax(1)
        state.assigned[clients] = assign
        return assign

    def receivers(self, new: np.ndarray) -> np.ndarray:
        return np.asarray(new, dtype=bool)


# the ``weights`` names of algorithm=hcfl → the part, from the method's parameters
WEIGHTINGS: dict[str, Callable[[Any], Weighting]] = {
    "soft-em": lambda p: SoftEM(p.mu_tilde, p.test_em_iters),
    "fedsoft": lambda p: FedSoftShares(p.floor),
    "hard-loss": lambda p: HardLoss(),
    "hard-distance": lambda p: HardDistance(),
}

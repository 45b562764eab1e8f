"""Tier 2 as parts a method holds: how a cohort's cluster weights come from the tier-1 log-likelihoods
(the rules themselves are the functions of :mod:`fedcluster.tiers.weights`).

Soft rules (:class:`SoftRule`) give every (client, k) pair a training weight γ and an aggregation weight;
hard rules (:class:`HardRule`) give each client one position to train from and, after training, the cluster it
joins. Every rule also says how a client that never trained weights the clusters from its labelled data
(:meth:`WeightRule.test`). :data:`WEIGHT_RULES` maps the ``weights`` names of ``algorithm=hcfl`` to parts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.weights import (
    EStep,
    adam_em,
    best_cluster,
    em_weights,
    fedsoft,
    hard_distance,
    one_hot,
    segment_mean,
    soft_em,
)

CohortLogLik = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # clients → (log L [n, K], owner [n])


class WeightRule(ABC):
    soft: ClassVar[bool]

    @abstractmethod
    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray:
        """ω [m, K] of clients that never trained, from their labelled rows with the models fixed."""


class SoftRule(WeightRule):
    soft = True

    @abstractmethod
    def estimate(self, loglik: np.ndarray, cohort: Cohort, state: ClusterState) -> EStep:
        """γ [n, K] and ω [m, K] of the cohort (the state's priors read and, for the sample scope, updated)."""

    def aggregation(self, est: EStep, sizes: np.ndarray) -> np.ndarray:
        """A [m, K]: N_i for every pair (FedRC paper Alg. 1 step 4)."""
        return np.repeat(sizes[:, None], est.omega.shape[1], 1)


@dataclass
class SoftEM(SoftRule):
    """FedEM/FedRC's E-step (FedRC paper eq. 3); with a sample-wise prior in the state, HCFL+'s eq. 4–5 with μ̃.
    Test clients run ``test_iters`` E-steps from ω = 1/K (FedRC paper App. H.2)."""

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
class AdamEM(SoftEM):
    """FedRC-Adam (FedRC paper App. H.3): γ moved by Adam from the last γ towards the E-step's, ω = mean_j γ
    (client scope). The moments [N, K] are the part's state (``m1``, ``m2``)."""

    lr: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    m1: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    m2: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def estimate(self, loglik: np.ndarray, cohort: Cohort, state: ClusterState) -> EStep:
        assert state.gamma is not None
        rows = cohort.rows
        hat = soft_em(loglik, cohort.owner, state.omega[cohort.clients]).gamma
        gamma, self.m1[rows], self.m2[rows] = adam_em(state.gamma[rows].astype(np.float64), hat, self.m1[rows],
                                                      self.m2[rows], self.lr, self.beta1, self.beta2, self.eps)
        return EStep(gamma, segment_mean(gamma, cohort.owner, cohort.m))


@dataclass
class FedSoftShares(SoftRule):
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


class HardRule(WeightRule):
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

    def receivers(self, m: int, new_clients: int) -> int:
        """Clients of the cohort that download all K models (the others download their own cluster's)."""
        return m


class HardLoss(HardRule):
    """IFCA: k_i = argmax_k mean_j log L_k, before training."""

    def start(self, cohort_loglik: CohortLogLik, clients: np.ndarray, state: ClusterState) -> np.ndarray:
        ll, owner = cohort_loglik(clients)
        return best_cluster(ll, owner, len(clients))

    def assign(self, start: np.ndarray, distances: Callable[[], np.ndarray], clients: np.ndarray,
               state: ClusterState) -> np.ndarray:
        return start


class HardDistance(HardRule):
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

    def receivers(self, m: int, new_clients: int) -> int:
        return new_clients


# the ``weights`` names of algorithm=hcfl → the part, from the method's parameters
WEIGHT_RULES: dict[str, Callable[[Any], WeightRule]] = {
    "soft-em": lambda p: SoftEM(p.mu_tilde, p.test_em_iters),
    "fedsoft": lambda p: FedSoftShares(p.floor),
    "hard-loss": lambda p: HardLoss(),
    "hard-distance": lambda p: HardDistance(),
}

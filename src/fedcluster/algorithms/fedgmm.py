"""FedGMM (Wu, Zhang, Yu, Liu, Gu, Zhou, Chen & Cheng, "Personalized Federated Learning under Mixture of
Distributions", ICML 2023, arXiv:2305.01068): every client's joint distribution is one mixture of M1 shared Gaussian
input components and M2 shared predictors,

    p_i(x, y) = Σ_{m1, m2} π_i(m1, m2) N(x; μ_{m1}, Σ_{m1}) p(y | x; θ_{m2})          (the paper's joint model)

with client-specific mixture weights π_i [M1, M2]: the generative part (covariate shift) and the predictive part
(concept shift) fitted together, by the paper's federated EM, whose updates are closed form but the predictors'
(as the authors' code shipped with the FedRC repository runs them: LINs-lab/FedRC ``learners/learners_ensemble.py``,
``ACGLearnersEnsemble``, and ``client.py``, ``ACGMixtureClient``):

* **E-step** (each sampled client, with the received models): for every training sample
  q_ij(m1, m2) ∝ π_i(m1, m2) · N(x_ij; μ_{m1}, Σ_{m1}) · exp(−ℓ(x_ij, y_ij; θ_{m2})).
* **M-step, client**: π_i(m1, m2) ← mean_j q_ij(m1, m2); each predictor θ_{m2} trains the run's local epochs on the
  samples weighted by Σ_{m1} q_ij(m1, m2) (as FedEM's weighted step); the client's Gaussian sufficient statistics
  with the responsibilities r_ij(m1) = Σ_{m2} q_ij(m1, m2): Σ_j r, Σ_j r x, Σ_j r x².
* **M-step, server**: θ_{m2} ← the N_i-weighted average of the trained θ_{i,m2} (FedEM's server step); μ_{m1},
  Σ_{m1} (diagonal, floored at ``var_floor``) from the sum of the clients' last statistics — the exact EM update of
  the shared Gaussians, where the code averages the clients' local μ, Σ.

The Gaussians model the flattened inputs (the code models an autoencoder's embedding, trained with it; here the
encoder is the identity, as fedcluster's ``joint`` formulation models the inputs). They start from k-means++ seeds
of the first cohort's inputs (seeded by the run's seed) with the cohort's variance.

Prediction needs no label (the paper's inference): p(y | x) = Σ_{m2} p_i(m2 | x) p(y | x; θ_{m2}) with
p_i(m1, m2 | x) ∝ π_i(m1, m2) N(x; μ_{m1}, Σ_{m1}), per sample. A client that never trained estimates its π from its
inputs alone: ``test_em_iters`` EM steps of the generative part, q(m1, m2 | x) ∝ π(m1, m2) N(x; m1) and
π ← mean q, from the federation's pooled π̄ (the N_i-weighted mean of the clients' π_i), so that its weights over the
input components are its own and the predictors each component uses are the federation's. Ω (what ARI and
``clusters.jsonl`` read) is Σ_{m1} π_i(m1, ·), each client's weight on the predictors; a soft clustering.
Communication: the M2 models each way per sampled client, plus its Gaussian statistics (float32) up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.cluster import kmeans_plusplus

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.data.federation import Split
from fedcluster.errors import ConfigError
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, Reals, non_negative
from fedcluster.tiers.weighting import SoftEM

PAPER = ("Yue Wu, Shuaicheng Zhang, Wenchao Yu, Yanchi Liu, Quanquan Gu, Dawei Zhou, Haifeng Chen, Wei Cheng. "
         "Personalized Federated Learning under Mixture of Distributions. International Conference on Machine "
         "Learning (ICML), PMLR 202, 2023.")
LOG_FLOOR = 1e-300


@dataclass
class FedGMMParams(ClusteredParams):
    num_clusters: int = ranged(3, ">= 1")  # M2, the number of predictors
    num_components: int | None = ranged(None, ">= 1")  # M1, the Gaussian input components (null: M2)
    var_floor: float = ranged(1e-2, "> 0")  # smallest variance of a Gaussian component, per input dimension
    test_em_iters: int = ranged(10, "1..10000")  # EM steps of an unseen client's π on its inputs (no labels)


def gaussian_log_density(x: torch.Tensor, mu: np.ndarray, var: np.ndarray) -> torch.Tensor:
    """[N, M1] log N(x; μ_m, diag var_m) of the flattened rows of ``x`` (float64, on x's device)."""
    flat = x.reshape(len(x), -1).double()
    m, v = torch.as_tensor(mu, device=flat.device), torch.as_tensor(var, device=flat.device)
    quad = flat.square() @ (1 / v).T - 2 * flat @ (m / v).T + (m.square() / v).sum(1)
    return -0.5 * (quad + torch.log(v).sum(1) + flat.shape[1] * np.log(2 * np.pi))


def joint_posterior(log_pi: np.ndarray, log_px: np.ndarray, losses: np.ndarray | None) -> np.ndarray:
    """[N, M1, M2] q(m1, m2) ∝ π(m1, m2) N(x; m1) (· exp(−ℓ_{m2}) with ``losses`` [N, M2]); ``log_pi`` [N, M1, M2]."""
    a = log_pi + log_px[:, :, None]
    if losses is not None:
        a = a - losses[:, None, :]
    flat = a.reshape(len(a), -1)
    flat = np.exp(flat - flat.max(1, keepdims=True))
    return (flat / flat.sum(1, keepdims=True)).reshape(a.shape)


@ALGORITHMS.register("fedgmm", "FedGMM: joint mixture of shared Gaussian input components and predictors, "
                     "client weights π_i(m1, m2) by federated EM; label-free weights for unseen clients",
                     FedGMMParams, paper=PAPER)
class FedGMM(ClusteredAlgorithm):
    pi = Saved[np.ndarray](Reals(low=0.0, high=1.0))  # [M, m1, m2] π_i
    gmm_s0 = Saved[np.ndarray](non_negative())  # each client's last uploaded Σ r, Σ r x, Σ r x² per component
    gmm_s1 = Saved[np.ndarray](Reals())
    gmm_s2 = Saved[np.ndarray](non_negative())
    init_mu = Saved[np.ndarray](Reals())
    init_var = Saved[np.ndarray](non_negative())
    started = Saved[bool](Flags())

    def __init__(self, ctx: Context, params: FedGMMParams) -> None:
        if ctx.fed.task != "classification":
            raise ConfigError("fedgmm mixes classifiers' class probabilities: it needs a classification data set; "
                              "use fedem for regression")
        super().__init__(ctx, params, formulation=Conditional(), weighting=SoftEM(test_iters=params.test_em_iters),
                         adaptation=Fixed())
        m, m1, m2 = ctx.fed.num_clients, self.components, params.num_clusters
        d = int(np.prod(ctx.fed.input_shape))
        self.pi = np.full((m, m1, m2), 1.0 / (m1 * m2))
        self.gmm_s0 = np.zeros((m, m1))  # each client's last uploaded Σ r, Σ r x, Σ r x² per component
        self.gmm_s1 = np.zeros((m, m1, d))
        self.gmm_s2 = np.zeros((m, m1, d))
        self.init_mu = np.zeros((m1, d))
        self.init_var = np.ones((m1, d))
        self.started = False

    @property
    def components(self) -> int:
        return self.params.num_components or self.params.num_clusters

    def reads_every_input(self) -> str | None:
        return "algorithm=fedgmm (the server seeds the Gaussian components with the first cohort's inputs)"

    # -- the Gaussian components -------------------------------------------------------------------------------
    def gaussians(self) -> tuple[np.ndarray, np.ndarray]:
        """(μ [M1, D], var [M1, D]) from the sum of the clients' statistics; a component without mass keeps its
        seed."""
        s0, s1, s2 = self.gmm_s0.sum(0), self.gmm_s1.sum(0), self.gmm_s2.sum(0)
        mu, var = self.init_mu.copy(), self.init_var.copy()
        has = s0 > 1e-9
        mu[has] = s1[has] / s0[has, None]
        var[has] = s2[has] / s0[has, None] - mu[has] ** 2
        return mu, np.maximum(var, self.params.var_floor)

    def seed_components(self, x: torch.Tensor) -> None:
        """k-means++ seeds of the first cohort's inputs, with the cohort's variance."""
        flat = x.reshape(len(x), -1).double().cpu().numpy()
        k = min(self.components, len(flat))
        seeds, _ = kmeans_plusplus(flat, k, random_state=int(np.random.default_rng([self.ctx.cfg.seed, 0x6A]).integers(
            2**31)))
        self.init_mu[:k] = seeds
        self.init_var[:] = np.maximum(flat.var(0), self.params.var_floor)
        self.started = True

    # -- the round -------------------------------------------------------------------------------------------------
    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """The E-step and the clients' closed-form M-step (π_i, the Gaussian statistics); the predictors' M-step is
        a soft plan: every (client, m2) pair trains with Σ_{m1} q and is averaged with N_i. The M2 models each way,
        the Gaussian statistics (float32) both ways."""
        clients, rows, owner = cohort.clients, cohort.rows, cohort.owner
        x = self.ctx.fed.train.take(rows)
        if not self.started:
            self.seed_components(x)
        mu, var = self.gaussians()
        log_px = gaussian_log_density(x, mu, var).cpu().numpy()  # [n, M1]
        losses = self.losses(rows)  # [n, M2]
        q = joint_posterior(np.log(np.maximum(self.pi[clients][owner], LOG_FLOOR)), log_px, losses)
        m = len(clients)
        counts = np.maximum(np.bincount(owner, minlength=m), 1)
        pi = np.zeros((m, *q.shape[1:]))
        np.add.at(pi, owner, q)
        self.pi[clients] = pi / counts[:, None, None]
        gamma = q.sum(1)  # [n, M2]: the predictors' sample weights
        resp = torch.as_tensor(q.sum(2), device=x.device)  # [n, M1]: the components' responsibilities
        flat = x.reshape(len(x), -1).double()
        for i, own in enumerate(np.split(np.arange(len(rows)), np.cumsum(counts)[:-1]) if m else []):
            r, z = resp[own], flat[own]
            c = int(clients[i])
            self.gmm_s0[c] = r.sum(0).cpu().numpy()
            self.gmm_s1[c] = (r.T @ z).cpu().numpy()
            self.gmm_s2[c] = (r.T @ z.square()).cpu().numpy()
        k = self.num_clusters
        return RoundPlan.soft(cohort, gamma, self.pi[clients].sum(1), np.repeat(cohort.sizes[:, None], k, 1), sent=k,
                              uploaded=k, table=4 * self.components * (1 + 2 * flat.shape[1]))

    # -- prediction without labels ------------------------------------------------------------------------------------
    def unseen_pi(self, split: Split) -> np.ndarray:
        """[clients, M1, M2] π of clients that never trained: EM of the generative part on their inputs (the rows of
        their ``fit`` mask, if any) from the federation's pooled π̄."""
        sizes = self.ctx.fed.train.sizes.astype(np.float64)
        seen = self.estimated
        w = sizes * seen if seen.any() else sizes
        pooled = np.einsum("i,iab->ab", w / w.sum(), self.pi)
        rows = np.flatnonzero(split.fit) if split.fit is not None else np.arange(split.num_samples)
        owner = split.owner()[rows]
        mu, var = self.gaussians()
        log_px = gaussian_log_density(split.take(rows), mu, var).cpu().numpy()
        pi = np.repeat(pooled[None], split.num_clients, 0)
        counts = np.maximum(np.bincount(owner, minlength=split.num_clients), 1)
        for _ in range(self.params.test_em_iters):
            q = joint_posterior(np.log(np.maximum(pi[owner], LOG_FLOOR)), log_px, None)
            new = np.zeros_like(pi)
            np.add.at(new, owner, q)
            pi = np.where(np.bincount(owner, minlength=split.num_clients)[:, None, None] > 0,
                          new / counts[:, None, None], pi)
        return pi

    def predictor_weights(self, split: Split, pi: np.ndarray) -> torch.Tensor:
        """[N, M2] p_i(m2 | x) = Σ_{m1} π_i(m1, m2) N(x; m1) / Σ over both, for every row of ``split``."""
        mu, var = self.gaussians()
        log_px = gaussian_log_density(split.x, mu, var).cpu().numpy()
        q = joint_posterior(np.log(np.maximum(pi[split.owner()], LOG_FLOOR)), log_px, None)
        return torch.as_tensor(q.sum(1), device=split.x.device)

    @torch.no_grad()
    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """Every row mixes the predictors with its own p_i(m2 | x) (participating clients: their π_i; the others:
        :meth:`unseen_pi`), returned as the log of the mixed probabilities with weight 1."""
        pi = self.pi if participating else self.unseen_pi(split)
        if participating and not self.estimated.all():
            pi = pi.copy()
            missing = np.flatnonzero(~self.estimated)
            pi[missing] = self.unseen_pi_of(missing)
        weights = self.predictor_weights(split, pi)  # [N, M2]
        probs = self.outputs(split.x).softmax(-1)  # [M2, N, C]
        mixed = (weights.T.unsqueeze(-1).to(probs.dtype) * probs).sum(0)
        return torch.log(mixed.clamp_min(1e-12)).unsqueeze(0), torch.ones(split.num_clients, 1, device=split.x.device)

    def unseen_pi_of(self, clients: np.ndarray) -> np.ndarray:
        """:meth:`unseen_pi` of training clients never sampled, from their training inputs."""
        tr = self.ctx.fed.train
        keep = np.isin(tr.owner(), clients)
        part = tr.rows(keep)
        sub = Split(part.x, part.y, np.concatenate([[0], np.cumsum(tr.sizes[clients])]))
        return self.unseen_pi(sub)

    def test_weights(self, outputs: torch.Tensor, split: Split) -> np.ndarray:
        """Ω of clients that never trained (ARI and the clusters' makeup): their label-free Σ_{m1} π(m1, ·)."""
        return self.unseen_pi(split).sum(1)

    def scoring_omega(self) -> np.ndarray:
        if self.estimated.all():
            return self.omega
        omega = self.omega.copy()
        missing = np.flatnonzero(~self.estimated)
        omega[missing] = self.unseen_pi_of(missing).sum(1)
        return omega

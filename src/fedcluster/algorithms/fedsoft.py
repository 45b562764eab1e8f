"""FedSoft (Ruan & Joe-Wong 2022): soft clustering by importance weights, proximal local updates.

Composition: tier 1 ``conditional``, tier 2 ``fedsoft``, fixed K. The seeds describe FedSoft only loosely
(HCFL paper Sec. 3.1 vs App. C disagree); this follows the original paper as does:

1. send the K cluster centres c_k; client i computes u_{i;k} = share of its samples whose loss is lowest
   under c_k, floored at σ (renormalised onto the simplex here);
2. client i updates its personal model w_i (kept across rounds; first started from c̄_i) for E local
   epochs on f_i(w) + (λ/2) Σ_k u_{i;k} ‖w − c_k‖² = f_i(w) + (λ/2) ‖w − c̄_i‖² + const, with
   c̄_i = Σ_k u_{i;k} c_k (Σ_k u_{i;k} = 1), i.e. FedProx's term towards c̄_i;
3. c_k ← c_k + η_g Σ_i u_{i;k} N_i (w_i − c_k) / Σ_i u_{i;k} N_i.

FedSoft's per-cluster client selection and estimating u only every τ rounds are left out (u every round,
the cohort the runner samples). Participating clients predict with their personal models (the FedRC paper's local
accuracy of FedSoft); a non-participating client mixes the centres with its own u computed on its labelled
data. σ and λ are not in the seeds. Communication: K centres down; w_i and the K weights up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams, replace_solver
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.data.federation import Split
from fedcluster.engine.params import Params
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, Weights
from fedcluster.tiers.weighting import FedSoftShares, fedsoft

PAPER = ("Yichen Ruan, Carlee Joe-Wong. FedSoft: Soft Clustered Federated Learning with Proximal Local Updating. "
         "Proceedings of the AAAI Conference on Artificial Intelligence 36, 2022.")


@dataclass
class FedSoftParams(ClusteredParams):
    prox: float = ranged(0.1, ">= 0")  # λ, the proximal weight towards the u-weighted centres
    floor: float = ranged(1e-3, "[0, 1)")  # σ, the smallest importance weight


@ALGORITHMS.register("fedsoft", "FedSoft: importance weights from per-cluster losses, proximal personal models",
                     FedSoftParams, paper=PAPER)
class FedSoft(ClusteredAlgorithm):
    personal = Saved[Params](Weights())  # each client's personal model
    has_personal = Saved[np.ndarray](Flags())

    def __init__(self, ctx: Context, params: FedSoftParams) -> None:
        # tier 2: FedSoft's shares (test clients: their own u on their labelled data)
        super().__init__(ctx, params, formulation=Conditional(), weighting=FedSoftShares(params.floor),
                         adaptation=Fixed())
        m = ctx.fed.num_clients
        self.personal = {n: torch.zeros(m, *v.shape[1:], dtype=v.dtype, device=v.device)
                                 for n, v in self.models.items()}
        self.has_personal = np.zeros(m, dtype=bool)

    def centre_mix(self, u: np.ndarray) -> Params:
        """c̄_i = Σ_k u_{i;k} c_k for rows u [m, K] → [m, ...]."""
        w = torch.as_tensor(u, dtype=torch.float32, device=self.ctx.device)
        return {n: torch.einsum("mk,k...->m...", w.to(v.dtype), v) for n, v in self.models.items()}

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Step 1: u from the K centres' losses; step 2's start (w_i, or c̄_i for a client without one) and proximal
        centre c̄_i: one unit per client (a hard plan with the soft Ω = u and A = u N_i of step 3). K centres down;
        w_i and the K weights (float32) up. The trained w_i are kept (``fold=False``)."""
        u = fedsoft(-self.losses(cohort.rows), cohort.owner, cohort.m, self.params.floor)
        anchor = self.centre_mix(u)
        idx = torch.as_tensor(cohort.clients)
        fresh = torch.as_tensor(~self.has_personal[cohort.clients], device=self.ctx.device)
        init = {n: torch.where(fresh.view(-1, *[1] * (v.dim() - 1)), v, self.personal[n][idx])
                for n, v in anchor.items()}
        k = self.num_clusters
        return RoundPlan.hard(cohort, np.zeros(cohort.m, np.int64), k, gamma=u[cohort.owner], omega=u,
                              weights=u * cohort.sizes[:, None], sent=k, extra_up=4 * k, init=init, anchor=anchor,
                              solver=replace_solver(self.ctx.solver, prox_mu=self.params.prox), fold=False)

    def after_training(self, round_: int, plan: RoundPlan, local: Params) -> None:
        """The personal models w_i kept for the next round and for prediction."""
        idx = torch.as_tensor(plan.cohort.clients)
        for n, v in local.items():
            self.personal[n][idx] = v
        self.has_personal[plan.cohort.clients] = True

    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, np.ndarray | torch.Tensor]:
        """Participating clients: their personal models (c̄_i for a client that has none yet); test clients: the
        centres mixed by their own u."""
        if not participating:
            return super().prediction(split, participating)
        clients = np.arange(self.ctx.fed.num_clients)
        fresh = torch.as_tensor(~self.has_personal, device=self.ctx.device)
        models = {n: torch.where(fresh.view(-1, *[1] * (v.dim() - 1)), c, self.personal[n])
                  for (n, v), c in zip(self.personal.items(),
                                             self.centre_mix(self.scoring_omega()).values(), strict=True)}
        outputs, _ = self.own_outputs({n: v.unsqueeze(1) for n, v in models.items()}, split, clients)
        return outputs, torch.ones(split.num_clients, 1, device=outputs.device)

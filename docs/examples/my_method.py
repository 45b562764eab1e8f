"""A method of your own, in one file: ``tempered-em`` — a new tier-1 formulation composed with FedEM.

Tier 1 (cluster formulation) is a *tempered* likelihood, L_k(x, y) = P(y | x; θ_k)^{1/τ}, i.e.
log L_k = −ℓ_k / τ, as in deterministic-annealing EM (Ueda & Nakano 1998, eq. 9: the E-step posterior
raised to 1/τ). τ > 1 flattens the responsibilities so that early, poorly trained models do not lock clients
into a cluster; τ = 1 is FedEM. The method is FedEM's parts with the tier-1 part wrapped: tier 2 is the
soft EM step ω_{i;k} = mean_j γ_{i,j;k} (``SoftEM``), K is fixed (tier 3) and the round is the template every
cluster method shares (``ClusteredAlgorithm.step``) with the plan its soft tier-2 part gives (``soft_plan``: E-step,
γ-weighted local training of every (client, k) pair, the server averages each model over the clients weighted by
N_i), so the method is its parts and writes no round of its own.

Registering it makes ``algorithm=tempered-em algorithm.temperature=2`` valid everywhere: the CLI after
importing this file, ``fedcluster.run``, ``fedcluster list tempered-em`` (its parameters come from the
dataclass and the comment on each field).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm
from fedcluster.algorithms.fedem import FedEMParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import FORMULATION_PARTS, FormulationPart, ServerStatistics
from fedcluster.tiers.weighting import SoftEM


@dataclass
class TemperedEMParams(FedEMParams):
    temperature: float = ranged(2.0, "> 0")  # τ of log L_k = −ℓ_k / τ (1 = FedEM; larger = softer E-step)


@dataclass
class Tempered(FormulationPart):
    """Tier 1: another formulation (``conditional`` by default) on the losses divided by τ."""

    inner: FormulationPart
    temperature: float
    name = "tempered"

    @property
    def reads_inputs(self) -> bool:  # type: ignore[override]  # what the wrapped formulation needs
        return self.inner.reads_inputs

    @property
    def label_table(self) -> bool:  # type: ignore[override]
        return self.inner.label_table

    def loglik(self, losses: np.ndarray, x: torch.Tensor | None, labels: np.ndarray,
               stats: ServerStatistics | None) -> np.ndarray:
        return self.inner.loglik(losses / self.temperature, x, labels, stats)

    def update(self, stats: ServerStatistics, cohort: Cohort, gamma: np.ndarray, rounds_done: int) -> None:
        self.inner.update(stats, cohort, gamma, rounds_done)


@ALGORITHMS.register("tempered-em", "FedEM with a tempered tier-1 likelihood exp(−loss/τ) (docs/examples)",
                     TemperedEMParams)
class TemperedEM(ClusteredAlgorithm):
    def __init__(self, ctx: Context, params: TemperedEMParams) -> None:
        inner = FORMULATION_PARTS[params.formulation](ctx.fed.num_classes)
        super().__init__(ctx, params, formulation=Tempered(inner, params.temperature),  # tier 1
                         weighting=SoftEM(params.mu_tilde, params.test_em_iters),  # tier 2
                         adaptation=Fixed(),  # tiers 3–4: a fixed K
                         sample_scope=params.weights_scope == "sample")

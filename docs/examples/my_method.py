"""A method of your own, in one file: ``tempered-em`` — a new tier-1 formulation composed with FedEM.

Tier 1 (cluster formulation) is a *tempered* likelihood, L_k(x, y) = P(y | x; θ_k)^{1/τ}, i.e.
log L_k = −ℓ_k / τ, as in deterministic-annealing EM (Ueda & Nakano 1998, eq. 9: the E-step posterior
raised to 1/τ). τ > 1 flattens the responsibilities so that early, poorly trained models do not lock clients
into a cluster; τ = 1 is FedEM. Everything else is reused unchanged from FedEM (S4 eq. 3–5): tier 2 is the
soft EM step ω_{i;k} = mean_j γ_{i,j;k}, K is fixed (tier 3) and the server averages each model over the
clients weighted by N_i (γ-weighted local training).

Registering it makes ``algorithm=tempered-em algorithm.temperature=2`` valid everywhere: the CLI after
importing this file, ``fedcluster.run``, ``fedcluster list tempered-em`` (its parameters come from the
dataclass and the comment on each field).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.fedem import FedEM, FedEMParams
from fedcluster.catalog.registry import ALGORITHMS


@dataclass
class TemperedEMParams(FedEMParams):
    temperature: float = 2.0  # τ of log L_k = −ℓ_k / τ (1 = FedEM; larger = softer E-step)

    def __post_init__(self) -> None:  # a ValueError becomes one clear line naming algorithm.<key>
        super().__post_init__()
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


@ALGORITHMS.register("tempered-em", "FedEM with a tempered tier-1 likelihood exp(−loss/τ) (docs/examples)",
                     TemperedEMParams)
class TemperedEM(FedEM):
    def loglik(self, losses: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        """Tier 1: the parent's formulation (``conditional`` by default) on losses divided by τ."""
        return super().loglik(losses / self.params.temperature, x, y)

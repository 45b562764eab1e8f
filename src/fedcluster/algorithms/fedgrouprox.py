"""FedGrouProx (Duan, Liu, Ji, Liu, Liang, Chen & Tan 2021, "FedGroup: Efficient Federated Learning via Decomposed
Similarity-Based Clustering", Sec. V): FedGroup combined with FedProx, the paper's second evaluated framework.

FedGroup (:mod:`fedcluster.algorithms.fedgroup`: the EDC cold start, newcomers placed by their pre-trained update,
FedAvg inside each group) whose clients train their group's model θ_g with FedProx's proximal term:
each client minimises F_i(θ) + (μ/2)‖θ − θ_g‖² (Li et al. 2020, eq. 2) instead of F_i(θ). The cold-start
pre-training from θ^0 is FedGroup's (no proximal term: it has no group model yet). μ = 0 is FedGroup exactly.
The default μ = 0.01 is fedcluster's FedProx default (the FedProx paper tunes μ ∈ {0.001, 0.01, 0.1, 1} per data
set); the FedGroup paper does not restate its μ per experiment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.fedgroup import PAPER, FedGroup, FedGroupParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver


@dataclass
class FedGrouProxParams(FedGroupParams):
    mu: float = 0.01  # proximal weight μ of each client's objective (FedProx); 0 is FedGroup

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mu < 0:
            raise ValueError(f"mu must be >= 0, got {self.mu}")


@ALGORITHMS.register("fedgrouprox", "FedGrouProx: FedGroup whose clients train with FedProx's proximal term "
                     "(μ/2)‖θ − θ_g‖² toward their group's model", FedGrouProxParams,
                     paper=PAPER)
class FedGrouProx(FedGroup):
    def train(self, round_: int, clients: np.ndarray, positions: np.ndarray, solver: Solver | None = None,
              anchor: Params | None = None) -> tuple[Params, torch.Tensor]:
        """The groups' training with the proximal term toward each client's group model (its starting point)."""
        proximal = dataclasses.replace(solver or self.ctx.solver, prox_mu=self.params.mu)
        return super().train(round_, clients, positions, proximal, anchor)

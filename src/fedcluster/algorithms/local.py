"""Local-only training (the FedRC paper's Table 4 row "local"): every client trains its own model on its own data
and nothing is communicated.

Each client i starts from the same initial model θ^0 and, whenever it is sampled, runs the run's local epochs of
minibatch SGD on min_θ f_i(θ) = (1/N_i) Σ_j ℓ(x_ij, y_ij; θ), continuing from its own θ_i: no server update, no
aggregation (bytes up and down: 0). A client predicts with its own θ_i. Test clients, which have no model of their
own, predict with the average of the clients' models, as the FedRC paper evaluates personalised methods without a
global model (App. H: "we average the local models to create a global model and evaluate it on global test
datasets"): θ̄ = Σ_i N_i θ_i / Σ_i N_i over every client, as its code (NoCommunicationAggregator) weights them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.personal import PersonalAlgorithm, mean_of
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged


@dataclass
class LocalParams(RangeChecked):
    num_clusters: int = ranged(  # always 1: the averaged model test clients predict with
        1, "== 1", "local-only training keeps one model per client")


@ALGORITHMS.register("local", "local-only training: every client trains its own model, nothing is communicated "
                     "(test clients: the clients' models averaged)", LocalParams,
                     paper="FedRC paper")
class LocalOnly(PersonalAlgorithm):
    def __init__(self, ctx: Context, params: LocalParams) -> None:
        super().__init__(ctx, params)
        self.has_personal[:] = True  # θ_i = θ^0 until client i trains

    def reads_every_input(self) -> str | None:
        return None  # local training is the trainer's plain SGD

    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        clients = np.asarray(clients, dtype=np.int64)
        idx = torch.as_tensor(clients, device=self.ctx.device)
        trained = self.ctx.trainer.train({n: v[idx] for n, v in self.personal.items()}, clients, self.ctx.solver,
                                         round_)
        for n, v in trained.items():
            self.personal[n][idx] = v
        self.models = mean_of(self.personal, self.ctx.fed.train.sizes)
        return RoundResult(bytes_up=0, bytes_down=0)

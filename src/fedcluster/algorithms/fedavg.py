"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020): one global model.

Round: sample S^t; every i ∈ S^t runs E epochs of minibatch SGD from θ^t
(FedProx adds (μ/2)‖θ − θ^t‖² to the local objective, Li et al. eq. 2); the server applies
θ^{t+1} = θ^t + η_g Σ_i N_i (θ_i − θ^t) / Σ_i N_i.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fedcluster.algorithms.base import Algorithm, Context, RoundResult
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import num_bytes
from fedcluster.engine.trainers.fold import train_into
from fedcluster.tiers.aggregation import ModelSums

FEDAVG_PAPER = ("H. Brendan McMahan, Eider Moore, Daniel Ramage, Seth Hampson, Blaise Agüera y Arcas. "
                "Communication-Efficient Learning of Deep Networks from Decentralized Data. AISTATS, PMLR 54, 2017.")
FEDPROX_PAPER = ("Tian Li, Anit Kumar Sahu, Manzil Zaheer, Maziar Sanjabi, Ameet Talwalkar, Virginia Smith. Federated"
                 " Optimization in Heterogeneous Networks. Proceedings of Machine Learning and Systems (MLSys) 2, "
                 "2020.")


@dataclass
class FedAvgParams(RangeChecked):
    num_clusters: int = ranged(1, "== 1", "one global model; use a clustered method such as ifca or fedem "
                                                "for K > 1")  # always 1 (one global model)


@dataclass
class FedProxParams(FedAvgParams):
    mu: float = ranged(0.01, ">= 0")  # proximal weight μ (Li et al. 2020); μ = 0 is FedAvg


@ALGORITHMS.register("fedavg", "FedAvg: one global model, N_i-weighted model averaging", FedAvgParams,
                     paper=FEDAVG_PAPER)
class FedAvg(Algorithm):
    fixed_clusters = True

    def __init__(self, ctx: Context, params: FedAvgParams) -> None:
        super().__init__(ctx, params)
        self.models = ctx.fresh_models(1)
        self.omega = np.ones((ctx.fed.num_clients, 1))

    @classmethod
    def streams_aggregation(cls, params: FedAvgParams) -> bool:
        return True  # the weights N_i are known before training

    def local_solver(self):
        return self.ctx.solver

    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        global_model = {k: v[0] for k, v in self.models.items()}
        sums = ModelSums(self.client_sizes(clients))  # each chunk of trained clients is folded in as it finishes
        train_into(self.ctx.trainer, sums, self.models, clients, self.local_solver(), round_,  # one shared start
                   init_index=np.zeros(len(clients), dtype=np.int64))
        new = sums.update(global_model, self.ctx.cfg.global_lr)
        self.models = {k: v.unsqueeze(0) for k, v in new.items()}
        payload = num_bytes(global_model) * len(clients)
        return RoundResult(bytes_up=payload, bytes_down=payload)


@ALGORITHMS.register("fedprox", "FedProx: FedAvg with the proximal term (μ/2)‖θ − θ^t‖²", FedProxParams,
                     paper=FEDPROX_PAPER)
class FedProx(FedAvg):
    def local_solver(self):
        return dataclasses.replace(self.ctx.solver, prox_mu=self.params.mu)

"""Ditto (Li, Hu, Beirami & Smith, "Ditto: Fair and Robust Federated Learning Through Personalization", ICML 2021).

Objective (Ditto paper eq. 2): a global model w* = argmin_w G(F_1(w), ..., F_M(w)) (here FedAvg's objective, the
N_i-weighted mean of the clients' losses) and, for every client k, a personal model

    v_k* = argmin_v h_k(v; w*) = F_k(v) + (λ/2) ‖v − w*‖²,

the client's own loss pulled toward the global model with strength λ. λ = 0 is local-only training; λ → ∞ makes
v_k = w*, the global model (the paper's §3 interpolation between local and global models).

One round (Ditto paper Algorithm 1): the server sends w^t to the sampled clients S^t; each client k ∈ S^t

1. solves the global objective locally from w^t (the run's local epochs of minibatch SGD on F_k, as in FedAvg) and
   sends back its trained w_k^t;
2. updates its personal model, kept on the client across rounds, by ``personal_epochs`` of minibatch SGD on
   h_k(v; w^t): v_k ← v_k − η (∇F_k(v_k) + λ (v_k − w^t)) (the run's lr η, the prox centre the w^t received);

and the server sets w^{t+1} = w^t + η_g Σ_k N_k (w_k^t − w^t) / Σ_k N_k (FedAvg; η_g the run's ``global_lr``). Both
updates are the trainer's own SGD (FedAvg's step and FedProx's proximal step with an anchor), so the global model is
exactly FedAvg's. A participating client predicts with its personal model v_k (the paper's personalised accuracy;
the global model until it is first sampled), a test client, which has no personal model, with w (the global
accuracy). Communication: w down and w_k up; v_k never leaves the client.

The personal steps use their own batch stream; with ``client_momentum=keep`` only the global steps keep their
momentum buffer across rounds (the personal steps start each round from a zero buffer). An explicit gradient step
on the proximal term is stable only for η (λ + weight decay) < 2 (1 + momentum), which the method checks when it
is built: for a large λ lower the run's ``lr`` (the personal model then stays within a step of w).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.personal import PersonalAlgorithm
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.trainers.fold import train_into
from fedcluster.errors import ConfigError
from fedcluster.tiers.aggregation import ModelSums

PAPER = ("Tian Li, Shengyuan Hu, Ahmad Beirami, Virginia Smith. Ditto: Fair and Robust Federated Learning Through "
         "Personalization. International Conference on Machine Learning (ICML), PMLR 139, 2021.")
PERSONAL_STREAM = 1  # the batch stream of the personal steps (the global steps use the rounds' stream 0)


@dataclass
class DittoParams(RangeChecked):
    lam: float = ranged(1.0, ">= 0")  # λ, the pull of the personal model toward the global one (0: local training)
    personal_epochs: int | None = ranged(None, ">= 1")  # personal epochs a round (null: the run's local_epochs)
    num_clusters: int = ranged(1, "== 1", "Ditto keeps one global model")  # always 1: one global model


@ALGORITHMS.register("ditto", "Ditto: FedAvg's global model w and a personal model per client trained on "
                     "F_k(v) + (λ/2)‖v − w‖²", DittoParams, paper=PAPER)
class Ditto(PersonalAlgorithm):
    def __init__(self, ctx: Context, params: DittoParams) -> None:
        super().__init__(ctx, params)
        cfg = ctx.cfg
        if cfg.lr * (params.lam + cfg.weight_decay) >= 2.0 * (1.0 + cfg.momentum):
            raise ConfigError(f"algorithm.lam={params.lam:g} with lr={cfg.lr:g} makes the personal steps diverge "
                              f"(they need lr·(lam + weight_decay) < 2·(1 + momentum)): lower lr or algorithm.lam")
        epochs = ctx.solver.epochs if params.personal_epochs is None else params.personal_epochs
        self.personal_solver = dataclasses.replace(ctx.solver, prox_mu=float(params.lam), epochs=epochs)

    def reads_every_input(self) -> str | None:
        return None  # both updates are the trainer's own SGD

    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        clients = np.asarray(clients, dtype=np.int64)
        w = {n: v[0] for n, v in self.models.items()}
        if len(clients):
            # 1. the global objective: FedAvg's local steps from w^t and its server step
            sums = ModelSums(self.client_sizes(clients))
            train_into(self.ctx.trainer, sums, self.models, clients, self.ctx.solver, round_,
                       init_index=np.zeros(len(clients), dtype=np.int64))
            # 2. the personal models: SGD on F_k(v) + (λ/2)‖v − w^t‖², from each client's own v_k
            idx = torch.as_tensor(clients, device=self.ctx.device)
            anchor = {n: v.expand(len(clients), *v.shape).clone() for n, v in w.items()}
            trained = self.ctx.trainer.train({n: v[idx] for n, v in self.personal.items()}, clients,
                                             self.personal_solver, round_, anchor=anchor, stream=PERSONAL_STREAM)
            for n, v in trained.items():
                self.personal[n][idx] = v
            self.has_personal[clients] = True
            self.models = {n: v.unsqueeze(0) for n, v in sums.update(w, self.ctx.cfg.global_lr).items()}
        payload = self.model_bytes() * len(clients)
        return RoundResult(bytes_up=payload, bytes_down=payload)

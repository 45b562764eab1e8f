"""pFedMe (T. Dinh, Tran & Nguyen, "Personalized Federated Learning with Moreau Envelopes", NeurIPS 2020).

Objective (pFedMe paper eq. 2–3): min_w F(w) = (1/N) Σ_i F_i(w) with the Moreau envelope
F_i(w) = min_θ { f_i(θ) + (λ/2) ‖θ − w‖² }, whose minimiser θ̂_i(w) = prox_{f_i/λ}(w) is client i's personalised
model; ∇F_i(w) = λ (w − θ̂_i(w)).

One round (pFedMe paper Algorithm 1): the server sends w^t; each sampled client sets w_{i,0} = w^t and, for each of
its R local steps (here: the run's local epochs in batches of ``batch_size``), draws a batch D_i and

1. approximately solves the inner problem θ̃_i = argmin_θ h̃_i(θ; w_{i,r}, D_i), h̃_i = f̃_i(θ; D_i) +
   (λ/2) ‖θ − w_{i,r}‖², by K steps of gradient descent with the personal step size (``inner_steps``,
   ``personal_lr``), from the previous θ̃_i (w^t at the round's start, as the authors' code does);
2. updates its local copy of w: w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̃_i) (η: the run's ``lr``);

then the server sets w^{t+1} = (1 − β) w^t + β Σ_{i∈S^t} w_{i,R} / |S^t|. Plain gradient steps, as the paper's:
the run's momentum and weight decay are not used. A participating client predicts with its last θ̃_i (the paper's
personalised model); a test client with the global w. Defaults: the paper's MNIST setting (λ = 15, K = 5, personal
step 0.1, β = 1). Communication: w down and w_{i,R} up.

θ̃_i is a proximal step away from w, so it is as good as w allows: on a label skew (the digits demo's federation
with ``scenario=label-skew``) it beats local training, while on the demo's three concepts, which relabel the same
images so that no w fits them, it stays near w, 14–32 points below local training at every λ tried (measured
in docs/methods.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import RoundResult
from fedcluster.algorithms.personal import PersonalAlgorithm, chunks
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged

PAPER = ("Canh T. Dinh, Nguyen H. Tran, Tuan Dung Nguyen. Personalized Federated Learning with Moreau Envelopes. "
         "Advances in Neural Information Processing Systems (NeurIPS) 33, 2020.")


@dataclass
class PFedMeParams(RangeChecked):
    lam: float = ranged(15.0, "> 0")  # λ, the weight of the Moreau envelope's proximal term
    inner_steps: int = ranged(5, ">= 1")  # K, gradient steps on the inner problem per local step
    personal_lr: float = ranged(0.1, "> 0")  # step size of the inner steps (the paper's personal learning rate)
    beta: float = ranged(1.0, "> 0")  # β, the server's step toward the clients' average (1: plain averaging)
    num_clusters: int = ranged(1, "== 1", "pFedMe keeps one global model")  # always 1: one global model


@ALGORITHMS.register("pfedme", "pFedMe: Moreau-envelope personalised models θ_i = prox(w), one global model w",
                     PFedMeParams, paper=PAPER)
class PFedMe(PersonalAlgorithm):
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        p, eta = self.params, self.ctx.cfg.lr
        clients = np.asarray(clients, dtype=np.int64)
        w = {n: v[0] for n, v in self.models.items()}
        total = {n: torch.zeros_like(v) for n, v in w.items()}
        for part in chunks(clients):
            start = {n: v.expand(len(part), *v.shape).clone() for n, v in w.items()}
            w_local, theta = start, {n: v.clone() for n, v in start.items()}
            with torch.no_grad():
                for step in self.steps(part, round_):
                    for _ in range(p.inner_steps):  # K steps on h̃_i(θ; w_{i,r}, D_i)
                        g = self.loss_grads(theta, step)
                        theta = {n: theta[n] - p.personal_lr * step.scale(v) * (g[n] + p.lam * (v - w_local[n]))
                                 for n, v in theta.items()}
                    w_local = {n: v - eta * p.lam * step.scale(v) * (v - theta[n]) for n, v in w_local.items()}
            idx = torch.as_tensor(part, device=self.ctx.device)
            for n in total:
                total[n] += w_local[n].sum(0)
                self.personal[n][idx] = theta[n]
        self.has_personal[clients] = True
        if len(clients):
            self.models = {n: ((1 - p.beta) * w[n] + p.beta * total[n] / len(clients)).unsqueeze(0) for n in w}
        payload = self.model_bytes() * len(clients)
        return RoundResult(bytes_up=payload, bytes_down=payload)

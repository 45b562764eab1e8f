"""APFL (Deng, Kamani & Mahdavi, "Adaptive Personalized Federated Learning", arXiv:2003.13461, 2020).

Each client i keeps a local model v_i and a mixing weight α_i ∈ [0, 1]; its personalised model is the mixture
v̄_i = α_i v_i + (1 − α_i) w of its local model and the global model w (APFL paper §3, the personalised model
h_α = α h_i + (1 − α) h̄), and α_i is learned as α_i* = argmin_α f_i(α v_i + (1 − α) w) (its optimal mixing).

Each local step of a sampled client on a batch ξ (APFL paper Algorithm 1, with the adaptive α of its §5):

1. w_i ← w_i − η ∇f_i(w_i; ξ)                               (the local copy of the global model, started at w^t);
2. v_i ← v_i − η ∇_v f_i(v̄_i; ξ) = v_i − η α_i ∇f_i(v̄_i; ξ)    (v̄_i = α_i v_i + (1 − α_i) w_i);
3. α_i ← α_i − η_α ∇_α f_i(v̄_i; ξ) = α_i − η_α ⟨v_i − w_i, ∇f_i(v̄_i; ξ)⟩, kept in [0, 1]

(every right-hand side at the values before the step); after the local steps the server averages the w_i,
w^{t+1} = Σ_i N_i w_i / Σ_i N_i. v_i and α_i stay with the client across rounds. A larger α_i gives the local model
more weight: under strong label shift the global model fits client i badly and α_i rises. Plain gradient steps, as
the paper's: the run's momentum and weight decay are not used; η is the run's ``lr``, η_α ``alpha_lr`` (default
the same η). A participating client predicts with v̄_i (with the current w); a test client with w.
Communication: w down and w_i up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.personal import PersonalAlgorithm, mean_of
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.engine.params import Params


@dataclass
class APFLParams:
    alpha: float = 0.5  # α_i at the start: the local model's share of the personalised model
    adaptive: bool = True  # learn α_i (APFL paper §5); false keeps it fixed
    alpha_lr: float | None = None  # η_α, the step size of α (null: the run's lr)
    num_clusters: int = 1  # always 1: one global model

    def __post_init__(self) -> None:
        if not 0 <= self.alpha <= 1 or (self.alpha_lr is not None and self.alpha_lr <= 0):
            raise ValueError(f"need 0 <= alpha <= 1 and alpha_lr > 0, got alpha={self.alpha}, "
                             f"alpha_lr={self.alpha_lr}")
        if self.num_clusters != 1:
            raise ValueError("APFL keeps one global model: num_clusters must be 1")


@ALGORITHMS.register("apfl", "APFL: personalised mixture α_i v_i + (1 − α_i) w of a local and the global model, "
                     "α_i learned", APFLParams)
class APFL(PersonalAlgorithm):
    def __init__(self, ctx: Context, params: APFLParams) -> None:
        super().__init__(ctx, params)
        self.alpha = np.full(ctx.fed.num_clients, float(params.alpha))
        self.has_personal[:] = True  # v_i = w^0 at the start

    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        p, eta = self.params, self.ctx.cfg.lr
        eta_alpha = eta if p.alpha_lr is None else p.alpha_lr
        clients = np.asarray(clients, dtype=np.int64)
        w = {n: v[0] for n, v in self.models.items()}
        trained = {n: torch.empty(len(clients), *v.shape, dtype=v.dtype, device=v.device) for n, v in w.items()}
        for u, c in enumerate(clients):
            c = int(c)
            w_i = {n: v.clone() for n, v in w.items()}
            v_i = {n: self.personal[n][c].clone() for n in w}
            a = float(self.alpha[c])
            for x, y in self.batches(c, round_):
                g_w = self.loss_grad(w_i, x, y)
                g_bar = self.loss_grad({n: a * v_i[n] + (1 - a) * w_i[n] for n in w}, x, y)
                if p.adaptive:
                    slope = sum(float(((v_i[n] - w_i[n]) * g_bar[n]).sum()) for n in w)
                    a_next = min(1.0, max(0.0, a - eta_alpha * slope))
                else:
                    a_next = a
                v_i = {n: v_i[n] - eta * a * g_bar[n] for n in w}
                w_i = {n: w_i[n] - eta * g_w[n] for n in w}
                a = a_next
            self.alpha[c] = a
            for n in w:
                self.personal[n][c] = v_i[n]
                trained[n][u] = w_i[n]
        if len(clients):
            self.models = mean_of(trained, self.ctx.fed.train.sizes[clients])
        payload = self.model_bytes() * len(clients)
        return RoundResult(bytes_up=payload, bytes_down=payload)

    def personal_for_prediction(self) -> Params:
        """v̄_i = α_i v_i + (1 − α_i) w for every client, with the current global w."""
        a = torch.as_tensor(self.alpha, device=self.ctx.device)
        out = {}
        for n, v in self.personal.items():
            share = a.view(-1, *[1] * (v.dim() - 1)).to(v.dtype)
            out[n] = share * v + (1 - share) * self.models[n]
        return out

    def state_dict(self) -> dict:
        return {**super().state_dict(), "alpha": self.alpha}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.alpha = state["alpha"]

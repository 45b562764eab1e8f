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
from fedcluster.algorithms.personal import PersonalAlgorithm, chunks, mean_of
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import Params
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Reals

PAPER = ("Yuyang Deng, Mohammad Mahdi Kamani, Mehrdad Mahdavi. Adaptive Personalized Federated Learning. "
         "arXiv:2003.13461, 2020.")


@dataclass
class APFLParams(RangeChecked):
    alpha: float = ranged(0.5, "[0, 1]")  # α_i at the start: the local model's share of the personalised model
    adaptive: bool = True  # learn α_i (APFL paper §5); false keeps it fixed
    alpha_lr: float | None = ranged(None, "> 0")  # η_α, the step size of α (null: the run's lr)
    num_clusters: int = ranged(1, "== 1", "APFL keeps one global model")  # always 1: one global model


@ALGORITHMS.register("apfl", "APFL: personalised mixture α_i v_i + (1 − α_i) w of a local and the global model, "
                     "α_i learned", APFLParams, paper=PAPER)
class APFL(PersonalAlgorithm):
    alpha = Saved[np.ndarray](Reals(low=0.0, high=1.0))  # α_i, the local model's share

    def __init__(self, ctx: Context, params: APFLParams) -> None:
        super().__init__(ctx, params)
        self.alpha = np.full(ctx.fed.num_clients, float(params.alpha))
        self.has_personal[:] = True  # v_i = w^0 at the start

    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        p, eta = self.params, self.ctx.cfg.lr
        eta_alpha = eta if p.alpha_lr is None else p.alpha_lr
        clients = np.asarray(clients, dtype=np.int64)
        w = {n: v[0] for n, v in self.models.items()}
        trained: dict[str, list[torch.Tensor]] = {n: [] for n in w}
        for part in chunks(clients):
            idx = torch.as_tensor(part, device=self.ctx.device)
            w_i = {n: v.expand(len(part), *v.shape).clone() for n, v in w.items()}
            v_i = {n: self.personal[n][idx].clone() for n in w}
            a = torch.as_tensor(self.alpha[part], device=self.ctx.device)  # float64 [U]
            with torch.no_grad():
                for step in self.steps(part, round_):
                    share = {n: _rows(a, v) for n, v in v_i.items()}
                    g_w = self.loss_grads(w_i, step)
                    g_bar = self.loss_grads({n: share[n] * v + (1 - share[n]) * w_i[n] for n, v in v_i.items()}, step)
                    a_next = a
                    if p.adaptive:  # ∂f_i(v̄_i)/∂α_i = ⟨v_i − w_i, ∇f_i(v̄_i)⟩, per client
                        slope = sum(((v_i[n] - w_i[n]) * g_bar[n]).flatten(1).sum(1).double() for n in w)
                        a_next = torch.where(step.active > 0, (a - eta_alpha * slope).clamp(0.0, 1.0), a)
                    v_i = {n: v - eta * step.scale(v) * share[n] * g_bar[n] for n, v in v_i.items()}
                    w_i = {n: v - eta * step.scale(v) * g_w[n] for n, v in w_i.items()}
                    a = a_next
            self.alpha[part] = a.cpu().numpy()
            for n in w:
                self.personal[n][idx] = v_i[n]
                trained[n].append(w_i[n])
        if len(clients):
            self.models = mean_of({n: torch.cat(v) for n, v in trained.items()}, self.ctx.fed.train.sizes[clients])
        payload = self.model_bytes() * len(clients)
        return RoundResult(bytes_up=payload, bytes_down=payload)

    def personal_for_prediction(self) -> Params:
        """v̄_i = α_i v_i + (1 − α_i) w for every client, with the current global w."""
        a = torch.as_tensor(self.alpha, device=self.ctx.device)
        return {n: _rows(a, v) * v + (1 - _rows(a, v)) * self.models[n] for n, v in self.personal.items()}


def _rows(a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The per-client weights ``a`` [U] shaped to multiply a stack ``v`` [U, ...], in its dtype."""
    return a.view(-1, *[1] * (v.dim() - 1)).to(v.dtype)

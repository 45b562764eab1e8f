"""Shared machinery of the personalised baselines (the FedRC paper's Table 4: local-only training, pFedMe, APFL):
one personal model per client besides one global model.

Evaluation follows the FedRC paper (App. H): a participating client predicts with its personal model (the global
model until it has one); a test client, which has no personal model, predicts with the global model, which for a
method without one (local-only training) is the average of the clients' models ("For personalized algorithms that
don't have a global model, we average the local models to create a global model").

pFedMe and APFL update two sets of parameters per local step (a bi-level or a mixed objective), which the
trainer's plain SGD cannot express; :func:`local_steps` runs their steps here, one client at a time, on the same
batches the trainer would draw (engine.batches: seeded by seed, round, client and stream).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.func import functional_call

from fedcluster.algorithms.base import Algorithm, Context
from fedcluster.data.federation import Split
from fedcluster.engine.batches import make_schedule
from fedcluster.engine.evaluation import client_outputs
from fedcluster.engine.kernels import per_sample_loss
from fedcluster.engine.params import Params, num_bytes


class PersonalAlgorithm(Algorithm):
    """One global model (``models``, K = 1) and a personal model per client (``personal`` [M, ...])."""

    fixed_clusters = True

    def __init__(self, ctx: Context, params: Any) -> None:
        super().__init__(ctx, params)
        self.models = ctx.fresh_models(1)
        m = ctx.fed.num_clients
        self.omega = np.ones((m, 1))
        self.personal: Params = {n: v.expand(m, *v.shape[1:]).clone() for n, v in self.models.items()}
        self.has_personal = np.zeros(m, dtype=bool)
        self._loss = per_sample_loss(ctx.fed.task)

    def reads_every_input(self) -> str | None:
        return f"algorithm={type(self).__name__} (its local steps run in the server's process)"

    def global_model(self) -> Params:
        """The model a test client predicts with: the global model."""
        return self.models

    def model_bytes(self) -> int:
        return num_bytes({n: v[0] for n, v in self.models.items()})

    # -- local steps run here ---------------------------------------------------------------
    def batches(self, client: int, round_: int, stream: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The (inputs, targets) of ``client``'s local steps this round: the run's epochs and batch size, in the
        order the trainer would draw them."""
        solver, train = self.ctx.solver, self.ctx.fed.train
        sched = make_schedule(train.sizes, np.array([client]), self.ctx.cfg.seed, round_, solver.epochs,
                              solver.batch_size, stream, solver.max_steps, solver.drop_last)
        lo = int(train.ptr[client])
        for s in range(int(sched.steps[0])):
            real = int(sched.mask[0, s].sum())
            idx = (sched.local[0, s, :real] + lo).to(train.x.device)
            yield train.x[idx], train.y[idx]

    def loss_grad(self, params: Params, x: torch.Tensor, y: torch.Tensor) -> Params:
        """∇ of the mean per-sample loss of the model ``params`` (one model) on the batch (x, y)."""
        leaves = {n: v.detach().requires_grad_(True) for n, v in params.items()}
        loss = self._loss(functional_call(self.ctx.module, leaves, (x,)), y).mean()
        grads = torch.autograd.grad(loss, list(leaves.values()))
        return dict(zip(leaves, grads, strict=True))

    # -- evaluation --------------------------------------------------------------------------
    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """Participating clients: their personal models (the global model for a client that has none yet); test
        clients: :meth:`global_model`."""
        if not participating:
            return self.outputs(split.x, self.global_model()), np.ones((split.num_clients, 1))
        clients = np.arange(self.ctx.fed.num_clients)
        fresh = torch.as_tensor(~self.has_personal, device=self.ctx.device)
        models = {n: torch.where(fresh.view(-1, *[1] * (v.dim() - 1)), self.models[n], v)
                  for n, v in self.personal_for_prediction().items()}
        outputs, _ = client_outputs(self.ctx.module, {n: v.unsqueeze(1) for n, v in models.items()}, split, clients)
        return outputs, torch.ones(split.num_clients, 1, device=outputs.device)

    def personal_for_prediction(self) -> Params:
        """[M, ...] each client's personalised model (APFL: the mixture of its local and the global model)."""
        return self.personal

    def assignment(self) -> np.ndarray:
        return np.zeros(self.ctx.fed.num_clients, dtype=np.int64)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "personal": self.personal, "has_personal": self.has_personal}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.personal, self.has_personal = state["personal"], state["has_personal"]


def mean_of(stack: Params, weights: np.ndarray | torch.Tensor) -> Params:
    """Σ_i a_i θ_i / Σ_i a_i over the first axis of ``stack``, kept as a stack of one [1, ...]."""
    first = next(iter(stack.values()))
    a = torch.as_tensor(weights, dtype=torch.float64, device=first.device)
    a = a / a.sum()
    return {n: torch.einsum("m,m...->...", a, v.double()).to(v.dtype).unsqueeze(0) for n, v in stack.items()}

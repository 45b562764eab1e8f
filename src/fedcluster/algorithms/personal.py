"""Shared machinery of the personalised baselines (the FedRC paper's Table 4: local-only training, pFedMe, APFL):
one personal model per client besides one global model.

Evaluation follows the FedRC paper (App. H): a participating client predicts with its personal model (the global
model until it has one); a test client, which has no personal model, predicts with the global model, which for a
method without one (local-only training) is the average of the clients' models ("For personalized algorithms that
don't have a global model, we average the local models to create a global model").

pFedMe and APFL update two sets of parameters per local step (a bi-level or a mixed objective), which the
trainer's plain SGD cannot express; :meth:`PersonalAlgorithm.steps` runs their steps here, the clients of a chunk
vectorised (torch.func), on the same batches the trainer would draw (engine.training.batches: seeded by seed, round,
client and stream).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from fedcluster.algorithms.base import Algorithm, Context
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation.scores import client_outputs
from fedcluster.engine.params import Params, num_bytes
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.kernels import per_sample_loss
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, Weights

CHUNK = 64  # clients whose local steps run at once


@dataclass
class LocalStep:
    """One local step of U clients: their batches [U, B, ...] (padded), padding mask [U, B], and which are active."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    active: torch.Tensor  # [U] 1.0 for a client that takes this step

    def scale(self, v: torch.Tensor) -> torch.Tensor:
        """``active`` shaped to multiply a stack ``v`` [U, ...]."""
        return self.active.view(-1, *[1] * (v.dim() - 1)).to(v.dtype)


def chunks(clients: np.ndarray) -> Iterator[np.ndarray]:
    for lo in range(0, len(clients), CHUNK):
        yield clients[lo:lo + CHUNK]


class PersonalAlgorithm(Algorithm):
    """One global model (``models``, K = 1) and a personal model per client (``personal`` [M, ...])."""

    fixed_clusters = True
    personal = Saved[Params](Weights())  # [M, ...] each client's personal model
    has_personal = Saved[np.ndarray](Flags())

    def __init__(self, ctx: Context, params: Any) -> None:
        super().__init__(ctx, params)
        self.models = ctx.fresh_models(1)
        m = ctx.fed.num_clients
        self.omega = np.ones((m, 1))
        self.personal = {n: v.expand(m, *v.shape[1:]).clone() for n, v in self.models.items()}
        self.has_personal = np.zeros(m, dtype=bool)
        self._loss = per_sample_loss(ctx.fed.task)
        self._grad_fn = vmap(grad(self._unit_loss))

    def reads_every_input(self) -> str | None:
        return f"algorithm={type(self).__name__} (its local steps run in the server's process)"

    def global_model(self) -> Params:
        """The model a test client predicts with: the global model."""
        return self.models

    def model_bytes(self) -> int:
        return num_bytes({n: v[0] for n, v in self.models.items()})

    # -- local steps run here, every client of a chunk at once ----------------------------------------
    def steps(self, clients: np.ndarray, round_: int, stream: int = 0) -> Iterator[LocalStep]:
        """The cohort's local steps in lockstep: the run's epochs and batch size, each client's batches in the order
        the trainer would draw them (engine.training.batches); a client out of steps is inactive (``active`` 0)."""
        solver, train = self.ctx.solver, self.ctx.fed.train
        sched = make_schedule(train.sizes, clients, self.ctx.cfg.seed, round_, solver.epochs, solver.batch_size,
                              stream, solver.max_steps, solver.drop_last)
        device = train.x.device
        rows = (sched.local + torch.as_tensor(train.ptr[clients]).view(-1, 1, 1)).to(device)
        mask = sched.mask.to(device)
        for s in range(sched.num_steps):
            active = torch.as_tensor(sched.steps > s, device=device, dtype=torch.float32)
            idx = rows[:, s]
            yield LocalStep(train.x[idx], train.y[idx], mask[:, s], active)

    def loss_grads(self, params: Params, step: LocalStep) -> Params:
        """[U, ...] ∇ of each unit's mean loss on its batch of ``step`` at its own model ``params`` [U, ...]."""
        return self._grad_fn(params, step.x, step.y, step.mask)

    def _unit_loss(self, p: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = functional_call(self.ctx.module, p, (x,))
        return (self._loss(out, y) * mask).sum() / mask.sum().clamp(min=1.0)

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


def mean_of(stack: Params, weights: np.ndarray | torch.Tensor) -> Params:
    """Σ_i a_i θ_i / Σ_i a_i over the first axis of ``stack``, kept as a stack of one [1, ...]."""
    first = next(iter(stack.values()))
    a = torch.as_tensor(weights, dtype=torch.float64, device=first.device)
    a = a / a.sum()
    return {n: torch.einsum("m,m...->...", a, v.double()).to(v.dtype).unsqueeze(0) for n, v in stack.items()}

"""IFCA (Ghosh et al. 2020): hard clustering by the lowest local loss.

Composition: tier 1 ``conditional``, tier 2 ``hard-loss`` (client scope), fixed K. One round:

1. send all K models to the cohort; client i picks k_i = argmin_k (1/N_i) Σ_j f(x_ij, y_ij; θ_k) on its
   training data (HCFL paper footnote 6; the K loss passes of the cohort run as one batched forward);
2. ``variant=model`` (option II, used by HCFL paper/FedRC paper): E local epochs of θ_{k_i} → θ_i;
   ``variant=gradient`` (option I, CFL-GP paper): one full-batch gradient step θ_i = θ_{k_i} − η ∇F_i(θ_{k_i}),
   so that averaging the θ_i applies the N_i-weighted mean gradient;
3. θ_k ← θ_k + η_g Σ_{i: k_i = k} N_i (θ_i − θ_k) / Σ_{i: k_i = k} N_i; a model nobody picked is unchanged
   (the per-cluster average note on Phase-2 averaging rules).

``zero_fill`` (default off) is the FedRC paper's public code as run (github.com/LINs-lab/FedRC, ``IFCAAggregator.mix``):
it averages, for every model, the list of clients that picked it, and an empty list leaves the model all zeros.
A zeroed model (zero logits: a loss of log C on every sample) stays on offer, clients whose loss on the other
models exceeds log C pick it, and with zero weights only its output bias can learn. It is not in the IFCA paper
(Ghosh et al. 2020); it is offered to test whether it explains the FedRC paper's low IFCA numbers (FedRC Table 1).

``assign_by``, ``assign_on`` and ``steps`` (defaults: the IFCA paper's rule above) give IFCA as the CFL-GP
paper's public code runs it (github.com/Heasung-Kim/clustered-federated-learning-via-gradient-based-partitioning,
``CentralUnit.run_IFCA``): ``assign_by=accuracy`` picks k_i = argmax_k of the accuracy of θ_k (the first k on a tie)
instead of the lowest loss, ``assign_on=batch`` scores one random minibatch of ``batch_size`` of the client's
training data instead of all of it (the same minibatch for every k; that code draws a fresh one for each k), and
``steps=1`` with ``variant=model`` trains one minibatch gradient step θ_{k_i} − η ∇f_B(θ_{k_i}) (that code's
``compute_gradient`` and ``gradient_averaging``, its average N_i-weighted here, unweighted there).

With ``split`` all layers but the head are shared and trained by every client — IFCA's weight-sharing
variant and HCFL+'s layout. Communication: K models down, one up. Test clients take the
cluster with the lowest loss (FedRC paper H.8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams, replace_solver
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.engine.params import Params
from fedcluster.errors import ConfigError
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.cohort import Cohort, segment_mean
from fedcluster.tiers.formulation import Conditional
from fedcluster.tiers.weighting import HardLoss

PAPER = ("Avishek Ghosh, Jichan Chung, Dong Yin, Kannan Ramchandran. An Efficient Framework for Clustered Federated "
         "Learning. Advances in Neural Information Processing Systems (NeurIPS) 33, 2020.")


@dataclass
class IFCAParams(ClusteredParams):
    variant: Literal["model", "gradient"] = "model"  # option II (model averaging) / option I (gradient)
    zero_fill: bool = False  # The FedRC paper's code as run: a model no sampled client picked becomes all zeros
    assign_by: Literal["loss", "accuracy"] = "loss"  # the lowest mean loss / the highest accuracy (CFL-GP paper's code)
    assign_on: Literal["all", "batch"] = "all"  # score all training data / one random minibatch of batch_size
    steps: int | None = ranged(None, ">= 1")  # cap on local steps a round (CFL-GP paper's code: 1)


@ALGORITHMS.register("ifca", "IFCA: hard assignment by lowest local loss (variant=model|gradient averaging)",
                     IFCAParams, paper=PAPER)
class IFCA(ClusteredAlgorithm):
    """Tier 1: the ``conditional`` formulation; tier 2: the :class:`HardLoss` rule; a fixed K."""

    def __init__(self, ctx: Context, params: IFCAParams) -> None:
        super().__init__(ctx, params, formulation=Conditional(), weighting=HardLoss(), adaptation=Fixed())
        if params.assign_by == "accuracy" and ctx.fed.task != "classification":
            raise ConfigError("algorithm.assign_by=accuracy needs class labels; use algorithm.assign_by=loss")

    @classmethod
    def streams_aggregation(cls, params: IFCAParams) -> bool:
        return not params.split  # the assignment is made before training

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Step 1: every client picks k_i (:meth:`choose`) before training and joins it; K models down, one up;
        the local solver of the variant (step 2)."""
        assign = self.choose(round_, cohort.clients)
        solver = self.ctx.solver
        if self.params.variant == "gradient":
            full = int(self.ctx.fed.train.sizes[cohort.clients].max(initial=1))
            solver = replace_solver(solver, epochs=1, batch_size=full, max_steps=1, momentum=0.0)
        if self.params.steps is not None:
            solver = replace_solver(solver, max_steps=self.params.steps)
        return RoundPlan.hard(cohort, assign, self.num_clusters, sent=self.num_clusters, solver=solver).join(assign)

    def adapt(self, round_: int, plan: RoundPlan, local: Params | None, received: Params) -> None:
        """``zero_fill``: after step 3, a model no client picked becomes all zeros (the FedRC paper's code)."""
        if self.params.zero_fill:
            assert plan.positions is not None
            self.zero_unpicked(np.bincount(plan.positions, minlength=self.num_clusters) > 0)

    def choose(self, round_: int, clients: np.ndarray) -> np.ndarray:
        """k_i for every sampled client: the lowest mean loss on all its training data (the IFCA paper), or the
        rule ``assign_by`` on the rows ``assign_on`` names."""
        p = self.params
        if p.assign_by == "loss" and p.assign_on == "all":
            return self.weighting.start(self.loglik_of, clients, self.state)
        rows, owner = self.rows(clients)
        if p.assign_on == "batch":
            rows, owner = one_batch(rows, owner, len(clients), self.ctx.solver.batch_size,
                                    np.random.default_rng([self.ctx.cfg.seed, 11, round_]))
        if p.assign_by == "loss":
            score = -self.losses(rows)
        else:
            outputs = self.outputs(self.ctx.fed.train.take(rows))  # [K, n, classes]
            labels = torch.as_tensor(self.labels()[rows], device=outputs.device)
            score = (outputs.argmax(-1) == labels).T.double().cpu().numpy()
        return segment_mean(score, owner, len(clients)).argmax(1)

    def zero_unpicked(self, picked: np.ndarray) -> None:
        """Set every model ``k`` with ``picked[k]`` False to zeros (the shared extractor of ``split`` is kept)."""
        if picked.all():
            return
        for name, cur in self.models.items():
            if self.split and name.startswith("body."):
                continue
            dead = torch.as_tensor(~picked, device=cur.device).view(-1, *[1] * (cur.dim() - 1))
            self.models[name] = torch.where(dead, torch.zeros_like(cur), cur)


def one_batch(rows: np.ndarray, owner: np.ndarray, m: int, size: int, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray]:
    """One random minibatch of ``size`` rows (all of them when fewer) of each of the ``m`` clients; ``owner`` is
    sorted (the clients' rows back to back)."""
    start = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=m))])
    picked = [s + np.sort(rng.choice(e - s, min(size, e - s), replace=False))
              for s, e in zip(start[:-1], start[1:], strict=True)]
    index = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
    return rows[index], owner[index]

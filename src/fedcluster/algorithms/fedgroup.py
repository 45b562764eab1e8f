"""FedGroup (Duan, Liu, Ji, Liu, Liang, Chen & Tan 2021, "FedGroup: Efficient Federated Learning via
Decomposed Similarity-Based Clustering"): K groups found once from the directions of pre-trained client updates
(the EDC measure), newcomers placed by their own pre-trained update, FedAvg inside each group, and an optional
inter-group aggregation. Follows the paper's Algorithm 1 with the choices of the authors' code
(github.com/morningD/FlexCFL, ``flearn/trainer/fedgroup.py``):

1. group cold start (before the first round): ``pretrain_scale``·K clients drawn at random (all of them when
   fewer) each take ``pretrain_steps`` local steps from θ^0 → Δw_i; the K leading directions v_j of
   ΔW = [Δw_1 … Δw_n] (truncated SVD, eq. 9; :func:`~fedcluster.tiers.grouping.update_directions`) give
   M_ij = cos(Δw_i, v_j) (eq. 10), and K-means on the rows of M (Euclidean distance of M rows = EDC, eq. 11;
   :func:`~fedcluster.tiers.grouping.kmeans_groups`) forms the K groups. Group g starts from the plain mean of
   its members' pre-trained models; the mean of their Δw_i is its cold-start direction;
2. a client first sampled without a group (a newcomer) is cold-started the same way: ``pretrain_steps`` from θ^0,
   then it joins the group whose cold-start direction has the highest cosine with its update
   (:func:`~fedcluster.tiers.grouping.most_similar`; the authors' ``client_cold_start``);
3. every round, each sampled client trains its group's model; θ_g ← N_i-weighted FedAvg of its sampled members;
4. with ``inter_lr`` = η > 0, the inter-group aggregation (Sec. IV-D, the code's ``inter_group_aggregation``)
   pulls every group toward the others' scale-normalised models
   (:func:`~fedcluster.tiers.grouping.inter_group_update`); η = 0 (the code's default) keeps groups independent.

Defaults are the authors' configuration: K = 3 (``num_group``; 5 for FEMNIST), α = 20 (``pretrain_scale``),
50 pre-training steps, η = 0. The number of groups is fixed. The code's optional dynamic client migration
(FlexCFL) is not part of FedGroup and is not implemented. A client not yet cold-started counts as group 0 in the
ARI and predicts with group 0 (only possible when M > α·K, under partial participation). Test clients take the
group with the lowest loss on their labelled data. Communication: cold starts upload one update per pre-trained
client; each round one model each way per sampled client.

FedGrouProx (Sec. V, registered as ``fedgrouprox``), the paper's second evaluated framework: FedGroup whose
clients train their group's model θ_g with FedProx's proximal term, minimising F_i(θ) + (μ/2)‖θ − θ_g‖² (Li et al.
2020, eq. 2) instead of F_i(θ). The cold-start pre-training from θ^0 is FedGroup's (no group model yet); μ = 0 is
FedGroup exactly. The default μ = 0.01 is fedcluster's FedProx default (the FedProx paper tunes μ ∈ {0.001, 0.01,
0.1, 1} per data set); the FedGroup paper does not restate its μ per experiment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.notes import note
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import Params, flatten, repeat
from fedcluster.engine.solver import Solver
from fedcluster.errors import ConfigError
from fedcluster.tiers.grouping import inter_group_update
from fedcluster.tiers.regrouping import DirectionGroups
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, Reals, Weights, num_models

PAPER = ("Moming Duan, Duo Liu, Xinyuan Ji, Renping Liu, Liang Liang, Xianzhang Chen, Yujuan Tan. FedGroup: Efficient"
         " Federated Learning via Decomposed Similarity-Based Clustering. IEEE International Symposium on Parallel "
         "and Distributed Processing with Applications (ISPA), 2021 (arXiv:2010.06870).")


@dataclass
class FedGroupParams(RangeChecked):
    num_groups: int = ranged(3, ">= 1")  # K, the number of groups (the authors' num_group)
    pretrain_scale: int = ranged(20, ">= 1")  # α: α·K clients are pre-trained for the group cold start
    pretrain_steps: int = ranged(50, ">= 1")  # local steps of a cold-start pre-training from θ^0
    inter_lr: float = ranged(0.0, ">= 0")  # η of the inter-group aggregation (0: groups train independently)


def steps_solver(solver: Solver, steps: int, sizes: np.ndarray) -> Solver:
    """``solver`` capped at ``steps`` local steps, with enough epochs for the smallest client to take them."""
    per_epoch = np.ceil(np.maximum(np.asarray(sizes, dtype=np.float64), 1) / solver.batch_size)
    return dataclasses.replace(solver, epochs=int(np.ceil(steps / per_epoch.min())), max_steps=steps)


@dataclass
class FedGrouProxParams(FedGroupParams):
    mu: float = ranged(0.01, ">= 0")  # proximal weight μ of each client's objective (FedProx); 0 is FedGroup


@ALGORITHMS.register("fedgroup", "FedGroup: K groups by K-means on decomposed update directions (EDC), newcomer "
                     "cold start, FedAvg per group (inter_lr: inter-group aggregation)", FedGroupParams, paper=PAPER)
class FedGroup(HardClusters):
    adaptation: DirectionGroups
    initial = Saved[Params](Weights())  # θ^0, where every cold start begins
    grouped = Saved[np.ndarray](Flags())
    directions = Saved[np.ndarray](Reals())  # [K, P] each group's cold-start direction

    def __init__(self, ctx: Context, params: FedGroupParams) -> None:
        if params.num_groups > ctx.fed.num_clients:
            raise ConfigError(f"algorithm.num_groups={params.num_groups} is more than the {ctx.fed.num_clients} "
                              "clients: FedGroup needs at least one client per group; give fewer groups")
        super().__init__(ctx, params, k0=1, adaptation=DirectionGroups(params.num_groups))
        self.initial = {n: v[0].clone() for n, v in self.models.items()}  # θ^0, where every cold start begins
        self.grouped = np.zeros(ctx.fed.num_clients, dtype=bool)
        self.directions = np.zeros((0, 0), dtype=np.float32)  # [K, P] each group's cold-start direction

    def pretrain(self, round_: int, clients: np.ndarray) -> torch.Tensor:
        """Δw_i [n, P] of ``pretrain_steps`` local steps from θ^0 (one trainer call, its own sampling stream)."""
        solver = steps_solver(self.ctx.solver, self.params.pretrain_steps, self.ctx.fed.train.sizes[clients])
        init = repeat(self.initial, len(clients))
        local = self.ctx.trainer.train(init, clients, solver, round_, stream=1)
        return flatten(local) - flatten(init)

    def cold_start_groups(self, round_: int) -> int:
        """Step 1; returns the number of clients pre-trained."""
        p, m = self.params, self.ctx.fed.num_clients
        rng = np.random.default_rng([self.ctx.cfg.seed, 32])
        chosen = np.sort(rng.choice(m, size=min(p.num_groups * p.pretrain_scale, m), replace=False))
        delta = self.pretrain(round_, chosen).double().cpu().numpy()
        labels = self.adaptation.groups(delta, self.ctx.cfg.seed)
        k = int(labels.max()) + 1
        if k < p.num_groups:
            note(f"FedGroup's cold start found {k} distinct groups among the {len(chosen)} pre-trained clients, not "
                 f"algorithm.num_groups={p.num_groups}; the run goes on with {k}")
        onehot = np.eye(k)[labels]
        mean = onehot.T / onehot.sum(0)[:, None]  # [k, n] plain average over members (the authors' code)
        self.directions = (mean @ delta).astype(np.float32)
        base = np.concatenate([v.reshape(-1).double().cpu().numpy() for v in self.initial.values()])
        self.regroup(self._unflatten(base[None, :] + mean @ delta), chosen, labels)
        self.grouped[chosen] = True
        return len(chosen)

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        one = self.model_bytes()
        pretrained = self.cold_start_groups(round_) if len(self.directions) == 0 else 0
        new = clients[~self.grouped[clients]]
        if len(new):  # step 2, the newcomers' cold start
            delta = self.pretrain(round_, new).double().cpu().numpy()
            self.cluster[new] = self.adaptation.newcomers(delta, self.directions)
            self.grouped[new] = True
            pretrained += len(new)
        pos = self.cluster[clients]
        local, _ = self.train(round_, clients, pos)
        self.fedavg(clients, local, pos)
        if self.params.inter_lr > 0 and self.num_clusters > 1:
            theta = flatten(self.models).double().cpu().numpy()
            self.models = self._unflatten(inter_group_update(theta, self.params.inter_lr))
        up = (len(clients) + pretrained) * one
        return RoundResult(bytes_up=up, bytes_down=(len(clients) + pretrained) * one)

    def _unflatten(self, flat: np.ndarray) -> dict[str, torch.Tensor]:
        """A model stack [k, ...] on the run's device from flattened rows [k, P] (in the models' dtype)."""
        out, at, k = {}, 0, len(flat)
        for name, v in self.initial.items():
            size = v.numel()
            out[name] = torch.as_tensor(flat[:, at:at + size], dtype=v.dtype, device=v.device).reshape(k, *v.shape)
            at += size
        return out

    def train(self, round_: int, clients: np.ndarray, positions: np.ndarray, solver: Solver | None = None,
              anchor: Params | None = None) -> tuple[Params, torch.Tensor]:
        """The groups' training; FedGrouProx (Sec. V, registered as ``fedgrouprox``) adds FedProx's proximal term
        (μ/2)‖θ − θ_g‖² toward each client's group model, its starting point (μ = 0: FedGroup)."""
        mu = getattr(self.params, "mu", 0.0)
        if mu:
            solver = dataclasses.replace(solver or self.ctx.solver, prox_mu=mu)
        return super().train(round_, clients, positions, solver, anchor)

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """The groups' directions: none before the cold start, else one finite row of the model's size per
        group."""
        if (problem := super().state_problem(state, rounds)) is not None:
            return problem
        directions, k = state["directions"], num_models(state)
        size = sum(v.numel() for v in self.initial.values())
        if directions.shape != (0, 0) and tuple(directions.shape) != (k, size):
            return (f"algorithm.directions has shape {list(directions.shape)}; this run needs [{k}, {size}] "
                    "(one direction per group over the model's parameters)")
        if not np.isfinite(directions).all():
            return "algorithm.directions holds non-finite values"
        return None


ALGORITHMS.register("fedgrouprox", "FedGrouProx: FedGroup whose clients train with FedProx's proximal term "
                    "(μ/2)‖θ − θ_g‖² toward their group's model", FedGrouProxParams, paper=PAPER)(FedGroup)

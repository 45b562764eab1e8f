"""The soft/EM family of cluster methods (IFCA, FedEM, FedRC, HCFL, …) over the shared base
:class:`~fedcluster.algorithms.cluster_method.ClusterMethod` (the round, K changes, bytes on the wire, the per-round
cluster makeup and the saved state): batched E-step forward passes, the K model–client pairs trained as units of one
trainer call and (split-aware) aggregation.

The round is written once, :meth:`ClusteredAlgorithm.step`, in HCFL paper Alg. 1's order: the cohort; tiers 1–2 decide
a :class:`~fedcluster.algorithms.round_plan.RoundPlan` (:meth:`~ClusteredAlgorithm.plan`: soft γ and A, or each
client's hard position); local training, folded into the one aggregation when A is known before training; the
cohort's Ω, γ and tier-1 statistics; tiers 3–4 (:meth:`~ClusteredAlgorithm.adapt`); the bytes from the plan. A method
decides its plan (by default its tier-2 part does: :meth:`~ClusteredAlgorithm.soft_plan`,
:meth:`~ClusteredAlgorithm.hard_plan`) and overrides only the phases it changes (:meth:`~ClusteredAlgorithm.
after_training`, :meth:`~ClusteredAlgorithm.adapt`).

Two model layouts (``algorithm.split``):

* full models — K independent models; a soft method trains every (client, k) pair as one unit, a hard one trains one
unit per client, starting from its cluster's model;
* shared feature extractor φ + K heads (HCFL+ HCFL paper Sec. 4.1, FedRC Table 11) — ``self.models`` still holds K
  stacked SplitModels whose ``body.*`` entries are identical. A soft method trains one unit per client
  with the body and all K heads (engine.training.multihead, HCFL paper eq. 6–7); a hard one trains body + its head.
  The server averages φ over every client that trained and head k over the clients that trained it.

Aggregation (FedRC paper Alg. 1 step 4 / step 5): θ_k ← θ_k + η_g Σ_i A_{ik} (θ_{i,k} − θ_k) / Σ_i A_{ik}
with A_{ik} = N_i for the pairs a client trained (N_i u_{i;k} for FedSoft); a cluster nobody trained is
left unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.cluster_method import ClusterMethod
from fedcluster.algorithms.parts import required
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation.prediction import tier_weights, untrained_omega
from fedcluster.engine.evaluation.scores import client_outputs
from fedcluster.engine.params import Params, distances
from fedcluster.engine.protocol import Trainer
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.fold import train_into
from fedcluster.engine.training.multihead import MultiHead, MultiHeadLoss, pack, unpack
from fedcluster.engine.transfer import to_device
from fedcluster.errors import UserError
from fedcluster.tiers.adaptation import Adaptation
from fedcluster.tiers.aggregation import ClusterSums, cluster_update
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import FormulationPart, ServerStatistics
from fedcluster.tiers.saved_fields import StateField
from fedcluster.tiers.saved_kinds import Flags, InputStatistics, Rows, non_negative
from fedcluster.tiers.weighting import HardWeighting, SoftWeighting, Weighting, one_hot


@dataclass
class ClusteredParams(RangeChecked):
    num_clusters: int = ranged(3, ">= 1")  # K, the number of cluster models
    split: bool = False  # shared feature extractor + per-cluster heads (HCFL+, FedRC Table 11)


def keeps_statistics(alg: Any) -> bool:
    """Whether the method keeps the tier-1 server statistics (and so saves them)."""
    return alg.state.stats is not None


class ClusteredAlgorithm(ClusterMethod):
    """The soft/EM family of :class:`~fedcluster.algorithms.cluster_method.ClusterMethod`: K models, client
    weights Ω [M, K] and per-sample weights γ [N_train, K] (the last E-step's, or the one-hot of the client's cluster
    for hard rules), with the tier parts the method passes to the constructor, each required: ``formulation``
    (tier 1), ``weighting`` (tier 2; with the formulation it also decides how a client that never trained weights
    the clusters, :meth:`test_weights`) and ``adaptation`` (tiers 3–4; ``Fixed()`` for a fixed K).
    ``sample_scope``: HCFL+'s sample-wise prior ω_{i,j;k} is kept; the tier-1 server statistics are kept when the
    formulation uses them or the scope is the sample's. The round is :meth:`step` with the method's :meth:`plan`
    (CLoVE, whose round clusters embeddings with FINCH, keeps a ``step`` of its own)."""

    fixed_clusters = True

    gamma = StateField[np.ndarray](Rows(cluster_axis=1))  # [N, K] the latest per-sample responsibilities
    # [M] Ω row set by a round (or known: oracle); a checkpoint from before it was saved: every row
    estimated = StateField[np.ndarray](Flags(), default=lambda alg: np.ones(len(alg.omega), dtype=bool))
    # the tier-1 statistics and HCFL+'s sample-wise prior ω_{i,j;k}, saved when kept (keep_statistics)
    sample_prior = StateField[np.ndarray | None](Rows(cluster_axis=1), kept=keeps_statistics)
    counts = StateField[np.ndarray](non_negative(cluster_axis=1), path="stats.counts", kept=keeps_statistics)
    marginal = StateField[np.ndarray](Rows(cluster_axis=0), path="stats.marginal", kept=keeps_statistics)
    client_stats = StateField[dict](InputStatistics(per_client=True), path="stats.client_stats",
                                    kept=keeps_statistics)
    density = StateField[Any](InputStatistics(), path="stats.density", kept=keeps_statistics)

    def __init__(self, ctx: Context, params: ClusteredParams, *, formulation: FormulationPart, weighting: Weighting,
                 adaptation: Adaptation, sample_scope: bool = False) -> None:
        fed, k = ctx.fed, params.num_clusters
        models = ctx.fresh_models(k)
        if params.split:  # one shared body: cluster 0's initial body
            for name, v in models.items():
                if name.startswith("body."):
                    v[1:] = v[0]
        super().__init__(ctx, params, models=models, adaptation=adaptation, split=params.split)
        self.formulation: FormulationPart = required(formulation, FormulationPart, "formulation (tier 1)")
        if self.formulation.label_table and fed.task != "classification":
            raise UserError(f"algorithm={ctx.cfg.algorithm}: formulation={self.formulation.name} divides by each "
                            f"cluster's label counts (FedRC paper eq. 2), which a {fed.task} task has none of; "
                            "choose algorithm.formulation=conditional where the method has it, or another algorithm")
        self.weighting: Weighting = required(weighting, Weighting, "weighting (tier 2)")
        self.omega = np.full((fed.num_clients, k), 1.0 / k)
        self.gamma = np.full((len(fed.train.y), k), 1.0 / k, dtype=np.float32)
        self._multi: Trainer | None = None
        self.estimated = np.zeros(fed.num_clients, dtype=bool)  # Ω row set by a round (or known: oracle)
        self._scoring: tuple[tuple[int, int], np.ndarray] | None = None
        self._labels: np.ndarray | None = None  # the training labels on the host, copied once (not every round)
        self.keep_statistics(sample_scope)

    def keep_statistics(self, sample_scope: bool) -> None:
        """Keep the tier-1 server statistics (and, for HCFL+'s sample scope, the sample-wise prior ω_{i,j;k}) when
        the formulation uses them or the scope is the sample's; nothing otherwise."""
        if not (self.formulation.uses_statistics or sample_scope):
            return
        fed, k = self.ctx.fed, self.num_clusters
        self.state.stats = ServerStatistics.start(fed.num_clients, k, fed.num_classes)
        self.sample_prior = np.full((len(fed.train.y), k), 1.0 / k, dtype=np.float32) if sample_scope else None

    def reads_every_input(self) -> str | None:
        if self.formulation.reads_inputs:
            return f"formulation={self.formulation.name} (the server fits a Gaussian density to the cohort's inputs)"
        return None

    def after_step(self, clients: np.ndarray) -> None:
        self.estimated[clients] = True

    # -- data --------------------------------------------------------------------------------
    def rows(self, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Training rows of ``clients`` (back to back) and each row's cohort index 0..m−1."""
        ptr, sizes = self.ctx.fed.train.ptr, self.ctx.fed.train.sizes[clients]
        rows = np.concatenate([np.arange(ptr[c], ptr[c + 1]) for c in clients]) if len(clients) else np.zeros(0, int)
        return rows, np.repeat(np.arange(len(clients)), sizes)

    def sizes(self, clients: np.ndarray) -> np.ndarray:
        return self.ctx.fed.train.sizes[clients].astype(np.float64)

    def labels(self) -> np.ndarray:
        """The training labels on the host (the clients' own labels: the E-step and the counts use them)."""
        if self._labels is None:
            self._labels = self.ctx.fed.train.y.cpu().numpy()
        return self._labels

    def cohort(self, clients: np.ndarray) -> Cohort:
        """The tier parts' view of ``clients``: their rows, sizes, labels (and inputs, if tier 1 reads them)."""
        rows, owner = self.rows(clients)
        x = self.ctx.fed.train.take(rows) if self.formulation.reads_inputs else None
        return Cohort(clients, rows, owner, self.sizes(clients), self.labels()[rows], x)

    def cohort_loglik(self, cohort: Cohort) -> np.ndarray:
        """[n, K] tier-1 log-likelihoods of the cohort's rows under the current models (one batched pass)."""
        return self.formulation.loglik(self.losses(cohort.rows), cohort.x, cohort.labels, self.state.stats)

    def loglik_of(self, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tier-1 log-likelihoods [n, K] of ``clients``' rows and each row's cohort index (for hard rules)."""
        cohort = self.cohort(clients)
        return self.cohort_loglik(cohort), cohort.owner

    def model_distances(self, local: Params) -> np.ndarray:
        """[m, K] ‖θ_i − θ_k‖ between the clients' models and the cluster models (the heads when φ is shared)."""
        names = [n for n in self.models if n.startswith("head." if self.split else "")]
        return distances({n: local[n] for n in names}, {n: self.models[n] for n in names}).cpu().numpy()

    # -- forward passes ----------------------------------------------------------------------
    def losses(self, rows: np.ndarray) -> np.ndarray:
        """[N, K] per-sample losses of the K models on training ``rows`` (the clients' E-step work, done by
        the trainer: in process one batched pass over the cohort, on Flower by each node)."""
        return self.ctx.trainer.losses(self.models, rows, self.split)

    # -- local training ----------------------------------------------------------------------
    def train_pairs(self, clients: np.ndarray, gamma: np.ndarray, round_: int, solver: Solver | None = None,
                    stream: int = 0) -> Params:
        """Every (client, k) pair trained with weights γ[:, k] in one trainer call → [m, K, ...]."""
        solver = solver or self.ctx.solver
        rows_of = np.split(gamma, np.cumsum(self.ctx.fed.train.sizes[clients])[:-1])
        m, k = len(clients), self.num_clusters
        if self.split:
            if self._multi is None:
                self._multi = self.ctx.trainer.sibling(MultiHead(self.ctx.module, k), MultiHeadLoss(self.ctx.fed.task))
            packed = {n: v.unsqueeze(0) for n, v in pack(self.models).items()}  # one start shared by the m units
            trained = self._multi.train(packed, clients, solver, round_,
                                        weights=[g.astype(np.float32) for g in rows_of], stream=stream,
                                        init_index=np.zeros(m, dtype=np.int64))
            bodies, heads = unpack(trained, k)
            return {**{n: v.unsqueeze(1).expand(m, k, *v.shape[1:]) for n, v in bodies.items()}, **heads}
        weights = [g[:, j].astype(np.float32) for g in rows_of for j in range(k)]
        # unit i·K + k starts from model k: the K models are shared, not copied m times
        trained = self.ctx.trainer.train(self.models, np.repeat(clients, k), solver, round_, weights=weights,
                                         stream=stream, init_index=np.tile(np.arange(k), m))
        return {n: v.view(m, k, *v.shape[1:]) for n, v in trained.items()}

    def train_single(self, clients: np.ndarray, cluster: np.ndarray, round_: int, solver: Solver | None = None,
                     init: Params | None = None, anchor: Params | None = None) -> Params:
        """One unit per client, from its cluster's model (or ``init``) → [m, ...]."""
        if init is None:  # the K models, shared by their clients' units
            return self.ctx.trainer.train(self.models, clients, solver or self.ctx.solver, round_, anchor=anchor,
                                          init_index=np.asarray(cluster, dtype=np.int64))
        return self.ctx.trainer.train(init, clients, solver or self.ctx.solver, round_, anchor=anchor)

    # -- local training folded into the aggregation (weights known before training) -----------------
    def train_aggregate_single(self, clients: np.ndarray, cluster: np.ndarray, weights: np.ndarray, round_: int,
                               solver: Solver | None = None) -> None:
        """:meth:`train_single` from the clients' clusters, then :meth:`aggregate` with weights A [m, K]; without a
        shared body each chunk of trained clients is folded into the K sums as it finishes (engine.trainers.fold)."""
        if self.split:
            self.aggregate(self.train_single(clients, cluster, round_, solver), weights)
            return
        sums = ClusterSums(self.models, to_device(weights, self.ctx.device, torch.float64), pairs=False)
        train_into(self.ctx.trainer, sums, self.models, clients, solver or self.ctx.solver, round_,
                   init_index=np.asarray(cluster, dtype=np.int64))
        self.models = sums.update(self.models, self.ctx.cfg.global_lr)

    def train_aggregate_pairs(self, clients: np.ndarray, gamma: np.ndarray, weights: np.ndarray, round_: int,
                              solver: Solver | None = None) -> None:
        """:meth:`train_pairs` with weights γ, then :meth:`aggregate` with weights A [m, K]; without a shared body
        each chunk of trained pairs is folded into the K sums as it finishes (engine.trainers.fold)."""
        if self.split:
            self.aggregate(self.train_pairs(clients, gamma, round_, solver), weights)
            return
        rows_of = np.split(gamma, np.cumsum(self.ctx.fed.train.sizes[clients])[:-1])
        m, k = len(clients), self.num_clusters
        sums = ClusterSums(self.models, to_device(weights, self.ctx.device, torch.float64), pairs=True)
        train_into(self.ctx.trainer, sums, self.models, np.repeat(clients, k), solver or self.ctx.solver, round_,
                   weights=[g[:, j].astype(np.float32) for g in rows_of for j in range(k)],
                   init_index=np.tile(np.arange(k), m))
        self.models = sums.update(self.models, self.ctx.cfg.global_lr)

    # -- the round: one template, a plan per method -------------------------------------------------
    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        """One round of HCFL paper Alg. 1 (FedRC paper Alg. 1 for the soft EM methods), in its order. The method
        decides the plan (tiers 1–2, :meth:`plan`) and may add to the phases after training (:meth:`after_training`)
        and after the aggregation (:meth:`adapt`); the bytes follow from the plan (:meth:`RoundPlan.bytes`)."""
        cohort = self.cohort(clients)  # the sampled clients, their rows and sizes
        received = self.models  # θ^t, the models the cohort receives
        plan = self.plan(round_, cohort)  # tiers 1–2: γ and A (soft) or each client's position (hard)
        if plan.folds:  # A known before training: each trained chunk folded into the K sums (one aggregation)
            self.train_aggregate(round_, plan)
            local = None
        else:
            local = self.train(round_, plan)  # local training, the cohort's trained models kept
            self.after_training(round_, plan, local)  # a hard rule joins its cluster (FeSEM), personal models
            self.aggregate(local, plan.weights)  # the one aggregation (FedRC paper Alg. 1 step 4)
        self.record(plan)  # Ω, γ and the tier-1 statistics the clients upload (C_{y,k}, ν_k)
        self.adapt(round_, plan, local, received)  # tiers 3–4: K changes from θ^t (HCFL), IFCA's zero_fill
        return RoundResult(*plan.bytes(self.nbytes), extra=plan.extra)

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Tiers 1–2 before training, by the weighting part: a soft part's E-step (:meth:`soft_plan`) or a hard
        part's start positions (:meth:`hard_plan`)."""
        if isinstance(self.weighting, SoftWeighting):
            return self.soft_plan(cohort)
        return self.hard_plan(cohort)

    def soft_plan(self, cohort: Cohort, objective: bool = True) -> RoundPlan:
        """FedRC paper Alg. 1 step 3: tier-1 log-likelihoods with the received models and the tier-2 E-step (eq. 3;
        HCFL paper eq. 4–5 with the sample scope); every pair trains with γ and is averaged with the part's A
        (step 4). K models each way and the label table (fedrc-ratio); ``objective``: the cohort's objective
        (FedRC paper eq. 1 / HCFL paper eq. 1) at the E-step, mean_j log Σ_k ω_{i;k} L_k(x_j, y_j)."""
        assert isinstance(self.weighting, SoftWeighting)
        ll = self.cohort_loglik(cohort)
        est = self.weighting.estimate(ll, cohort, self.state)
        k = self.num_clusters
        extra = {"objective": float(np.mean(_logsumexp(np.log(np.maximum(est.omega[cohort.owner], 1e-30)) + ll)))
                 if len(ll) else 0.0} if objective else {}
        return RoundPlan.soft(cohort, est.gamma, est.omega, self.weighting.aggregation(est, cohort.sizes),
                              sent=k, uploaded=k, table=self.table_bytes(), extra=extra)

    def hard_plan(self, cohort: Cohort) -> RoundPlan:
        """A hard part's start positions (IFCA: the lowest loss; FeSEM: a new client's lowest loss, the others'
        current cluster); K models to the clients the part says (:meth:`HardWeighting.receivers`), one to the
        others, one up. The clients join after training (:meth:`after_training`)."""
        assert isinstance(self.weighting, HardWeighting)
        clients = cohort.clients
        new = self.assigned[clients] < 0 if self.assigned is not None else np.ones(cohort.m, dtype=bool)
        start = self.weighting.start(self.loglik_of, clients, self.state)
        return RoundPlan.hard(cohort, start, self.num_clusters,
                              sent=np.where(self.weighting.receivers(new), self.num_clusters, 1))

    def table_bytes(self) -> int:
        """Bytes of the K × C label table each client receives (C_{y,k}) and uploads (F_i) (fedrc-ratio)."""
        return 4 * self.num_clusters * max(self.ctx.fed.num_classes, 1) if self.formulation.label_table else 0

    def train(self, round_: int, plan: RoundPlan) -> Params:
        """Local training of the plan: every (client, k) pair with γ (soft) → [m, K, ...], or one unit per client
        from its position (hard) → [m, ...]."""
        c = plan.cohort
        if plan.positions is None:
            assert plan.gamma is not None
            return self.train_pairs(c.clients, plan.gamma, round_, plan.solver)
        return self.train_single(c.clients, plan.positions, round_, plan.solver, init=plan.init, anchor=plan.anchor)

    def train_aggregate(self, round_: int, plan: RoundPlan) -> None:
        """:meth:`train` folded into the aggregation with the plan's A (:meth:`train_aggregate_pairs` /
        :meth:`train_aggregate_single`)."""
        c = plan.cohort
        assert plan.weights is not None
        if plan.positions is None:
            assert plan.gamma is not None
            self.train_aggregate_pairs(c.clients, plan.gamma, plan.weights, round_, plan.solver)
        else:
            self.train_aggregate_single(c.clients, plan.positions, plan.weights, round_, plan.solver)

    def after_training(self, round_: int, plan: RoundPlan, local: Params) -> None:
        """Hook after training, before the aggregation: a hard part that has not joined yet joins by the trained
        models (FeSEM: argmin_k ‖θ_k − θ_i‖, HCFL paper footnote 6)."""
        if plan.weights is None:
            assert isinstance(self.weighting, HardWeighting) and plan.positions is not None
            plan.join(self.weighting.assign(plan.positions, lambda: self.model_distances(local), plan.cohort.clients,
                                            self.state))

    def record(self, plan: RoundPlan) -> None:
        """The cohort's γ and Ω from the plan, and the tier-1 statistics its clients upload (when kept)."""
        c = plan.cohort
        assert plan.gamma is not None and plan.omega is not None
        self.gamma[c.rows] = plan.gamma
        self.omega[c.clients] = plan.omega
        if self.state.stats is not None:
            self.formulation.update(self.state.stats, c, plan.gamma, self.rounds_done)

    def adapt(self, round_: int, plan: RoundPlan, local: Params | None, received: Params) -> None:
        """Hook after the aggregation: tiers 3–4 (K changes decided from θ^t = ``received`` and the cohort's
        ``local`` models, HCFL paper Alg. 2 lines 11–31); nothing for a fixed K."""

    # -- aggregation -------------------------------------------------------------------------
    def aggregate(self, local: Params, weights: np.ndarray) -> None:
        """Server update of every cluster from ``local`` [m, K, ...] (or [m, ...]: one model per client,
        offered to every cluster) with aggregation weights A [m, K]; φ is shared when split."""
        a = to_device(weights, self.ctx.device, torch.float64)
        k = self.num_clusters
        # a client's single model is offered to every cluster as a [m, K, ...] view (fixes the order of the sums)
        offered = {n: v if v.dim() > self.models[n].dim() else v.unsqueeze(1).expand(v.shape[0], k, *v.shape[1:])
                   for n, v in local.items()}
        self.models = cluster_update(self.models, offered, a, self.ctx.cfg.global_lr, shared_body=self.split)

    def cluster_sizes_weights(self, clients: np.ndarray, assign: np.ndarray) -> np.ndarray:
        """A [m, K] = N_i at each client's cluster (hard methods)."""
        return one_hot(assign, self.num_clusters) * self.sizes(clients)[:, None]

    # -- evaluation --------------------------------------------------------------------------
    def scoring_omega(self) -> np.ndarray:
        """Ω for evaluation. A client never sampled still has the uniform start row (an ensemble for a hard
        method, cluster 0 for ARI); as FedRC paper App. H.2 does for any client that did not train, it runs the
        method's test rule (E-steps for soft methods, the lowest-loss cluster for hard ones) on its labelled
        training data with the current models. Ω itself (the training state) is left unchanged."""
        missing = ~self.estimated
        if not missing.any():
            return self.omega
        key = (self.rounds_done, id(self.models))
        if self._scoring is None or self._scoring[0] != key:
            self._scoring = (key, untrained_omega(self.omega, missing, self.test_weights, self.outputs,
                                                  self.ctx.trainer.per_client, self.ctx.fed.train))
        return self._scoring[1]

    def assignment(self) -> np.ndarray:
        return self.scoring_omega().argmax(1)

    def test_weights(self, outputs: torch.Tensor, split: Split) -> np.ndarray:
        """Non-participating clients: the method's tier-2 rule on their labelled data with the models fixed (soft
        EM: E-steps, as FedRC paper App. H.2 does for FedRC/FedEM; hard rules: the cluster with the lowest mean loss,
        FedRC paper H.8)."""
        return tier_weights(outputs, split, self.ctx.fed.task, self.formulation, self.state.stats, self.weighting,
                            self.num_clusters)

    def own_outputs(self, local: Params, split: Split, clients: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
        """[K', N, out] outputs of each client's own models ``local`` [m, K', ...] on its rows of ``split``
        (personalised / fine-tuned predictions), and those rows."""
        return client_outputs(self.ctx.module, local, split, clients)

    # -- records and state -------------------------------------------------------------------
    def set_hard(self, clients: np.ndarray, assign: np.ndarray) -> None:
        """Record a hard assignment in Ω and γ."""
        rows, owner = self.rows(clients)
        self.omega[clients] = one_hot(assign, self.num_clusters)
        self.gamma[rows] = self.omega[clients][owner]

    def after_load(self) -> None:
        self._scoring = None

    def data_changed(self, clients: np.ndarray) -> None:
        """The host copy of the training labels and the scoring Ω of untrained clients are made again."""
        self._labels = None
        self._scoring = None


def replace_solver(solver: Solver, **changes: Any) -> Solver:
    return dataclasses.replace(solver, **changes)


def _logsumexp(a: np.ndarray) -> np.ndarray:
    mx = a.max(1)
    return mx + np.log(np.exp(a - mx[:, None]).sum(1))

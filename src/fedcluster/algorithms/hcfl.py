"""HCFL (HCFL paper Sec. 3, Algorithm 1): any tier-1/2 choice composed with any tier-3/4 choice, from the config.

``algorithm=hcfl`` with

* tier 1 ``formulation`` — ``conditional`` | ``fedrc-ratio`` | ``joint`` (:mod:`fedcluster.tiers.formulation`);
* tier 2 ``weights`` — ``soft-em`` (FedEM/FedRC E-step; ``weights_scope=sample`` is HCFL+'s eq. 4–5 with μ̃),
  ``hard-loss`` (IFCA), ``hard-distance`` (FeSEM), ``fedsoft`` (FedSoft's shares); ``prox`` adds FedSoft's
  proximal local term (:mod:`fedcluster.tiers.weighting`). Sample scope is soft-em's: other rules use client scope;
* tier 3 ``adaptive`` — ``fixed``; ``cfl`` (Sattler's tol1/tol2 test, every cluster); ``split`` (HCFL paper eq. 8 with
  ρ); ``split-remove`` (eq. 8 + removal of clusters nobody weights highest, HCFL paper Alg. 2); ``low-mass`` (adaptive
  FedRC, FedRC paper App. H.4 Alg. 3: remove k when (1/N) Σ_{i,j} γ_{i,j;k} < δ) (:mod:`fedcluster.tiers.adaptation`);
* tier 4 ``distance`` — ``prototype-ascp`` | ``prototype-cscp`` (HCFL paper eq. 9–12, ``reduce``, ``confidence``),
  ``update-cosine`` (CFL; HCFL paper Table 2 ablation ①), ``parameter-l2`` (:mod:`fedcluster.tiers.distance`);

and ``split`` (shared feature extractor φ + K heads, HCFL paper Sec. 4.1). ``num_clusters`` is K^0 (E.1-13: default 1).
Each name is looked up once, when the method is built, in the parts' tables (``FORMULATION_PARTS``,
``WEIGHTINGS``, ``ADAPTATIONS``, ``DISTANCE_PARTS``): adding an option is adding a part there.
The named methods ``hcfl-plus``, ``hcfl-prime`` and ``fedrc-adaptive`` are presets (``hcfl_presets``).

One round t (HCFL paper Alg. 2 / Alg. 3; Alg. 1 steps 1–7):

1. E-step of the cohort with the received θ^t (tier 1 log-likelihoods, tier 2 weights; Alg. 3 line 1);
2. local training (Alg. 3 lines 2–4: one unit per client with φ and all K heads when split, eq. 6–7);
3. tier 3/4 decisions from θ^t, the local models and the new ω̃ (Alg. 2 lines 11–22): C_k = {i : argmax ω̃_i = k};
   R^t = clusters without such clients, over every client (lines 13–19, ``split-remove``); D_k over the sampled
   members of k (line 20, E.1-7), prototypes P_i computed with φ^t (Alg. 2 line 4); k* = argmax_k max D_k and the
   eq. 8 test (lines 21–22, E.1-6), bi-partition by complete linkage on D_{k*} (E.1-9);
4. aggregation (lines 8–9, N_i-weighted, E.1-8) and the soft label counts F_i^{latest} (lines 7, 10);
5. split: θ_{k*}, θ_{K^t+1} from the two parts (line 23, Alg. 4), weights by SCWU (``scwu``) or hard
   re-assignment; removal of R^t (lines 29–31, Alg. 5); for ``low-mass`` FedRC paper Alg. 3.

Hard weights (``hard-loss``, ``hard-distance``) keep Ω one-hot: their splits move C_{k*,2} to the new cluster as
CFL does. Every change is logged in the :class:`~fedcluster.tiers.cluster_book.ClusterBook` (stable ids, the round,
the clients that moved) and written to ``clusters.jsonl`` (``ids``, ``events``); ``rounds.csv`` gets
``num_clusters`` (K^t) and ``splits``, ``merges`` (always 0), ``removals``, ``split_gap`` (max D_{k*} − mean D_{k*},
NaN when not tested) — plus ``mean_update_norm`` / ``max_update_norm`` for ``adaptive=cfl``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, replace_solver
from fedcluster.algorithms.fedem import FedEMParams
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation.features import BodyFeatures
from fedcluster.engine.params import Params, flatten
from fedcluster.errors import ConfigError
from fedcluster.tiers.adaptation import ADAPTATIONS, GapSplits
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.distance import DISTANCE_PARTS, Reduce, client_prototypes
from fedcluster.tiers.formulation import FORMULATION_PARTS
from fedcluster.tiers.weighting import WEIGHTINGS

WeightingName = Literal["soft-em", "hard-loss", "hard-distance", "fedsoft"]
Adaptive = Literal["fixed", "cfl", "split", "split-remove", "low-mass"]
Distance = Literal["prototype-ascp", "prototype-cscp", "update-cosine", "parameter-l2"]


@dataclass
class HCFLParams(FedEMParams):
    num_clusters: int = ranged(1, ">= 1")  # K^0
    split: bool = True  # φ shared by all clusters + K heads (HCFL paper Sec. 4.1)
    weights: WeightingName = "soft-em"  # tier 2
    weights_scope: Literal["client", "sample"] = "sample"  # soft-em only: HCFL+'s ω_{i,j;k} (eq. 4–5)
    prox: float = ranged(0.0, ">= 0")  # FedSoft's proximal weight λ towards the received models
    floor: float = ranged(1e-3, "[0, 1)")  # σ of weights=fedsoft
    adaptive: Adaptive = "split-remove"  # tier 3
    distance: Distance = "prototype-ascp"  # tier 4
    reduce: Reduce = "max"  # eq. 9 max over prototype rows, or the Table 2 ablation "mean"
    prototypes: Literal["features", "head-update"] = "features"  # eq. 11-12 rows, or the HCFL paper's public code's
    confidence: bool = True  # D^k_ij = d̃ ω̃_ik ω̃_jk (False: the Table 2 ablation without it)
    rho: float = ranged(0.1, ">= 0")  # eq. 8 threshold
    include_diagonal: bool = True  # mean(D_k) over the whole matrix (reference code) or off-diagonal only
    strict: bool = False  # ">" ρ (reference code) instead of eq. 8's "≥"
    scwu: bool = True  # soft-clustering weight update on split (HCFL paper Alg. 4); False: hard re-assignment
    tol1: float = ranged(0.4, ">= 0")  # adaptive=cfl: ‖mean Δθ‖ < tol1 ...
    tol2: float = ranged(1.6, ">= 0")  # ... and max ‖Δθ_i‖ > tol2
    min_size: int = ranged(3, ">= 2")  # adaptive=cfl: sampled members needed to split
    warmup: int = ranged(0, ">= 0")  # no split / removal before this (0-based) round
    max_clusters: int | None = ranged(None, ">= 1")  # never split beyond this many clusters
    delta: float = ranged(0.05, "[0, 1)")  # adaptive=low-mass: remove clusters with mass below δ (FedRC paper: 0.05)

    def __post_init__(self) -> None:
        if self.weights != "soft-em":
            self.weights_scope = "client"  # the sample-wise prior is the soft E-step's (eq. 4–5)
        super().__post_init__()


@ALGORITHMS.register("hcfl", "HCFL composition: formulation × weights (tiers 1–2) × adaptive × distance (tiers 3–4)",
                     HCFLParams, paper="HCFL paper")
class HCFL(ClusteredAlgorithm):
    fixed_clusters = False  # splits and removals change K

    def __init__(self, ctx: Context, params: HCFLParams) -> None:
        p = params
        super().__init__(ctx, params, formulation=FORMULATION_PARTS[p.formulation](ctx.fed.num_classes),  # tier 1
                         weighting=WEIGHTINGS[p.weights](p),  # tier 2
                         adaptation=ADAPTATIONS[p.adaptive](p, DISTANCE_PARTS[p.distance](p)),  # tiers 3–4
                         sample_scope=p.weights_scope == "sample")
        if isinstance(self.adaptation, GapSplits) and self.adaptation.distance.needs_labels \
                and ctx.fed.task != "classification":
            raise ConfigError("prototype distances need class labels; use algorithm.distance=update-cosine")
        self._features = BodyFeatures(ctx.module)

    # -- one round: the template's phases -------------------------------------------------------
    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """Step 1 (tier 2, Alg. 3 line 1): a soft rule's E-step with the received θ^t (FedRC eq. 3 / HCFL eq. 4–5;
        every pair trains, Alg. 3 lines 2–4) or a hard rule's start positions (one unit per client, joined after
        training). The trained models are kept for tiers 3–4 (``fold=False``); FedSoft's proximal term (``prox``).
        Bytes (HCFL paper A.2 "communicated"): the models, the C_{y,k} table (fedrc-ratio, soft rules) and ω̃ (K
        numbers up, when tier 3 uses it); the prototypes P_i are added once tier 4 has computed them (:meth:`adapt`)."""
        p = self.params
        solver = replace_solver(self.ctx.solver, prox_mu=p.prox) if p.prox > 0 else None
        plan = self.soft_plan(cohort, objective=False) if self.weighting.soft else self.hard_plan(cohort)
        extra_up = 4 * self.num_clusters if self.adaptation.sends_weights else 0
        return replace(plan, solver=solver, fold=False, extra_up=extra_up)

    def adapt(self, round_: int, plan: RoundPlan, local: Params | None, received: Params) -> None:
        """Steps 3 and 5 after the aggregation (step 4) and the label counts F_i^{latest} (Alg. 2 lines 7–10): the
        tier-3/4 decisions from θ^t = ``received``, the local models and the new ω̃ (Alg. 2 lines 11–22), then the
        split of k* (line 23, Alg. 4) and the removals (lines 29–31, Alg. 5; FedRC paper Alg. 3 for ``low-mass``)."""
        assert local is not None and plan.omega is not None and plan.weights is not None
        p, cohort, k0 = self.params, plan.cohort, plan.k
        start = plan.positions if plan.positions is not None else np.full(cohort.m, -1)
        extra = self.adaptation.columns()
        removal = self.adaptation.removals(self.omega, round_)  # Alg. 2 lines 13–19 (split-remove)
        view = RoundView(self, cohort, local, plan.omega.argmax(1), start, received)
        splits = self.adaptation.splits(round_, plan.omega, view, extra)  # tiers 3–4 (lines 20–22)
        plan.extra.update(extra)
        plan.extra_up += view.proto_bytes
        for j, first, second in splits:
            if p.max_clusters is None or self.num_clusters < p.max_clusters:
                self.state.split(j, first, second, local, plan.weights, cohort.clients, received,
                                 soft_update=p.scwu and self.weighting.soft, global_lr=self.ctx.cfg.global_lr,
                                 shared_body=self.split, owner=self._owner, round_=self._round)
        self.remove_clusters(removal)  # positions < K^t: unaffected by new ones
        self.remove_clusters(self.adaptation.low_mass(self.gamma, round_), rule="s4")
        if self.num_clusters != k0 and self._multi is not None:  # the K-head trainer is rebuilt for K^{t+1}
            self._multi.close()
            self._multi = None


@dataclass
class RoundView:
    """What the round's tier-4 part may ask (:class:`~fedcluster.tiers.distance.CohortView`): the clients' updates of
    their own cluster's model and their class prototypes, computed with θ^t before aggregation."""

    alg: HCFL
    cohort: Cohort
    local: Params  # [m, K, ...] (soft rules) or [m, ...] (hard rules)
    members: np.ndarray  # [m] each client's cluster, argmax ω̃
    start: np.ndarray  # [m] the position a hard rule trained from (−1: soft)
    received: Params | None = None  # θ^t, the models the cohort trained from (None: the method's current models)
    proto_bytes: int = field(default=0, init=False)  # bytes of one client's prototypes, once computed

    @property
    def models(self) -> Params:
        """θ^t."""
        return self.alg.models if self.received is None else self.received

    def own_models(self) -> tuple[Params, torch.Tensor]:
        """Each client's model of cluster members[i] (φ_i and head k, or the full model; a hard rule's single model),
        in the order of ``local``, and the position [m] each started from."""
        rows = torch.arange(len(self.members))
        own = torch.as_tensor(np.where(self.start >= 0, self.start, self.members), device=self.alg.ctx.device)
        return {n: (v if v.dim() == self.models[n].dim() else v[rows, torch.as_tensor(self.members)])
                for n, v in self.local.items()}, own

    def own_updates(self, names: Any = None) -> dict[str, torch.Tensor]:
        """{name: θ_{k,i} − θ_k^t} of each client's own model against the model it started from."""
        mine, own = self.own_models()
        return {n: mine[n] - self.models[n].index_select(0, own) for n in (list(mine) if names is None else names)}

    def updates(self) -> torch.Tensor:
        """[m, P] flattened θ_{k,i} − θ_k^t, paired by parameter name (the K-head trainer returns the heads in
        another order than the models hold them)."""
        return flatten(self.own_updates())

    def prototypes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """P_i [m, C+1, d] and their counts [m, C+1] (eq. 11–12) of the cohort's clients, each computed by the
        client on its own rows with φ^t — the body of each client's cluster when the extractor is not shared."""
        alg, fed, m = self.alg, self.alg.ctx.fed, len(self.members)
        rows, owner, members = self.cohort.rows, self.cohort.owner, self.members
        classes = fed.num_classes
        rows_of = classes + 1
        first = np.searchsorted(owner, np.arange(m))
        has = np.bincount(owner, minlength=m) > 0
        cohort = np.full(m, -1, dtype=np.int64)  # each cohort position's client (-1: no training rows)
        cohort[has] = np.searchsorted(fed.train.ptr, rows[first[has]], side="right") - 1
        shape: list[int] = []

        def client_protos(part: Split) -> np.ndarray:
            at = np.flatnonzero(has)
            lo, hi = part.ptr[cohort[at]], part.ptr[cohort[at] + 1]
            local = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)] or [np.zeros(0, np.int64)])
            pos = np.repeat(at, hi - lo)
            z = alg._features.cohort(self.models, part.x, local, members[pos], alg.split)
            protos, counts = client_prototypes(z, part.y[torch.as_tensor(local, device=part.y.device)], pos, m,
                                               classes)
            shape[:] = protos.shape
            return torch.cat([protos.flatten(1), counts], 1).cpu().numpy()[at]

        table = alg.ctx.trainer.per_client(fed.train, client_protos, cohort[has])
        both = torch.zeros((m, table.shape[1]), dtype=torch.float64, device=alg.ctx.device)
        both[torch.as_tensor(np.flatnonzero(has), device=both.device)] = torch.as_tensor(table, device=both.device)
        protos, counts = both[:, :-rows_of].reshape(shape), both[:, -rows_of:]
        self.proto_bytes = 4 * protos.shape[1] * protos.shape[2]
        return protos, counts

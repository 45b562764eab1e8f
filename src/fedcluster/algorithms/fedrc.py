"""FedRC (Guo, Tang, Lin; FedRC paper): RobustCluster — FedEM with Ĩ = exp(−ℓ) / C_{y,k}.

Composition: tier 1 ``fedrc-ratio`` (FedRC paper eq. 2, log Ĩ = −ℓ − log C_{y,k}), tier 2 ``soft-em``, fixed K. The
FedRC paper's Alg. 1 (= App. H.1 Alg. 2) lines 3–4: the E-step (eq. 3) runs *before* local training with the C_{y,k}
received from the server; each (client, k) pair trains with weights γ (eq. 5); the client uploads Δθ_{i,k}
and its soft label counts Σ_j 1{y_ij = y} γ_{i,j;k}; the server averages the models by N_i and recomputes
C_{y,k} = F_g[k, y] / Σ_y' F_g[k, y'] from every client's latest counts.
FedRC is FedEM's shape with other parts: the :class:`~fedcluster.tiers.formulation.LabelRatio` formulation (with its
label counts and the ``count_noise`` option), the soft EM E-step (or :class:`~fedcluster.tiers.weighting.AdamEM`),
and the round template (:meth:`~fedcluster.algorithms.clustered.ClusteredAlgorithm.step`) with the soft plan of that
E-step (:meth:`FedRC.plan`; the label table counted on the wire both ways); FedRC-FT adds its evaluation only.

Variants (paper readings where the authors' code differs / E.4):

* ``ft`` — FedRC-FT: for the local (validation) accuracy every client fine-tunes a copy of the K models
  for one local epoch with its γ weights and predicts with the fine-tuned models mixed by ω (the
  reference code's ``update_tuned_learners``). Global accuracy: FedRC paper H.5 evaluates a method without one
  global model by "averaging the local models to create a global model", so the test clients use
  θ_k^FT = Σ_i N_i θ_{i,k}^FT / Σ_i N_i (the fine-tuned models averaged as in FedRC paper Alg. 1 step 4) with their
  usual E-step; this is why FedRC paper Table 1 reports a global FedRC-FT accuracy different from FedRC's. The
  fine-tuning is evaluation only: training continues from the un-tuned models.
* ``hard=test`` — FedRC-TeHC (Table 15): train soft, predict with argmax_k ω_{i;k} only.
* ``hard=train`` — FedRC-TrHC: each client trains and predicts only with its highest-weight model; the
  E-step, ω and the label counts stay soft.
* ``count_noise`` — privacy variant (FedRC paper App. E, eq. 96, Table 10): each client adds c ~ N(0, ξ²) to
  every soft label count Σ_j 1{y_ij = y} γ_{i,j;k} it uploads; the server sums the noisy counts. With
  ``count_noise_ref`` > 0, client i's std is ξ · (N_i / C) / ref, i.e. ξ is given for a client holding ``ref``
  samples per class (the FedRC paper's "expected value … is 45"), so that a smaller federation gets the same
  relative noise. [reading] A noisy aggregated count below one sample counts as one sample (the paper does not
  say how a negative sum is handled); a client's noise is drawn from (seed, round, client), so a resumed run
  draws the same noise.
* ``adam`` — FedRC-Adam (App. H.3): γ^t = γ^{t−1} − α ν̂ / (sqrt(â) + ε) on g = γ^{t−1} − γ̂^t with the
  paper's β1 = 0.9, β2 = 0.99 and its constant bias correction (the reference code uses 0.5 /
  0.5), clipped at 0 and renormalised; ω = mean_j γ. Client scope only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Self, overload

import numpy as np
import torch

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm
from fedcluster.algorithms.fedem import FedEMParams
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.data.federation import Split
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.aggregation import weighted_mean
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.formulation import FORMULATION_PARTS, Formulation, LabelRatio
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Kind, Reals, non_negative
from fedcluster.tiers.weighting import AdamEM, AdamMoments, SoftEM, one_hot


@dataclass
class FedRCParams(FedEMParams):
    formulation: Formulation = "fedrc-ratio"
    mu_tilde: float = ranged(0.4, "[0, 1]")  # with weights_scope=sample: HCFL+(FedRC)'s μ̃ (HCFL paper E.2)
    ft: bool = False  # FedRC-FT: local accuracy after one local fine-tuning epoch
    hard: Literal["none", "test", "train"] = "none"  # TeHC (predict hard) / TrHC (train and predict hard)
    adam: bool = False  # FedRC-Adam update of γ
    adam_lr: float = ranged(1.0, "> 0")  # α
    beta1: float = ranged(0.9, "[0, 1)")  # FedRC-Adam β1
    beta2: float = ranged(0.99, "[0, 1)")  # FedRC-Adam β2
    eps: float = 1e-8  # FedRC-Adam ε
    count_noise: float = ranged(  # ξ: std of the Gaussian noise on every uploaded label count (FedRC paper Table 10)
        0.0, ">= 0")
    count_noise_ref: float = ranged(  # > 0: ξ is for a client of this many samples per class (FedRC paper: 45)
        0.0, ">= 0")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.count_noise > 0 and self.formulation != "fedrc-ratio":
            raise ValueError("count_noise perturbs the label counts of formulation=fedrc-ratio; use that formulation")
        if self.adam and self.weights_scope != "client":
            raise ValueError("adam=true updates the client-wise EM; use weights_scope=client")


class AdamMoment(Saved[np.ndarray | None]):
    """A saved method attribute for FedRC-Adam's moment ``moment`` (``m1``, ``m2``) that its weighting part holds;
    None (and nothing to restore) without ``adam=true``."""

    def __init__(self, moment: str, kind: Kind) -> None:
        super().__init__(kind)
        self.moment = moment

    @property
    def place(self) -> str:
        return f"weighting.moments.{self.moment}"

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Self: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> np.ndarray | None: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> Self | np.ndarray | None:
        if obj is None:
            return self
        weighting = getattr(obj, "weighting")  # noqa: B009
        return getattr(weighting.moments, self.moment) if isinstance(weighting, AdamEM) else None

    def __set__(self, obj: object, value: np.ndarray | None) -> None:
        weighting = getattr(obj, "weighting")  # noqa: B009
        if isinstance(weighting, AdamEM) and value is not None:
            setattr(weighting.moments, self.moment, value)


@ALGORITHMS.register("fedrc", "FedRC: robust clustering, EM with exp(-loss)/C_{y,k} (variants: ft, hard, adam)",
                     FedRCParams, paper="FedRC paper")
class FedRC(ClusteredAlgorithm):
    adam_m1 = AdamMoment("m1", Reals(cluster_axis=1))  # FedRC-Adam's moments (None without adam=true)
    adam_m2 = AdamMoment("m2", non_negative(cluster_axis=1))

    def __init__(self, ctx: Context, params: FedRCParams) -> None:
        p = params
        classes, shape = ctx.fed.num_classes, (len(ctx.fed.train.y), p.num_clusters)  # γ's shape
        formulation = (LabelRatio(classes, p.count_noise, p.count_noise_ref, ctx.cfg.seed)
                       if p.formulation == "fedrc-ratio" else FORMULATION_PARTS[p.formulation](classes))
        em = SoftEM(p.mu_tilde, p.test_em_iters)
        weighting = (AdamEM(em, AdamMoments(np.zeros(shape), np.zeros(shape)), p.adam_lr, p.beta1, p.beta2, p.eps)
                     if p.adam else em)
        super().__init__(ctx, params, formulation=formulation, weighting=weighting, adaptation=Fixed(),
                         sample_scope=p.weights_scope == "sample")
        self._tuned: tuple[tuple[int, int], Any] | None = None

    @classmethod
    def streams_aggregation(cls, params: FedRCParams) -> bool:
        return not (params.split or params.ft)  # FedRC-FT keeps every client's fine-tuned models for evaluation

    def plan(self, round_: int, cohort: Cohort) -> RoundPlan:
        """FedRC paper Alg. 1 step 3: the E-step with C_{y,k} (eq. 2–3), a soft plan (every pair trains with γ,
        eq. 5). FedRC-TrHC: the same soft E-step, γ, Ω and label counts, but a hard plan in which each client trains
        (and uploads) its highest-weight model only."""
        plan = self.soft_plan(cohort)
        if self.params.hard != "train":
            return plan
        assert plan.omega is not None
        best = plan.omega.argmax(1)
        return replace(plan, positions=best, weights=self.cluster_sizes_weights(cohort.clients, best), uploaded=1)

    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, np.ndarray]:
        """FedRC-FT predicts with fine-tuned models (participating clients: each its own fine-tuned K models;
        test clients: their average, FedRC paper H.5); TeHC / TrHC mix with one-hot weights (argmax_k ω_{i;k})."""
        if not self.params.ft:
            outputs, w = super().prediction(split, participating)
        elif participating:  # each client's fine-tuned ensemble on its own rows (= all rows, in order)
            outputs, _ = self.own_outputs(self.fine_tuned(), split, np.arange(self.ctx.fed.num_clients))
            w = self.scoring_omega()
        else:
            outputs = self.outputs(split.x, self.fine_tuned_average())
            w = np.asarray(self.fit_weights(outputs, split))  # E-step on the fine-tuned outputs
        return outputs, w if self.params.hard == "none" else one_hot(w.argmax(1), self.num_clusters)

    def fine_tuned(self) -> Any:
        """[M, K, ...] every client's K models after one local epoch from the current models with its γ
        (stream 1, so the batch order differs from the training rounds'); cached until the models change."""
        key = (self.rounds_done, id(self.models))
        if self._tuned is None or self._tuned[0] != key:
            clients = np.arange(self.ctx.fed.num_clients)
            rows, _ = self.rows(clients)
            self._tuned = (key, self.train_pairs(clients, self.gamma[rows], round_=self.rounds_done, stream=1))
        return self._tuned[1]

    def fine_tuned_average(self) -> Any:
        """FedRC paper H.5's global model of FedRC-FT: θ_k^FT = Σ_i N_i θ_{i,k}^FT / Σ_i N_i over all clients."""
        sizes = torch.as_tensor(self.sizes(np.arange(self.ctx.fed.num_clients)))
        return {n: weighted_mean(v, sizes).contiguous() for n, v in self.fine_tuned().items()}

"""StoCFL (Zeng et al. 2023, stochastic clustered FL/A.7): start with one cluster per client
and merge clusters whose representations point the same way; local training is pulled toward a global model.

Implements the original's merge-only clustering (not in the seeds; HCFL paper gives τ and λ, App. E.2) as
"StoCFL" steps 1–4, with the formulas of the HCFL authors' reference code ``STOCFLAggregator.mix`` (LINs-lab/FedRC
``aggregator.py``; its representation is the members' sum, the same cosine as the mean used here).

One round:

1. every sampled client trains its cluster's model θ_k with the proximal term (λ/2)‖θ − θ_g‖² toward the
   global model θ_g (the trainer's anchor; reference code: the optimiser's initial parameters are θ_g) → θ_i;
2. a client's representation is its first recorded update Δθ_i = θ_i − θ_k (reference code); a cluster's is the
   mean over its members that have one;
3. with A_ab = cos(r_a, r_b) computed once, scan a = 0, 1, … and merge every later b with A_ab > τ into a
   (:func:`~fedcluster.tiers.regrouping.stocfl_merges`; larger τ → fewer merges → more clusters, HCFL paper E.1-17);
4. cluster models (reference code): θ_c = Σ_{i∈c} N_i θ̂_i / Σ_{i∈c} N_i over ALL members of the merged cluster,
   θ̂_i = θ_i for sampled clients and the model of the cluster i was in for the others (applied with η_g
   from the member average of the old models); θ_g ← N_i-weighted mean of the sampled θ_i (A.0).

HCFL paper E.2: τ ∈ {0, 0.05, 0.1, 0.15}, λ = 0.5. The authors' own StoCFL code (dunzeng/StoCFL) also splits clients
off clusters (intra re-clustering); HCFL paper follows the merge-only reference code, as here.
Communication: down θ_k and θ_g, up θ_i. Extras: ``max_cosine`` (largest cos between cluster representations).

Behaviour (``tests/algorithms/test_cfl_baselines_behaviour.py``): representations are first updates, so the merges
settle once every client has been sampled. On 8 digits clients with two label maps the first updates have
cos 0.16–0.79 within a concept and −0.35–0.29 across (seeds 0–4): τ = 0.3 merges each concept into one
cluster by round 2 and iid clients into one; the HCFL paper's τ = 0.1 merges across concepts on 3 of 5 seeds, τ = 0.5
leaves 2–4 clusters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import Params, repeat
from fedcluster.tiers.aggregation import merged_update, server_update
from fedcluster.tiers.distance import cosine_similarity
from fedcluster.tiers.regrouping import StoCFLMerges
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Counts, Flags, Reals, Weights

PAPER = ("Dun Zeng, Xiangjing Hu, Shiyu Liu, Yue Yu, Qifan Wang, Zenglin Xu. Stochastic Clustered Federated Learning."
         " arXiv:2303.00897, 2023.")


@dataclass
class StoCFLParams(RangeChecked):
    tau: float = ranged(0.1, "[-1, 1]")  # merge threshold on the cosine similarity of cluster representations
    lam: float = ranged(0.5, ">= 0")  # λ: weight of the proximal pull toward the global model


@ALGORITHMS.register("stocfl", "StoCFL: one cluster per client, merge clusters with update cosine > τ; "
                     "prox λ toward a global model", StoCFLParams, paper=PAPER)
class StoCFL(HardClusters):
    adaptation: StoCFLMerges
    global_model = Saved[Params](Weights())
    rep_sum = Saved[torch.Tensor](Reals(cluster_axis=0))  # per cluster position: Σ of members' first updates
    rep_count = Saved[np.ndarray](Counts(cluster_axis=0))
    seen = Saved[np.ndarray](Flags())

    def __init__(self, ctx: Context, params: StoCFLParams) -> None:
        m = ctx.fed.num_clients
        super().__init__(ctx, params, k0=m, adaptation=StoCFLMerges(params.tau))
        self.cluster = np.arange(m, dtype=np.int64)
        self.sync()
        self.global_model = {n: v[0].clone() for n, v in self.models.items()}
        dim = sum(v[0].numel() for v in self.models.values())
        self.rep_sum = torch.zeros(m, dim, device=ctx.device)  # per cluster position: Σ of members' first updates
        self.rep_count = np.zeros(m, dtype=np.int64)
        self.seen = np.zeros(m, dtype=bool)

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        m = len(clients)
        pos = self.cluster[clients]
        solver = dataclasses.replace(self.ctx.solver, prox_mu=self.params.lam)
        local, delta = self.train(round_, clients, pos, solver, anchor=repeat(self.global_model, m))
        first = np.flatnonzero(~self.seen[clients])
        if len(first):
            self.rep_sum.index_add_(0, torch.as_tensor(pos[first], device=self.rep_sum.device),
                                    delta[torch.as_tensor(first)].float())
            np.add.at(self.rep_count, pos[first], 1)
            self.seen[clients[first]] = True
        valid = self.rep_count > 0
        count = torch.as_tensor(np.maximum(self.rep_count, 1), device=self.rep_sum.device)
        reps = (self.rep_sum / count[:, None]).cpu().numpy()
        groups = self.adaptation.merges(reps, valid)
        sim = cosine_similarity(reps[valid]) if valid.sum() > 1 else np.zeros((1, 1))
        max_cos = float(sim[~np.eye(len(sim), dtype=bool)].max()) if len(sim) > 1 else float("nan")
        target = np.arange(self.num_clusters)
        for keep, absorbed in groups:
            target[absorbed] = keep
        models = self._member_average(clients, local, pos, target)
        for keep, absorbed in groups:  # representations of merged clusters add up
            self.rep_sum[keep] += self.rep_sum[absorbed].sum(0)
            self.rep_count[keep] += self.rep_count[absorbed].sum()
        if groups:
            self.merge_clusters(groups, models)
        else:
            self.models = models
        sizes = torch.as_tensor(self.ctx.fed.train.sizes[clients], dtype=torch.float64)
        self.global_model = server_update(self.global_model, local, sizes, self.ctx.cfg.global_lr)
        one = self.model_bytes()
        return RoundResult(bytes_up=m * one, bytes_down=2 * m * one, extra={"max_cosine": max_cos})

    def _member_average(self, clients: np.ndarray, local: Params, pos: np.ndarray, target: np.ndarray) -> Params:
        """Step 4 for every position (absorbed positions get their keeper's model): old models weighted by
        their members' data not sampled, local models by N_i, over each merged cluster's members."""
        k = self.num_clusters
        sizes = self.ctx.fed.train.sizes.astype(np.float64)
        n_all = np.bincount(self.cluster, sizes, k)
        n_cohort = np.bincount(pos, sizes[clients], k)
        onto = np.eye(k)[target].T  # [new-or-kept position c, old position k] = 1 if k folds into c
        dev = self.ctx.device
        return merged_update(self.models, local, torch.as_tensor(onto * n_all[None, :], device=dev),
                             torch.as_tensor(onto * (n_all - n_cohort)[None, :], device=dev),
                             torch.as_tensor(np.eye(k)[target[pos]].T * sizes[clients][None, :], device=dev),
                             self.ctx.cfg.global_lr)

    def on_reindex(self, keep: np.ndarray) -> None:
        idx = torch.as_tensor(keep)
        self.rep_sum, self.rep_count = self.rep_sum[idx], self.rep_count[keep]

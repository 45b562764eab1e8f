"""FedDrift (Jothimurugesan, Hsieh, Wang, Joshi, Gibbons, AISTATS 2023, Algorithm 1): clustering that follows
concept drift by local drift detection, a new model for every drifted client, isolation, and hierarchical merging.

Time steps are rounds here (the drift scenarios change concepts at rounds, data.drift). Starting from one model,
each round with the sampled clients S^t:

1. every client scores the models in use on its data, L_i(w_k) = mean loss of w_k on D_i^t (``signal=loss``, the
   paper) or its error rate 1 − acc (``signal=accuracy``, the authors' code), one batched pass; the models in use
   are all but those of isolated clusters;
2. drift detection (Algorithm 1, "local drift detection"): a client whose best model's loss exceeds its loss of
   the round it was last scored by more than δ, min_k L_i(w_k) > L_i^{prev} + δ, has drifted; it leaves for a new
   cluster of its own, whose model starts as a copy of its best model (the authors' code: the new model is
   initialised from the client's previous best), and that cluster is isolated for ``isolation`` rounds (the
   authors' code: one time step): nobody else joins it and it is not merged. Every other client takes its best
   model, k_i = argmin_k L_i(w_k); L_i^{prev} becomes the best loss of this round (a drifted client's too);
3. merging (Algorithm 1, "hierarchical clustering"): for the clusters in use with sampled members, the cross
   losses L(w_a, D_b) (model a on cluster b's members' data, from the same pass) give the cluster distance
   D(a, b) = max(L(w_a, D_b) − L(w_a, D_a), L(w_b, D_a) − L(w_b, D_b), 0); complete-linkage agglomeration stops at
   δ' (the authors' code: δ' = δ unless given), and the clusters of each group merge into one whose model is the
   average of theirs weighted by their members' samples (the authors' ``merge``: by their data weights);
4. FedAvg inside every cluster: θ_k ← θ_k + η_g Σ_{i∈S^t∩k} N_i (θ_i − θ_k) / Σ N_i.

The paper states detection and distances with the loss; the authors' code (microsoft/FedDrift,
``SoftClusterState.cluster_hierarchical``) uses the accuracy, with δ = 0.10 on MNIST (their default δ for it) and
δ' = δ: the default here (``signal=accuracy``, δ = 0.1; the distance is then the code's max(acc_aa − acc_ab,
acc_bb − acc_ba, 0)). With ``signal=loss`` the same δ is in loss units: a drift to a label-swapped concept raises
the loss by ≈ 3 and is found, but clusters of one concept that each trained on one client for a round are often
more than 0.1 apart in loss and do not merge.
Clients not sampled keep their cluster and reference loss; a cluster the drift empties stays on offer (a recurring
concept finds its model again, step 2's argmin). Test clients take the cluster with the lowest loss on their
labelled data. Extras: ``drifts`` (clients that drifted this round); ``splits``/``merges`` count the new and merged
clusters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import Params
from fedcluster.tiers.adaptation import InRound
from fedcluster.tiers.cohort import segment_mean
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Counts, Reals

PAPER = ("Ellango Jothimurugesan, Kevin Hsieh, Jianyu Wang, Gauri Joshi, Phillip B. Gibbons. Federated Learning "
         "under Distributed Concept Drift. International Conference on Artificial Intelligence and Statistics "
         "(AISTATS), PMLR 206:5834–5853, 2023.")


@dataclass
class FedDriftParams(RangeChecked):
    signal: Literal["accuracy", "loss"] = "accuracy"  # what detection and distances read (the code's / the paper's)
    delta: float = ranged(0.1, "> 0")  # δ: a client has drifted when its best error (or loss) rose by more than δ
    delta_merge: float | None = ranged(None, ">= 0")  # δ': merge clusters closer than this (null = δ)
    isolation: int = ranged(1, ">= 1")  # rounds a new cluster is isolated (not joined, not merged)
    detect: bool = True  # local drift detection (false: clients only pick their best model, as IFCA does)


@ALGORITHMS.register("feddrift", "FedDrift: local drift detection (error, or loss, up by δ) opens an isolated cluster, "
                     "hierarchical merging of clusters within δ'", FedDriftParams, paper=PAPER)
class FedDrift(HardClusters):
    """Algorithm 1 of the FedDrift paper over the hard cluster state (module docstring)."""

    reference = Saved[np.ndarray](Reals(nan_ok=True))  # L_i^{prev} (NaN: not scored yet)
    isolated_until = Saved[np.ndarray](Counts())  # the client is isolated in rounds < this

    def __init__(self, ctx: Context, params: FedDriftParams) -> None:
        super().__init__(ctx, params, k0=1, adaptation=InRound("FedDrift Algorithm 1: drift → new cluster, "
                                                                 "merge within δ'"))
        m = ctx.fed.num_clients
        self.reference = np.full(m, np.nan)  # L_i^{prev}: the client's best loss when it was last scored
        self.isolated_until = np.zeros(m, dtype=np.int64)  # the client is isolated in rounds < this (0-based)

    @property
    def delta_merge(self) -> float:
        return self.params.delta if self.params.delta_merge is None else self.params.delta_merge

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        m = len(clients)
        sizes = self.ctx.fed.train.sizes
        rows = np.concatenate([np.arange(self.ctx.fed.train.ptr[c], self.ctx.fed.train.ptr[c + 1])
                               for c in clients]) if m else np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(m), sizes[clients])
        per_sample = self.scores(rows)  # [N, K] step 1, one batched pass
        loss = segment_mean(per_sample, owner, m)  # [m, K]
        isolated = self.isolated_until > round_
        in_use = np.ones(self.num_clusters, dtype=bool)
        in_use[self.cluster[isolated]] = False
        offered = np.flatnonzero(in_use)
        drifted: list[int] = []
        for u, i in enumerate(clients):  # step 2
            if not isolated[i] and len(offered):
                best = int(offered[np.argmin(loss[u, offered])])
                before = self.reference[i]
                self.cluster[i] = best
                if self.params.detect and not np.isnan(before) and loss[u, best] > before + self.params.delta:
                    drifted.append(int(i))
            self.reference[i] = loss[u, self.cluster[i]]
        for i in drifted:  # a new cluster from a copy of the client's best model, isolated
            self.split_cluster(int(self.cluster[i]), np.array([i]))
            self.isolated_until[i] = round_ + self.params.isolation
        merged = self.merge_step(clients, per_sample, owner, in_use, isolated)  # step 3
        pos = self.cluster[clients]
        local, _ = self.train(round_, clients, pos)
        self.fedavg(clients, local, pos)  # step 4
        one = self.model_bytes()
        return RoundResult(bytes_up=m * one, bytes_down=m * one * max(int(in_use.sum()), 1),
                           extra={"drifts": float(len(drifted)), "merged": float(merged)})

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """[N, K] per-sample score of every model on the training ``rows``, lower is better: the loss
        (``signal=loss``) or the error 1 − [argmax f(x) = y] (``signal=accuracy``), so that a client's mean is its
        loss or its error rate."""
        if self.params.signal == "loss":
            return self.ctx.trainer.losses(self.models, rows)
        outputs = self.outputs(self.ctx.fed.train.take(rows))  # [K, N, classes]
        labels = self.ctx.fed.train.y[torch.as_tensor(rows, device=self.ctx.fed.train.y.device)].to(outputs.device)
        return (outputs.argmax(-1) != labels).T.double().cpu().numpy()

    def merge_step(self, clients: np.ndarray, per_sample: np.ndarray, owner: np.ndarray, in_use: np.ndarray,
                   isolated: np.ndarray) -> int:
        """Step 3: complete-linkage merging at δ' of the clusters in use with sampled members (their distance D(a,
        b) from the cross losses of the round's pass); returns how many clusters were folded into others."""
        k_before = per_sample.shape[1]  # the positions the pass scored (new clusters are isolated: not among them)
        member = ~isolated[clients]
        pos = self.cluster[clients]
        cands = [k for k in range(k_before) if in_use[k] and np.any(member & (pos == k))]
        if len(cands) < 2:
            return 0
        row_member = member[owner]
        cross = np.empty((len(cands), len(cands)))  # cross[a, b] = L(w_a, D_b)
        for b, kb in enumerate(cands):
            rows_b = row_member & (pos[owner] == kb)
            cross[:, b] = per_sample[rows_b][:, cands].mean(0)
        own = np.diag(cross)
        dist = np.maximum(np.maximum(cross - own[:, None], (cross - own[:, None]).T), 0.0)
        np.fill_diagonal(dist, 0.0)
        labels = fcluster(linkage(squareform(dist, checks=False), method="complete"), t=self.delta_merge,
                          criterion="distance")
        groups = []
        for label in np.unique(labels):
            group = [cands[a] for a in np.flatnonzero(labels == label)]
            if len(group) > 1:
                groups.append((group[0], group[1:]))
        if not groups:
            return 0
        self.merge_clusters(groups, self.merged_models(groups))
        return sum(len(absorbed) for _, absorbed in groups)

    def merged_models(self, groups: list[tuple[int, list[int]]]) -> Params:
        """The stack with each group's kept position holding the average of the group's models, weighted by their
        members' training samples (a cluster without members counts as one sample)."""
        weight = np.maximum(np.bincount(self.cluster, self.ctx.fed.train.sizes.astype(np.float64),
                                        self.num_clusters), 1.0)
        models = {n: v.clone() for n, v in self.models.items()}
        for keep, absorbed in groups:
            idx = [keep, *absorbed]
            w = torch.as_tensor(weight[idx] / weight[idx].sum(), device=self.ctx.device)
            for n, v in models.items():
                part = self.models[n][idx].double()
                v[keep] = (w.view(-1, *[1] * (part.dim() - 1)) * part).sum(0).to(v.dtype)
        return models

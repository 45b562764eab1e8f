"""HCFL (HCFL paper Sec. 3, Algorithm 1): any tier-1/2 choice composed with any tier-3/4 choice, from the config.

``algorithm=hcfl`` with

* tier 1 ``formulation`` — ``conditional`` | ``fedrc-ratio`` | ``joint`` (:mod:`fedcluster.tiers.formulation`);
* tier 2 ``weights`` — ``soft-em`` (FedEM/FedRC E-step; ``weights_scope=sample`` is HCFL+'s eq. 4–5 with μ̃),
  ``hard-loss`` (IFCA), ``hard-distance`` (FeSEM), ``fedsoft`` (FedSoft's shares); ``prox`` adds FedSoft's
  proximal local term (:mod:`fedcluster.tiers.weights`). Sample scope is soft-em's: other rules use client scope;
* tier 3 ``adaptive`` — ``fixed``; ``cfl`` (Sattler's tol1/tol2 test, every cluster); ``split`` (HCFL paper eq. 8 with
  ρ); ``split-remove`` (eq. 8 + removal of clusters nobody weights highest, HCFL paper Alg. 2); ``low-mass`` (adaptive
  FedRC, FedRC paper App. H.4 Alg. 3: remove k when (1/N) Σ_{i,j} γ_{i,j;k} < δ) (:mod:`fedcluster.tiers.adaptive`);
* tier 4 ``distance`` — ``prototype-ascp`` | ``prototype-cscp`` (HCFL paper eq. 9–12, ``reduce``, ``confidence``),
  ``update-cosine`` (CFL; HCFL paper Table 2 ablation ①), ``parameter-l2`` (:mod:`fedcluster.tiers.distance`);

and ``split`` (shared feature extractor φ + K heads, HCFL paper Sec. 4.1). ``num_clusters`` is K^0 (E.1-13: default 1).
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
CFL does. Every change is logged in the :class:`~fedcluster.tiers.adaptive.ClusterBook` (stable ids, the round,
the clients that moved) and written to ``clusters.jsonl`` (``ids``, ``events``); ``rounds.csv`` gets
``num_clusters`` (K^t) and ``splits``, ``merges`` (always 0), ``removals``, ``split_gap`` (max D_{k*} − mean D_{k*},
NaN when not tested) — plus ``mean_update_norm`` / ``max_update_norm`` for ``adaptive=cfl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.clustered import replace_solver
from fedcluster.algorithms.fedem import FedEMParams
from fedcluster.algorithms.hcfl_changes import ClusterChanges
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation import per_sample_losses
from fedcluster.engine.features import BodyFeatures
from fedcluster.engine.params import Params, distances, flatten
from fedcluster.errors import ConfigError
from fedcluster.tiers.adaptive import CFLRule, ClusterBook, choose_split, low_mass_clusters, removal_set, split_gap
from fedcluster.tiers.distance import (
    Reduce,
    client_prototypes,
    cluster_matrices,
    cosine_distance,
    parameter_distance,
    prototype_distance,
)
from fedcluster.tiers.weights import best_cluster, em_weights, fedsoft, hard_distance, one_hot

WeightRule = Literal["soft-em", "hard-loss", "hard-distance", "fedsoft"]
Adaptive = Literal["fixed", "cfl", "split", "split-remove", "low-mass"]
Distance = Literal["prototype-ascp", "prototype-cscp", "update-cosine", "parameter-l2"]


@dataclass
class HCFLParams(FedEMParams):
    num_clusters: int = 1  # K^0
    split: bool = True  # φ shared by all clusters + K heads (HCFL paper Sec. 4.1)
    weights: WeightRule = "soft-em"  # tier 2
    weights_scope: Literal["client", "sample"] = "sample"  # soft-em only: HCFL+'s ω_{i,j;k} (eq. 4–5)
    prox: float = 0.0  # FedSoft's proximal weight λ towards the received models
    floor: float = 1e-3  # σ of weights=fedsoft
    adaptive: Adaptive = "split-remove"  # tier 3
    distance: Distance = "prototype-ascp"  # tier 4
    reduce: Reduce = "max"  # eq. 9 max over prototype rows, or the Table 2 ablation "mean"
    prototypes: Literal["features", "head-update"] = "features"  # eq. 11-12 rows, or the HCFL paper's public code's
    confidence: bool = True  # D^k_ij = d̃ ω̃_ik ω̃_jk (False: the Table 2 ablation without it)
    rho: float = 0.1  # eq. 8 threshold
    include_diagonal: bool = True  # mean(D_k) over the whole matrix (reference code) or off-diagonal only
    strict: bool = False  # ">" ρ (reference code) instead of eq. 8's "≥"
    scwu: bool = True  # soft-clustering weight update on split (HCFL paper Alg. 4); False: hard re-assignment
    tol1: float = 0.4  # adaptive=cfl: ‖mean Δθ‖ < tol1 ...
    tol2: float = 1.6  # ... and max ‖Δθ_i‖ > tol2
    min_size: int = 3  # adaptive=cfl: sampled members needed to split
    warmup: int = 0  # no split / removal before this (0-based) round
    max_clusters: int | None = None  # never split beyond this many clusters
    delta: float = 0.05  # adaptive=low-mass: remove clusters with mass below δ (FedRC paper: 0.05)

    def __post_init__(self) -> None:
        if self.weights != "soft-em":
            self.weights_scope = "client"  # the sample-wise prior is the soft E-step's (eq. 4–5)
        super().__post_init__()
        checks = [(self.prox >= 0, "prox must be >= 0"), (0 <= self.floor < 1, "floor must be in [0, 1)"),
                  (self.rho >= 0, "rho must be >= 0"), (self.tol1 >= 0 and self.tol2 >= 0, "tol1, tol2 must be >= 0"),
                  (self.min_size >= 2, "min_size must be >= 2"), (self.warmup >= 0, "warmup must be >= 0"),
                  (self.max_clusters is None or self.max_clusters >= 1, "max_clusters must be >= 1"),
                  (0 <= self.delta < 1, "delta must be in [0, 1)")]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


@ALGORITHMS.register("hcfl", "HCFL composition: formulation × weights (tiers 1–2) × adaptive × distance (tiers 3–4)",
                     HCFLParams)
class HCFL(ClusterChanges):
    def __init__(self, ctx: Context, params: HCFLParams) -> None:
        super().__init__(ctx, params)
        p = params
        if p.distance.startswith("prototype") and p.adaptive in ("split", "split-remove") \
                and ctx.fed.task != "classification":
            raise ConfigError("prototype distances need class labels; use algorithm.distance=update-cosine")
        self.soft = p.weights in ("soft-em", "fedsoft")
        self.book = ClusterBook.start(p.num_clusters)
        self.assigned = np.full(ctx.fed.num_clients, -1, dtype=np.int64)  # hard-distance: current position
        self.rule = CFLRule(p.tol1, p.tol2, p.warmup, p.max_clusters, p.min_size)
        self._features = BodyFeatures(ctx.module)
        self._round, self._proto_bytes = 0, 0

    # -- tiers 1–2 and local training ------------------------------------------------------------
    def _loglik(self, rows: np.ndarray) -> np.ndarray:
        tr, idx = self.ctx.fed.train, torch.as_tensor(rows)
        x = tr.take(rows if self.params.formulation == "joint" else rows[:0])
        return self.loglik(self.losses(rows), x, tr.y[idx])

    def weights_and_training(self, round_: int, clients: np.ndarray, rows: np.ndarray, owner: np.ndarray
                             ) -> tuple[Params, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Tier 2 and Alg. 3 → (local models [m, K, ...] or [m, ...], aggregation weights A [m, K],
        γ [n, K], the cohort's ω̃ [m, K], the position each client's single model started from (hard))."""
        p, m, k = self.params, len(clients), self.num_clusters
        solver = replace_solver(self.ctx.solver, prox_mu=p.prox) if p.prox > 0 else self.ctx.solver
        sizes = self.sizes(clients)
        if p.weights in ("soft-em", "fedsoft"):
            ll = self._loglik(rows)
            if p.weights == "soft-em":
                est = self.e_step(ll, clients, rows, owner)  # FedRC eq. 3 / HCFL eq. 4–5 (sample prior updated)
                gamma, omega = est.gamma, est.omega
                a = np.repeat(sizes[:, None], k, 1)
            else:
                omega = fedsoft(ll, owner, m, p.floor)
                gamma, a = omega[owner], omega * sizes[:, None]
            local = self.train_pairs(clients, gamma, round_, solver)
            return local, a, gamma, omega, np.full(m, -1)
        if p.weights == "hard-loss":  # IFCA
            start = best_cluster(self._loglik(rows), owner, m)
            local = self.train_single(clients, start, round_, solver)
            assign = start
        else:  # hard-distance (FeSEM): first assignment by loss, then argmin_k ‖θ_k − θ_i‖ after training
            new = clients[self.assigned[clients] < 0]
            if len(new):
                new_rows, new_owner = self.rows(new)
                self.assigned[new] = best_cluster(self._loglik(new_rows), new_owner, len(new))
            start = self.assigned[clients].copy()
            local = self.train_single(clients, start, round_, solver)
            names = [n for n in self.models if n.startswith("head." if self.split else "")]
            assign = hard_distance(distances({n: local[n] for n in names},
                                             {n: self.models[n] for n in names}).cpu().numpy()).argmax(1)
            self.assigned[clients] = assign
        omega = one_hot(assign, k)
        return local, omega * sizes[:, None], omega[owner], omega, start

    # -- tier 4 ----------------------------------------------------------------------------------
    def updates(self, local: Params, members: np.ndarray, start: np.ndarray) -> torch.Tensor:
        """[m, P] update of client i of the model of its cluster members[i] (φ_i and head k, or the full model):
        θ_{k,i} − θ_k^t for soft rules; for hard ones the client's single model minus the one it started from."""
        rows = torch.arange(len(members))
        own = torch.as_tensor(np.where(start >= 0, start, members), device=self.ctx.device)
        loc = {n: (v if v.dim() == self.models[n].dim() else v[rows, torch.as_tensor(members)])
               for n, v in local.items()}
        return flatten(loc) - flatten({n: v.index_select(0, own) for n, v in self.models.items()})

    def head_update_distance(self, local: Params, members: np.ndarray, start: np.ndarray) -> np.ndarray:
        """[m, m] eq. 9-10 with the prototype rows replaced by the rows of each client's head update (the HCFL
        paper's public code, github.com/LINs-lab/HCFL, computes the distance on client updates): row c is the change
        of class c's output weights and bias, the last row their mean (ASCP's P_lf)."""
        rows = torch.arange(len(members))
        own = torch.as_tensor(np.where(start >= 0, start, members))
        parts = []
        for name in ("head.weight", "head.bias"):
            v, cur = local[name], self.models[name]
            mine = v if v.dim() == cur.dim() else v[rows, torch.as_tensor(members)]
            delta = mine - cur.index_select(0, own.to(cur.device))
            parts.append(delta if delta.dim() == 3 else delta.unsqueeze(-1))
        per_class = torch.cat(parts, -1)  # [m, C, d + 1]
        protos = torch.cat([per_class, per_class.mean(1, keepdim=True)], 1)
        counts = torch.ones(protos.shape[:2], dtype=torch.float64, device=protos.device)
        return prototype_distance(protos, counts, self.params.distance.removeprefix("prototype-"), self.params.reduce)

    def client_distance(self, rows: np.ndarray, owner: np.ndarray, members: np.ndarray, update: torch.Tensor
                        ) -> np.ndarray:
        """[m, m] d̃ between the cohort's clients (tier 4). Prototypes (eq. 11–12) use φ^t — the body of each
        client's cluster when the extractor is not shared — and eq. 9–10 with ``principle``/``reduce``."""
        p = self.params
        if p.distance == "update-cosine":
            return cosine_distance(update)
        if p.distance == "parameter-l2":
            return parameter_distance(update)
        protos, counts = self.prototypes(rows, owner, members)
        self._proto_bytes = 4 * protos.shape[1] * protos.shape[2]
        return prototype_distance(protos, counts, p.distance.removeprefix("prototype-"), p.reduce)

    def prototypes(self, rows: np.ndarray, owner: np.ndarray, members: np.ndarray
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """P_i [m, C+1, d] and their counts [m, C+1] (eq. 11–12) of the cohort's clients, each computed by the
        client on its own rows (``rows``: the cohort's training rows, back to back; ``owner``: their cohort index)."""
        fed, m = self.ctx.fed, len(members)
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
            z = self._features.cohort(self.models, part.x, local, members[pos], self.split)
            protos, counts = client_prototypes(z, part.y[torch.as_tensor(local, device=part.y.device)], pos, m,
                                               classes)
            shape[:] = protos.shape
            return torch.cat([protos.flatten(1), counts], 1).cpu().numpy()[at]

        table = self.ctx.trainer.per_client(fed.train, client_protos, cohort[has])
        both = torch.zeros((m, table.shape[1]), dtype=torch.float64, device=self.ctx.device)
        both[torch.as_tensor(np.flatnonzero(has), device=both.device)] = torch.as_tensor(table, device=both.device)
        return both[:, :-rows_of].reshape(shape), both[:, -rows_of:]

    def split_decisions(self, round_: int, rows: np.ndarray, owner: np.ndarray, omega: np.ndarray,
                        local: Params, start: np.ndarray, extra: dict[str, float]
                        ) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """[(k*, cohort rows of C_{k*,1}, cohort rows of C_{k*,2})] — CFL's rule on every cluster, or HCFL paper eq.
        8."""
        p, k = self.params, self.num_clusters
        members = omega.argmax(1)
        if p.adaptive == "cfl":
            groups = [np.flatnonzero(members == j) for j in range(k)]
            found, stats = self.rule.splits(round_, groups, self.updates(local, members, start), k)
            active = [s for s, g in zip(stats, groups, strict=True) if len(g)]
            extra.update(mean_update_norm=max((s[0] for s in active), default=float("nan")),
                         max_update_norm=max((s[1] for s in active), default=float("nan")))
            return [(j, groups[j][labels == 0], groups[j][labels == 1]) for j, labels in found]
        if p.adaptive not in ("split", "split-remove") or round_ < p.warmup:
            return []
        if p.max_clusters is not None and k >= p.max_clusters:
            return []
        if p.distance.startswith("prototype") and p.prototypes == "head-update":
            d = self.head_update_distance(local, members, start)
        else:
            update = self.updates(local, members, start) if not p.distance.startswith("prototype") else None
            d = self.client_distance(rows, owner, members, update)
        groups, mats = cluster_matrices(d, omega, weighted=p.confidence)
        tested = [j for j in range(k) if len(mats[j]) >= 2]
        if tested:
            star = max(tested, key=lambda j: float(mats[j].max()))
            extra["split_gap"] = split_gap(mats[star], p.include_diagonal)
        choice = choose_split(mats, p.rho, p.include_diagonal, p.strict)
        if choice is None:
            return []
        j, labels = choice
        return [(j, groups[j][labels == 0], groups[j][labels == 1])]

    # -- one round -------------------------------------------------------------------------------
    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        p = self.params
        self._round, self._proto_bytes = round_ + 1, 0
        k0, m = self.num_clusters, len(clients)
        new_clients = int((self.assigned[clients] < 0).sum())
        rows, owner = self.rows(clients)
        local, a, gamma, omega, start = self.weights_and_training(round_, clients, rows, owner)
        self.gamma[rows] = gamma
        self.omega[clients] = omega
        extra: dict[str, float] = {"split_gap": float("nan")}
        if p.adaptive == "cfl":
            extra.update(mean_update_norm=float("nan"), max_update_norm=float("nan"))
        active = round_ >= p.warmup
        removal = removal_set(self.omega) if p.adaptive == "split-remove" and active else np.zeros(0, np.int64)
        splits = self.split_decisions(round_, rows, owner, omega, local, start, extra)
        old = self.models
        self.aggregate(local, a)  # Alg. 2 lines 8–9
        self.update_statistics(clients, rows, owner, gamma)  # F_i^{latest}, C_{y,k} (lines 7, 10)
        hard = p.weights in ("hard-loss", "hard-distance")
        for j, first, second in splits:
            if p.max_clusters is None or self.num_clusters < p.max_clusters:
                self.split_cluster(j, first, second, local, a, clients, old, soft_update=p.scwu and not hard)
        self.remove_clusters(removal)  # positions < K^t: unaffected by the appended ones
        if p.adaptive == "low-mass" and active:
            low = low_mass_clusters(self.gamma, p.delta)
            if len(low) == self.num_clusters:  # never remove every model: keep the heaviest
                low = np.setdiff1d(low, [int(self.gamma.sum(0).argmax())])
            self.remove_clusters(low, rule="s4")
        if self.num_clusters != k0 and self._multi is not None:  # the K-head trainer is rebuilt for K^{t+1}
            self._multi.close()
            self._multi = None
        extra.update(splits=float(self.book.count(self._round, "split")), merges=0.0,
                     removals=float(self.book.count(self._round, "remove")))
        return RoundResult(*self.payload(m, k0, new_clients), extra=extra)

    def payload(self, m: int, k: int, new_clients: int) -> tuple[int, int]:
        """(bytes up, bytes down) of the round with K^t = ``k``: models, the C_{y,k} table (fedrc-ratio), ω̃ (K
        numbers, when tier 3 uses it) and the prototypes P_i ((C+1) × dim z) up (HCFL paper A.2 "communicated")."""
        p, fed = self.params, self.ctx.fed
        table = 4 * k * max(fed.num_classes, 1) if p.formulation == "fedrc-ratio" else 0
        extra_up = self._proto_bytes + (4 * k if p.adaptive in ("cfl", "split", "split-remove") else 0)
        if self.soft:
            return m * (self.nbytes(k) + table + extra_up), m * (self.nbytes(k) + table)
        if p.weights == "hard-loss":
            return m * (self.nbytes(1) + extra_up), m * self.nbytes(k)
        return m * (self.nbytes(1) + extra_up), new_clients * self.nbytes(k) + (m - new_clients) * self.nbytes(1)

    # -- evaluation, records, state ---------------------------------------------------------------
    def test_weights(self, outputs: torch.Tensor, split: Split) -> np.ndarray:
        """Test clients use the round's tier-2 rule on their labelled data: E-steps (soft-em, FedRC paper H.2 / HCFL
        paper
        E.1-21), FedSoft's shares, or the best cluster (hard rules)."""
        losses = per_sample_losses(outputs, split.y, self.ctx.fed.task).T.double().cpu().numpy()
        ll = self.loglik(losses, split.x, split.y)
        owner, m = split.owner(), split.num_clients
        if self.params.weights == "soft-em":
            return em_weights(ll, owner, m, self.params.test_em_iters)
        if self.params.weights == "fedsoft":
            return fedsoft(ll, owner, m, self.params.floor)
        return one_hot(best_cluster(ll, owner, m), self.num_clusters)

    def clusters_record(self) -> dict[str, Any]:
        rec = super().clusters_record()
        rec["ids"] = list(self.book.ids)
        rec["events"] = [e.to_dict() for e in self.book.events_in(self._round)]
        return rec

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "book": self.book.state_dict(), "assigned": self.assigned}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.book, self.assigned = ClusterBook.from_state(state["book"]), state["assigned"]

"""CFL-GP (CFL-GP paper, Kim, Kim & de Veciana): clustered FL by spectral clustering of gradient profiles.

Round t (CFL-GP paper Algorithm 1, gradient averaging; Algorithm 4/5, model averaging, with ``variant="model"``):

1. model update — every client c of S_k gets θ_k and returns ∇f(X_c, θ_k) on a fresh minibatch of size b
   (``batch_size``, one step); θ_k ← θ_k − γ·mean_c ∇f (lr applied to the cluster-average gradient, E.3.5).
   The model variant runs the configured local epochs and averages the model gaps Δθ unweighted.
2. cluster update, if t mod P = 1 (every round when P = 1, E.3.2) and t < T_cl and clustering has not been
   stable for T/10 rounds: k̄ ← (k̄ + 1) mod K (round robin, model 0 first, E.3.3); θ_k̄ goes to ALL clients;
   block k̄ of each profile g_c ∈ R^{K d̂} becomes (1 − β) g_{c,k̄} + β ∇f(X_c, θ_k̄) (Δθ for the model
   variant) with β = 1/(n_{c,k̄} + 1), n_{c,k̄} = updates of client c's block k̄ so far (cumulative average,
   E.3.4; the CFL-GP paper's β_t = 1/(⌊t/(KP)⌋ + 1) counts the same thing when every client takes part every round, and
   with partial participation a per-client count keeps each block the mean of the gradients c actually sent,
   where one global count would mix a late client's first gradient with its zero start); the profiles are
   spectrally clustered (CFL-GP paper Alg. 3: top-K singular vectors, k-means, Hungarian cluster-to-model matching).

Profile compression (CFL-GP paper App. E): ``compression="random"`` keeps a random index set of d̂ = d/CR coordinates
fixed for the whole run (E.3.10); ``"last-layer"`` keeps the ``head.`` parameters (E.2); ``"body"`` keeps all
but the head (E.2's "gradients of a parameter subset" with the other subset: the output layer's gradient is
the client's predicted-minus-observed label frequencies, so on clients with a few dozen samples it clusters
them by label mix instead of by concept, docs/fidelity.md); ``quantize_digits``
truncates every entry to n_d decimals (Table 7).

Initial clusters: a random balanced assignment; initial models: K independent inits (E.3.6).
Communication (the CFL-GP paper's measure, Table 5): ``models_down``/``models_up`` count model transmissions this round
(a client of S_k̄ receives no extra model on a cluster round); ``transmissions`` is the running total.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from fedcluster.algorithms.base import Algorithm, Context, RoundResult
from fedcluster.algorithms.spectral import choose_k, cumulative_beta, spectral_clustering
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import flatten, num_bytes, select
from fedcluster.metrics.clustering import clustering_ari
from fedcluster.metrics.regression import regression_extras
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Counts, Flags, Positions, Reals


@dataclass
class CFLGPParams(RangeChecked):
    num_clusters: int = ranged(4, ">= 1")  # K
    period: int = ranged(2, ">= 1")  # P: a cluster update every P rounds
    t_cl: int | None = ranged(  # T_cl: no cluster updates from this round on (None = whole run)
        None, ">= 1", "leave it out to update clusters for the whole run")
    variant: Literal["gradient", "model"] = "gradient"  # Alg. 1 (gradient averaging) / Alg. 4-5 (model averaging)
    beta: Literal["cumulative", "last"] = "cumulative"  # β_t = 1/(n+1), or β = 1 (F.1 ablation)
    stable_stop: bool = True  # stop cluster updates once the clustering is unchanged for T/10 rounds
    stable_window: int = ranged(  # rounds of unchanged clustering that stop it; 0 = T/10 of this run's rounds (App. F)
        0, ">= 0", "0 = a tenth of the rounds")
    compression: Literal["none", "random", "last-layer", "body"] = "none"  # body: profiles without the output layer
    compression_ratio: float = ranged(1.0, ">= 1")  # CR = d / d̂ for compression="random"
    quantize_digits: int | None = ranged(  # keep this many decimals of every profile entry (CFL-GP paper Table 7)
        None, ">= 0")


@ALGORITHMS.register("cflgp", "CFL-GP: spectral clustering of accumulated gradient profiles (CFL-GP paper)",
                     CFLGPParams, paper="CFL-GP paper")
class CFLGP(Algorithm):
    fixed_clusters = True

    cluster = Saved[np.ndarray](Positions())  # S_k: each client's cluster
    profiles = Saved[np.ndarray](Reals(cluster_axis=1))  # g_c, K blocks of d̂
    block_count = Saved[np.ndarray](Counts(at_most_rounds=True, cluster_axis=0))  # updates of block k so far
    profile_count = Saved[np.ndarray](Counts(at_most_rounds=True, cluster_axis=1))  # n_{c,k}
    pointer = Saved[int](Positions())  # k̄: the model broadcast last
    stable_rounds = Saved[int](Counts(at_most_rounds=True))
    stopped = Saved[bool](Flags())
    transmissions = Saved[int](Counts())
    first_ari1 = Saved[float](Reals(low=-1.0, high=1.0, nan_ok=True))

    def __init__(self, ctx: Context, params: CFLGPParams) -> None:
        super().__init__(ctx, params)
        K, M = params.num_clusters, ctx.fed.num_clients
        self.models = ctx.fresh_models(K)
        rng = np.random.default_rng([ctx.cfg.seed, 61])
        self.cluster = rng.permutation(np.arange(M) % K)  # S_k^{(0)}: random balanced assignment
        self.omega = np.eye(K)[self.cluster]
        flat = flatten(self.models)
        names = list(self.models)
        sizes = [self.models[n][0].numel() for n in names]
        if params.compression in ("last-layer", "body"):
            head = params.compression == "last-layer"
            mask = torch.cat([torch.full((s,), n.startswith("head.") == head, dtype=torch.bool)
                              for n, s in zip(names, sizes, strict=True)])
            self.index = torch.nonzero(mask).squeeze(1)
        elif params.compression == "random":
            d_hat = max(1, int(round(flat.shape[1] / params.compression_ratio)))
            self.index = torch.as_tensor(np.sort(rng.choice(flat.shape[1], d_hat, replace=False)))
        else:
            self.index = torch.arange(flat.shape[1])
        self.d_hat = len(self.index)
        self.profiles = np.zeros((M, K, self.d_hat))  # g_c, K blocks of d̂
        self.grams = np.zeros((K, M, M))  # block k's Gram matrix: Σ_k grams[k] = the profiles' Gram matrix
        self.block_count = np.zeros(K, dtype=np.int64)  # updates of block k so far (any client)
        self.profile_count = np.zeros((M, K), dtype=np.int64)  # n_{c,k}: updates of client c's block k
        self.pointer = K - 1  # k̄^{(-1)}: model 0 is broadcast first
        self.stable_rounds = 0
        self.stopped = False
        self.transmissions = 0
        self.first_ari1 = float("nan")

    # -- helpers -----------------------------------------------------------------------------
    def local_solver(self):
        if self.params.variant == "gradient":  # one minibatch gradient per round
            return dataclasses.replace(self.ctx.solver, epochs=1, max_steps=1, momentum=0.0)
        return self.ctx.solver

    def is_cluster_round(self, t: int) -> bool:
        P, t_cl = self.params.period, self.params.t_cl
        due = True if P == 1 else t % P == 1
        return due and (t_cl is None or t < t_cl) and not self.stopped

    def profile_vector(self, start: torch.Tensor, trained: torch.Tensor) -> np.ndarray:
        """Gradient (or model gap) rows restricted to the profile coordinates, then optionally quantised."""
        delta = start - trained
        if self.params.variant == "gradient":
            delta = delta / self.local_solver().lr  # θ − θ' = γ ∇f for one SGD step
        out = delta[:, self.index].double().cpu().numpy()
        if self.params.quantize_digits is not None:
            scale = 10.0 ** self.params.quantize_digits
            out = np.trunc(out * scale) / scale
        return out

    def update_gram(self, k: int, clients: np.ndarray) -> None:
        """Block ``k``'s Gram matrix after the ``clients``' rows of that block changed: their rows and columns only
        (Alg. 3 needs only the profiles' Gram matrix; one block of d̂ per round instead of all K·d̂, no copies)."""
        block = self.profiles[:, k]
        rows = block[clients] @ block.T  # [n, M]
        self.grams[k][clients, :] = rows
        self.grams[k][:, clients] = rows.T

    # -- one round ---------------------------------------------------------------------------
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        p, K = self.params, self.params.num_clusters
        clients = np.asarray(clients)
        own = self.cluster[clients]
        cluster_round = self.is_cluster_round(round_)
        unit_clients, unit_models = list(clients), list(own)
        extra_clients = np.array([], dtype=np.int64)
        if cluster_round:
            self.pointer = (self.pointer + 1) % K
            extra_clients = clients[own != self.pointer]  # S_k̄ members already hold θ_k̄
            unit_clients += list(extra_clients)
            unit_models += [self.pointer] * len(extra_clients)
        init = select(self.models, unit_models)
        # The same minibatch X_c^{(t)} serves both of a client's units (stream 0), as in CFL-GP paper Alg. 1.
        trained = self.ctx.trainer.train(init, np.asarray(unit_clients), self.local_solver(), round_)
        # 1. model update: unweighted mean over the members of each cluster (lr on the mean gradient).
        n = len(clients)
        new = {k: v.clone() for k, v in self.models.items()}
        for k in range(K):
            members = np.flatnonzero(own == k)
            if len(members):
                idx = torch.as_tensor(members)
                for name in new:
                    new[name][k] = trained[name][idx].mean(0)
        # 2. cluster update
        extra: dict[str, float] = {}
        if cluster_round:
            start, after = flatten(init), flatten(trained)
            rows = self.profile_vector(start, after)
            kb = self.pointer
            by_client = np.empty((len(clients), self.d_hat))
            member_rows = np.flatnonzero(own == kb)
            by_client[member_rows] = rows[member_rows]
            by_client[own != kb] = rows[n:]
            counts = self.profile_count[clients, kb]
            beta = np.ones(n) if p.beta == "last" else np.array([cumulative_beta(int(c)) for c in counts])
            self.profiles[clients, kb] = (1 - beta)[:, None] * self.profiles[clients, kb] + beta[:, None] * by_client
            self.update_gram(kb, clients)
            self.profile_count[clients, kb] += 1
            self.block_count[kb] += 1
            seed = int(np.random.default_rng([self.ctx.cfg.seed, 62, round_]).integers(2**31))
            new_cluster = self.cluster.copy()
            gram = self.grams.sum(0)[np.ix_(clients, clients)]
            new_cluster[clients] = spectral_clustering(gram, own, K, seed, gram=True)
            changed = bool((new_cluster != self.cluster).any())
            self.cluster = new_cluster
            self.omega = np.eye(K)[self.cluster]
        else:
            changed = False
        if p.stable_stop and not self.stopped:  # CFL-GP paper App. F: stop clustering after T/10 unchanged rounds
            self.stable_rounds = 0 if changed else self.stable_rounds + 1
            window = p.stable_window or max(1, self.ctx.cfg.rounds // 10)
            if self.block_count.min() > 0 and self.stable_rounds >= window:
                self.stopped = True
        self.models = new
        down = n + len(extra_clients)
        self.transmissions += 2 * down
        ari = clustering_ari(self.ctx.fed.true_cluster, self.cluster, K)
        if np.isnan(self.first_ari1) and ari >= 1.0 - 1e-12:
            self.first_ari1 = float(round_ + 1)
        extra.update(models_down=down, models_up=down, transmissions=self.transmissions,
                     cluster_update=float(cluster_round), clustering_stopped=float(self.stopped),
                     first_ari1_round=self.first_ari1)
        extra.update(regression_extras(self.ctx.fed, self.models, self.assignment, self.predict,
                                       self.ctx.trainer.per_client))
        payload = num_bytes({k: v[0] for k, v in self.models.items()}) * down
        return RoundResult(bytes_up=payload, bytes_down=payload, extra=extra)

    def choose_k(self, k_max: int = 10) -> dict[str, object]:
        """CFL-GP paper Appendix G on the accumulated profiles (run with an arbitrary K first)."""
        return choose_k(self.profiles.reshape(len(self.profiles), -1), k_max, self.ctx.cfg.seed)

    def after_load(self) -> None:
        self.grams = np.stack([self.profiles[:, k] @ self.profiles[:, k].T for k in range(self.profiles.shape[1])])

"""FedMD + FedX+clustering (FedMD paper, Su, Xu & Yang): two-phase clustered FL with global convergence.

Phase 1 (FedMD, FedMD paper Algorithm 1), ``phase1_rounds`` = T rounds, with FedMD paper §V's simulation simplifications
(data reused, every client — or ``phase1_clients`` sampled each round — takes part in the subspace estimation,
orthogonal iteration by exact SVD):
  * anchors H: ⌈3k ln k⌉ clients (E.2.6: natural log) drawn among the clients with the most samples (n_i =
    Ω̃(k); in configs B/C the 20 clients with 50 points), all starting from one θ_0 ~ (init_scale/√D)·N(0, I);
  * for each anchor i: Y_{i,t} = mean over clients of the client's moment of residual pairs ε(x, y, θ_{i,t})
    ε(x̃, ỹ, θ_{i,t})^T; ``pairs="all"`` (default) averages over all pairs of distinct points of the client
    (a U-statistic "which pairs"), ``pairs="one"`` uses one random pair per client (FedMD paper literally).
    Ũ = top-k left singular vectors of Y (``subspace="svd"``; computed exactly, by a symmetric eigensolver for the
    all-pairs Y and in the span of the residuals when there are fewer of them than parameters) or FedMD paper
    Algorithm 3
    (``"orthogonal"``, T_1 iterations);
  * anchor i forms A_{i,t} = Ũ^T Y_anchor Ũ from its own data (eq. 2), β̂ = top singular vector of A (= T_2 → ∞
    power iterations on A A^T), σ̂² = max(β̂^T A β̂, 0) (E.2.3), sign of β̂ fixed so that r = Ũβ̂ points along
    the anchor's mean residual (E.2.3); if σ̂ > ε α Δ/√2 then θ ← θ + (α σ̂ / 2β²) r, else the anchor freezes;
  * grouping: anchors closer than Δ/2 are linked; connected groups are the clusters, θ̂_ℓ = group means; if that
    gives other than k groups, k-means on the anchor estimates (E.2.4).
  ε(x, y, θ) = (y − ⟨φ(x), θ⟩) φ(x) = −½∇(ŷ − y)² for regression; −∇ℓ for classification (Remark 3).
Phase 2 (FedX+clustering, FedMD paper Algorithm 2), the remaining rounds: client i picks z_i = argmin_ℓ of its training
loss (eq. 7), runs ``local_steps`` = s full-batch GD steps (``local_batch`` = 0) on θ_{z_i} (FedProx-based with
``prox_mu`` > 0), and the server averages ``aggregation="all"``: θ_ℓ ← Σ_i w_i θ_{i,ℓ}, w_i = n_i/Σ n (blocks a
client did not pick count unchanged, FedMD paper Alg. 2 step 4) or ``"cluster"`` (n_i-weighted mean over the clients
that
picked ℓ, IFCA's rule). ``"auto"`` (default) is ``"cluster"`` for ``init="oneshot"`` — one-shot clustering
(Ghosh et al. 2019) runs FedAvg inside each fixed cluster; averaging over all clients would move block ℓ by
only N_ℓ/N of its members' mean update (it reached the oracle ~3× later in review) — and ``"all"`` otherwise.

The same class gives the FedMD paper's baselines through ``init`` (Phase 2 unchanged, all with FedAvg s local steps):
``"random"`` = IFCA from a random start (k models ~ (init_scale/√D)·N(0, I)), ``"oracle"`` = iterative
clustering from θ* (regression federations with ``extras["theta_star"]``), ``"oneshot"`` = one-shot clustering
(k-means on local min-norm least-squares estimates, E.2.9; the assignment then stays fixed).

Learning rate: the engine's regression loss is (ŷ − y)² without the FedMD paper's ½, so ``lr`` = η_S2 / 2.
``linear-nobias`` (:mod:`fedcluster.models.zoo`) is the FedMD paper's model y = ⟨x, θ⟩ without a bias term.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import KMeans
from threadpoolctl import ThreadpoolController
from torch.func import functional_call, grad, vmap

from fedcluster.algorithms.base import Algorithm, Context, RoundResult
from fedcluster.algorithms.spectral import orthogonal_iteration
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation.scores import model_outputs, per_sample_losses
from fedcluster.engine.params import Params, flatten, num_bytes, select
from fedcluster.engine.training.kernels import per_sample_loss
from fedcluster.errors import ConfigError
from fedcluster.metrics.regression import regression_extras
from fedcluster.tiers.aggregation import weighted_mean
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, Positions, RandomState, Reals


@dataclass
class FedMDParams(RangeChecked):
    num_clusters: int = ranged(3, ">= 1")  # k
    init: Literal["fedmd", "random", "oracle", "oneshot"] = "fedmd"  # moment descent / IFCA / from θ* / k-means
    phase1_rounds: int = ranged(5, ">= 0")  # T (only for init="fedmd")
    phase1_clients: int = ranged(  # clients sampled afresh every Phase-1 round for Y (FedMD paper §V-D: 1,000); 0 = all
        0, ">= 0", "0 = every client")
    num_anchors: int = ranged(0, ">= 0", "0 picks ⌈3k ln k⌉")  # m_H; 0 = ⌈3k ln k⌉ (at least k)
    anchor_min_samples: int = 0  # anchor candidates need n_i ≥ this; 0 = the largest client size
    pairs: Literal["all", "one"] = "all"  # residual pairs: all (U-statistic) / one (FedMD paper)
    subspace: Literal["svd", "orthogonal"] = "svd"  # moments' subspace: SVD / Alg. 3 iterations
    orth_iters: int = 10  # T_1 of Algorithm 3
    alpha: float = 1.0  # α, β: feature covariance bounds (1 for N(0, I) features)
    beta: float = 1.0  # β, the upper covariance bound
    eps: float = 0.05  # ε of the stopping rule σ̂ ≤ ε α Δ / √2
    delta: float | None = ranged(None, "> 0")  # Δ; None = the true min separation from extras["theta_star"]
    init_scale: float = 2.0  # θ_0 ~ (init_scale/√D) N(0, I) (FedMD paper §V); 0 = the model's own init
    local_steps: int = ranged(5, ">= 1")  # s
    local_batch: int = 0  # 0 = full-batch local GD
    prox_mu: float = 0.0  # > 0: FedProx-based Phase 2
    aggregation: Literal["auto", "all", "cluster"] = "auto"  # auto: cluster for init=oneshot, else all (FedMD paper)


def default_num_anchors(k: int) -> int:
    """⌈3k ln k⌉ (FedMD paper §V; natural log, E.2.6), at least k."""
    return max(k, math.ceil(3 * k * math.log(k))) if k > 1 else 1


def group_anchors(estimates: np.ndarray, radius: float, k: int, seed: int = 0) -> np.ndarray:
    """Group labels of anchor estimates: link pairs closer than ``radius`` (= Δ/2), take connected components;
    if that does not give k groups, k-means with k clusters (E.2.4). Labels are 0..(groups − 1)."""
    dist = np.linalg.norm(estimates[:, None] - estimates[None], axis=-1)
    n, labels = connected_components(dist < radius, directed=False)
    if n != k and len(estimates) >= k:
        labels = KMeans(k, n_init=10, random_state=seed).fit_predict(estimates)
    return labels


def pair_moment(e: np.ndarray, owner: np.ndarray, num_clients: int) -> tuple[np.ndarray, np.ndarray]:
    """Factors of Y = mean_c [s_c s_c^T − Σ_j e_j e_j^T] / (n_c(n_c − 1)) (all distinct pairs of each client,
    clients with ≥ 2 points, equal client weights; the Y_{i,t} of FedMD paper Alg. 1 step 3c with every pair of a
    client's points): returns (S·√a, E·√b) so that Y = S'^T S' − E'^T E'."""
    n = np.bincount(owner, minlength=num_clients).astype(np.float64)
    ok = n >= 2
    a = np.where(ok, 1.0 / np.maximum(n * (n - 1), 1.0), 0.0) / max(int(ok.sum()), 1)
    return client_sums(e, owner, num_clients) * np.sqrt(a)[:, None], e * np.sqrt(a[owner])[:, None]


def client_sums(e: np.ndarray, owner: np.ndarray, num_clients: int) -> np.ndarray:
    """s_c = Σ_{j: owner_j = c} e_j, [num_clients, D], each client's rows added one at a time in row order
    (the same floating-point sums as ``np.add.at``, one vectorised step per j-th row of every client)."""
    s = np.zeros((num_clients, e.shape[1]))
    if not len(owner):
        return s
    order = np.argsort(owner, kind="stable")  # rows by client, each client's rows in row order
    rank = np.arange(len(owner)) - np.searchsorted(owner[order], owner[order])  # order[i] is its client's j-th
    by_rank = order[np.argsort(rank, kind="stable")]  # all 0th rows, then all 1st rows, ...
    ends = np.cumsum(np.bincount(rank))
    for lo, hi in zip(ends - np.bincount(rank), ends, strict=True):
        rows = by_rank[lo:hi]  # at most one row per client
        s[owner[rows]] += e[rows]
    return s


def top_left_singular(a_rows: np.ndarray, b_rows: np.ndarray, k: int) -> np.ndarray:
    """Top-k left singular vectors [D, k] of Y = Σ_r a_r b_r^T = A^T B (A, B: [R, D]).

    With R ≥ D (or R < k): the SVD of the D×D matrix Y. With k ≤ R < D (few samples, a large model: FedMD paper §V-D's
    logistic
    regression on tiny clients) Y has rank ≤ R and its column space lies in that of A^T: with the thin QR
    A^T = Q R_a, Y = Q (R_a B), so the left singular vectors of Y are Q times those of the R×D matrix R_a B —
    O(D R²) instead of O(D³), the same subspace up to rounding."""
    r, d = a_rows.shape
    if k <= r < d:
        q, ra = np.linalg.qr(a_rows.T)
        u, _, _ = np.linalg.svd(ra @ b_rows, full_matrices=False)
        return q @ u[:, :k]
    u, _, _ = np.linalg.svd(a_rows.T @ b_rows)
    return u[:, :k]


def top_symmetric(pos: np.ndarray, neg: np.ndarray, k: int) -> np.ndarray:
    """Top-k left singular vectors [D, k] of the symmetric Y = P^T P − N^T N (P: [R_P, D], N: [R_N, D]): the
    eigenvectors of its k eigenvalues of largest magnitude (the singular values of a symmetric matrix are the
    |eigenvalues|). A symmetric eigensolver costs about a third of an SVD; with k ≤ R = R_P + R_N < D, Y has rank
    ≤ R and is computed in the row space of [P; N] (thin QR [P; N]^T = Q [R_P R_N], Y = Q (R_P R_P^T − R_N R_N^T)
    Q^T, an R×R eigenproblem). Same subspace as the SVD of Y up to rounding."""
    r, d = len(pos) + len(neg), pos.shape[1]
    if k <= r < d:
        q, rr = np.linalg.qr(np.concatenate([pos, neg]).T)
        rp, rn = rr[:, :len(pos)], rr[:, len(pos):]
        w, v = np.linalg.eigh(rp @ rp.T - rn @ rn.T)
    else:
        q = None
        w, v = np.linalg.eigh(pos.T @ pos - neg.T @ neg)
    top = v[:, np.argsort(-np.abs(w), kind="stable")[:k]]
    return top if q is None else q @ top


class FedMD(Algorithm):
    """the FedMD paper's two-phase method (and its baselines via ``init``)."""

    # the one-shot labels and the position of ``rng``, which later rounds still draw from (Algorithm 3's Q_0,
    # random models filling in for missing anchor groups): a resumed run continues the straight run's random stream
    fixed = Saved[np.ndarray | None](Positions())
    rng = Saved[np.random.Generator](RandomState())
    # the anchor clients' estimates (init=fedmd)
    anchor_theta = Saved[np.ndarray](Reals(), kept=lambda alg: alg.params.init == "fedmd")
    frozen = Saved[np.ndarray](Flags(), kept=lambda alg: alg.params.init == "fedmd")
    anchors = Saved[np.ndarray](Positions(of="clients"), kept=lambda alg: alg.params.init == "fedmd")

    def __init__(self, ctx: Context, params: FedMDParams) -> None:
        super().__init__(ctx, params)
        k, fed = params.num_clusters, ctx.fed
        self.rng = np.random.default_rng([ctx.cfg.seed, 71])
        template = ctx.fresh_models(1)
        self.shapes = {n: v.shape[1:] for n, v in template.items()}
        self.dim = flatten(template).shape[1]
        self.theta_star = fed.extras.get("theta_star")
        self.fixed = None
        self._blas: ThreadpoolController | None = None
        self.anchors = np.array([], dtype=np.int64)
        self.phase1 = params.phase1_rounds if params.init == "fedmd" else 0
        if params.init == "fedmd":
            m_h = params.num_anchors or default_num_anchors(k)
            sizes = fed.train.sizes
            cand = np.flatnonzero(sizes >= (params.anchor_min_samples or sizes.max()))
            self.anchors = np.sort(self.rng.choice(cand, min(m_h, len(cand)), replace=False))
            theta0 = self.random_vectors(1)[0]
            self.anchor_theta = np.repeat(theta0[None], len(self.anchors), 0)
            self.frozen = np.zeros(len(self.anchors), dtype=bool)
            self.delta = self.resolve_delta()
            start = self.random_vectors(k)
        elif params.init == "random":
            start = self.random_vectors(k)
        elif params.init == "oracle":
            start = self.theta_star_vectors()
        else:
            start = self.oneshot()
        self.models = self.unflatten(start)
        self.omega = np.eye(k)[self.lowest_loss()]
        if self.fixed is not None:
            self.omega = np.eye(k)[self.fixed]

    def reads_every_input(self) -> str | None:
        if self.phase1 > 0:
            return "init=fedmd (Phase 1's moment descent reads every sample's residual)"
        return None

    # -- parameter vectors -------------------------------------------------------------------
    def unflatten(self, vecs: np.ndarray) -> Params:
        t = torch.as_tensor(np.asarray(vecs), dtype=torch.float32, device=self.ctx.device)
        out, i = {}, 0
        for name, shape in self.shapes.items():
            size = int(np.prod(shape))
            out[name] = t[:, i:i + size].reshape(len(t), *shape).clone()
            i += size
        return out

    def random_vectors(self, n: int) -> np.ndarray:
        if self.params.init_scale > 0:
            return self.rng.standard_normal((n, self.dim)) * self.params.init_scale / math.sqrt(self.dim)
        return flatten(self.ctx.fresh_models(n, stream=7)).double().cpu().numpy()

    def theta_star_vectors(self) -> np.ndarray:
        if self.theta_star is None:
            raise ConfigError("algorithm.init=oracle needs a scenario with known true models (a synthetic one); "
                              "choose another algorithm.init")
        ts = np.asarray(self.theta_star, dtype=np.float64)
        if ts.shape[1] == self.dim:
            return ts.copy()
        if ts.shape[1] + 1 == self.dim:  # linear model with bias: true bias 0
            return np.concatenate([ts, np.zeros((len(ts), 1))], 1)
        raise ValueError(f"theta_star has {ts.shape[1]} coordinates, the model {self.dim}")

    def resolve_delta(self) -> float:
        if self.params.delta is not None:
            return self.params.delta
        if self.theta_star is None:
            raise ConfigError("fedmd needs algorithm.delta (Δ, the separation of the true models) on a scenario "
                              "whose true models are unknown; pass e.g. algorithm.delta=1.0")
        ts = np.asarray(self.theta_star, dtype=np.float64)
        d = np.linalg.norm(ts[:, None] - ts[None], axis=-1)
        return float(d[~np.eye(len(ts), dtype=bool)].min()) if len(ts) > 1 else 1.0

    def oneshot(self) -> np.ndarray:
        """One-shot clustering: local min-norm least-squares estimates, k-means, fixed labels (E.2.9)."""
        fed, k = self.ctx.fed, self.params.num_clusters
        d = int(np.prod(fed.input_shape))
        with_bias = self.dim == d + 1
        if fed.task != "regression" or self.dim not in (d, d + 1):
            raise ConfigError(f"algorithm.init=oneshot fits one least-squares model per client: it needs a regression "
                              f"scenario and a linear model with one output (model=linear or linear-nobias), not "
                              f"model={self.ctx.cfg.model} on a {fed.task} task; choose another algorithm.init")

        def local_estimates(part: Split) -> np.ndarray:  # each client's estimate from its own data
            x, y = part.x.double().cpu().numpy().reshape(len(part.x), -1), part.y.double().cpu().numpy()
            est = np.zeros((part.num_clients, d + with_bias))
            for i in np.flatnonzero(part.sizes):
                lo, hi = part.ptr[i], part.ptr[i + 1]
                xi = np.concatenate([x[lo:hi], np.ones((hi - lo, 1))], 1) if with_bias else x[lo:hi]
                est[i] = np.linalg.lstsq(xi, y[lo:hi], rcond=None)[0]
            return est

        est = self.ctx.trainer.per_client(fed.train, local_estimates)
        self.fixed = KMeans(k, n_init=10, random_state=self.ctx.cfg.seed).fit_predict(est)
        return np.stack([est[self.fixed == ell].mean(0) if (self.fixed == ell).any() else self.random_vectors(1)[0]
                         for ell in range(k)])

    # -- Phase 1 -----------------------------------------------------------------------------
    def residuals(self, theta: np.ndarray, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> np.ndarray:
        """ε(x_j, y_j, θ) for every row: −½∇(ŷ − y)² (regression) or −∇ℓ (classification), [N, D]."""
        params = {n: v[0] for n, v in self.unflatten(theta[None]).items()}
        loss = per_sample_loss(self.ctx.fed.task)
        module = self.ctx.module

        def one(p: Params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            return loss(functional_call(module, p, (xi.unsqueeze(0),)), yi.unsqueeze(0)).sum()

        g = vmap(grad(one), in_dims=(None, 0, 0))
        scale = -0.5 if self.ctx.fed.task == "regression" else -1.0
        out = []
        for i in range(0, len(x), chunk):
            gi = g(params, x[i:i + chunk], y[i:i + chunk])
            out.append(torch.cat([gi[n].reshape(len(gi[n]), -1) for n in self.shapes], 1).double() * scale)
        return torch.cat(out).cpu().numpy() if out else np.zeros((0, self.dim))

    def subspace(self, e: np.ndarray, owner: np.ndarray, num_clients: int, round_: int) -> np.ndarray:
        """Ũ ∈ R^{D×k}: top-k left singular space of Y_{i,t} (FedMD paper Alg. 1 step 3c; exact — ``top_symmetric`` /
        ``top_left_singular`` — or FedMD paper Algorithm 3)."""
        k, p = self.params.num_clusters, self.params
        if p.pairs == "all":
            sf, ef = pair_moment(e, owner, num_clients)  # Y = sf^T sf − ef^T ef, symmetric
            if p.subspace == "svd":
                return top_symmetric(sf, ef, k)
            a_rows = b_rows = np.concatenate([sf, ef])
            sign = np.concatenate([np.ones(len(sf)), -np.ones(len(ef))])  # Y = Σ_r sign_r a_r b_r^T
        else:  # one random pair (j, j') of distinct points per client with ≥ 2 points, equal weights
            ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=num_clients))])
            rng = np.random.default_rng([self.ctx.cfg.seed, 72, round_])
            ia, ib = [], []
            for c in range(num_clients):
                if ptr[c + 1] - ptr[c] >= 2:
                    j, jj = rng.choice(ptr[c + 1] - ptr[c], 2, replace=False)
                    ia.append(ptr[c] + j)
                    ib.append(ptr[c] + jj)
            scale = 1.0 / math.sqrt(max(len(ia), 1))
            a_rows, b_rows = e[ia] * scale, e[ib] * scale
            sign = np.ones(len(a_rows))
            if p.subspace == "svd":
                return top_left_singular(a_rows, b_rows, k)

        def matvec(q: np.ndarray) -> np.ndarray:  # Y Q = Σ_r sign_r a_r (b_r^T Q)
            return a_rows.T @ (sign[:, None] * (b_rows @ q))

        def rmatvec(q: np.ndarray) -> np.ndarray:  # Y^T Q
            return b_rows.T @ (sign[:, None] * (a_rows @ q))

        return orthogonal_iteration(matvec, rmatvec, self.dim, k, p.orth_iters, self.rng)

    def moment_step(self, theta: np.ndarray, u: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, bool]:
        """Anchor update (FedMD paper Alg. 1 lines 9–14) from its residuals ``e`` [n_H, D]; returns (θ', moved)."""
        p = self.params
        z = e @ u  # Ũ^T ε_j
        n = len(z)
        if p.pairs == "all" and n >= 2:
            tot = z.sum(0)
            a = (np.outer(tot, tot) - z.T @ z) / (n * (n - 1))
        else:
            h = n // 2
            a = z[:h].T @ z[h:2 * h] / max(h, 1)
        uu, _, _ = np.linalg.svd(a)
        b = uu[:, 0]
        sigma = math.sqrt(max(float(b @ a @ b), 0.0))
        r = u @ b
        if r @ e.mean(0) < 0:  # E.2.3: r must point along the mean residual ≈ Σ(θ* − θ)
            r = -r
        if sigma <= p.eps * p.alpha * self.delta / math.sqrt(2):
            return theta, False
        return theta + p.alpha * sigma / (2 * p.beta**2) * r, True

    def blas_threads(self) -> contextlib.AbstractContextManager:
        """NumPy's BLAS/LAPACK (Phase 1's QR, SVD and eigensolvers) limited to the run's ``threads`` as torch is.
        OpenBLAS otherwise starts one thread per core, and its spinning threads on shared cores made a
        1,200-dimensional QR + SVD ~10× slower in wall time; the results then also depended on the core count."""
        threads = self.ctx.cfg.threads
        if not threads:
            return contextlib.nullcontext()
        if self._blas is None:  # finding the loaded BLAS libraries takes ~10 ms: once per run
            self._blas = ThreadpoolController()
        return self._blas.limit(limits=threads, user_api="blas")

    def phase1_round(self, round_: int) -> None:
        """One FedMD iteration (FedMD paper Alg. 1 step 3) for every anchor that has not stopped, then the grouping."""
        fed = self.ctx.fed
        x, y, owner = fed.train.x, fed.train.y, fed.train.owner()
        rows, sub_owner, num = self.phase1_sample(owner, round_)
        with self.blas_threads():
            for a, client in enumerate(self.anchors):
                if self.frozen[a]:
                    continue
                e = self.residuals(self.anchor_theta[a], x, y)
                u = self.subspace(e if rows is None else e[rows], sub_owner, num, round_)
                lo, hi = fed.train.ptr[client], fed.train.ptr[client + 1]
                self.anchor_theta[a], moved = self.moment_step(self.anchor_theta[a], u, e[lo:hi])
                self.frozen[a] = not moved
        labels = group_anchors(self.anchor_theta, self.delta / 2, self.params.num_clusters, self.ctx.cfg.seed)
        groups = [self.anchor_theta[labels == g].mean(0) for g in np.unique(labels)]
        k = self.params.num_clusters
        while len(groups) < k:  # too few groups (fewer anchors than k): keep random models
            groups.append(self.random_vectors(1)[0])
        self.models = self.unflatten(np.stack(groups[:k]))

    def phase1_sample(self, owner: np.ndarray, round_: int) -> tuple[np.ndarray | None, np.ndarray, int]:
        """The clients whose residuals estimate Y this round (FedMD paper §V-D: "In Phase 1, the parameter server
        samples 1,000 clients for subspace estimation"): (their rows or None for all, their owner ids renumbered
        0 … n − 1, n). A fresh sample every round, drawn from its own stream (the run's other draws are unchanged)."""
        total, want = self.ctx.fed.num_clients, self.params.phase1_clients
        if want == 0 or want >= total:
            return None, owner, total
        pick = np.sort(np.random.default_rng([self.ctx.cfg.seed, 73, round_]).choice(total, want, replace=False))
        rows = np.flatnonzero(np.isin(owner, pick))
        return rows, np.searchsorted(pick, owner[rows]), want

    # -- Phase 2 -----------------------------------------------------------------------------
    def client_losses(self) -> np.ndarray:
        """[M, k] mean training loss of every model on every client."""
        fed = self.ctx.fed

        def mean_losses(part: Split) -> np.ndarray:  # each client's losses on its own data
            out = model_outputs(self.ctx.module, self.models, part.x)
            losses = per_sample_losses(out, part.y, fed.task).double().cpu().numpy()
            owner = part.owner()
            return np.stack([np.bincount(owner, lk, part.num_clients) for lk in losses], 1) / np.maximum(
                part.sizes, 1)[:, None]

        return self.ctx.trainer.per_client(fed.train, mean_losses)

    def lowest_loss(self) -> np.ndarray:
        return self.client_losses().argmin(1)

    def local_solver(self):
        p, sizes = self.params, self.ctx.fed.train.sizes
        batch = p.local_batch or int(sizes.max())
        return dataclasses.replace(self.ctx.solver, batch_size=batch, epochs=p.local_steps,
                                   max_steps=p.local_steps, prox_mu=p.prox_mu, momentum=0.0)

    def phase2_round(self, round_: int, clients: np.ndarray) -> None:
        z = self.lowest_loss() if self.fixed is None else self.fixed
        self.omega = np.eye(self.params.num_clusters)[z]
        zc = z[clients]
        init = select(self.models, zc)
        local = self.ctx.trainer.train(init, clients, self.local_solver(), round_)
        w = self.client_sizes(clients)
        new = {}
        for name, cur in self.models.items():
            upd = cur.clone()
            for ell in range(len(cur)):
                m = torch.as_tensor(np.flatnonzero(zc == ell))
                if not len(m):
                    continue
                total = w.sum() if self.aggregation() == "all" else None  # the cohort's or the cluster's N
                upd[ell] = cur[ell] + weighted_mean(local[name][m] - cur[ell], w[m], total)
            new[name] = upd
        self.models = new

    def aggregation(self) -> str:
        """The Phase-2 averaging rule ("auto": within cluster for the one-shot baseline, the FedMD paper's
        otherwise)."""
        if self.params.aggregation != "auto":
            return self.params.aggregation
        return "cluster" if self.params.init == "oneshot" else "all"

    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        clients = np.asarray(clients)
        one = num_bytes({k: v[0] for k, v in self.models.items()})
        k = self.params.num_clusters
        if round_ < self.phase1:
            self.phase1_round(round_)
            M, m_h = self.ctx.fed.num_clients, len(self.anchors)
            iters = self.params.orth_iters if self.params.subspace == "orthogonal" else 1
            down = m_h * one * M + m_h * one * k * (M * iters + 1)  # anchor models + Q_t + Ũ
            up = m_h * one * k * M * iters + m_h * one
            phase = 1.0
        else:
            self.phase2_round(round_, clients)
            down = up = k * one * len(clients)
            phase = 2.0
        if round_ + 1 == self.phase1 or round_ < self.phase1:
            self.omega = np.eye(k)[self.lowest_loss()]
        extra = {"phase": phase, **regression_extras(self.ctx.fed, self.models, self.assignment, self.predict,
                                                       self.ctx.trainer.per_client)}
        return RoundResult(bytes_up=int(up), bytes_down=int(down), extra=extra)


ALGORITHMS.add("fedmd", FedMD, "FedMD + FedX+clustering: moment-descent init, then lowest-loss FedAvg (FedMD paper)",
               FedMDParams, paper="FedMD paper")

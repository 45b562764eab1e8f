"""FedGWC's tiers 2–4 (Licciardi, Leo et al., ICML 2025, Sec. 3–4), as pure functions:

* :func:`gaussian_rewards` — the Gaussian reward of each sampled client's loss trajectory against the cohort's
  (Sec. 3.2, eq. 1): r_i = (1/S) Σ_s exp(−(ℓ_i^s − μ^s)² / (2 σ²^s)), μ^s and σ²^s the N_i-weighted mean and
  variance over the sampled clients, optionally re-estimated with losses drawn from N(μ, σ²) up to
  ``sampling_size`` (the authors' code, ``loss_sampling_size``);
* :func:`update_interaction` — the interaction matrix update (eq. 2/5): for sampled i, j,
  P_ij ← (1 − α) P_ij + α r_i / Σ_sampled r, α = (sampled members) / (cluster size); returns the mean squared
  change that the convergence test (MSE < ε for a patience of rounds) reads;
* :func:`interaction_affinity` — the affinity W_ij = exp(−β ‖u_i − u_j‖²) between unbiased perception vectors
  (u_i: row i — or column i — of the min–max normalised P with entries i and j removed, Sec. 3.3);
* :func:`best_spectral_split` — spectral clustering of W for n = 2 … n_max, kept when the best
  Davies–Bouldin score on the spectral embedding is below 1 (Sec. 3.4, the recursive split's test);
* :func:`wasserstein_adjusted_score` — the Wasserstein Adjusted Score (Sec. 4): a standard clustering score
  whose distance between clients is the Euclidean distance of their *sorted* class-frequency vectors (a
  Wasserstein-type distance that sees how imbalanced a client is, not which classes it holds).
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
from scipy.sparse.csgraph import laplacian
from sklearn.cluster import SpectralClustering
from sklearn.manifold import SpectralEmbedding
from sklearn.metrics import davies_bouldin_score, silhouette_score


def gaussian_rewards(losses: np.ndarray, weights: np.ndarray, sampling_size: int = 0,
                     rng: np.random.Generator | None = None) -> np.ndarray:
    """Rewards r [m] of the m sampled clients' loss trajectories ``losses`` [m, S] (eq. 1), weighted by
    ``weights`` [m] (N_i). With ``sampling_size`` > m, S-vectors drawn from N(μ, σ²) complete the cohort to
    that size before μ, σ² are re-estimated (``rng`` required)."""
    x = np.asarray(losses, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    mu = w @ x
    var = w @ (x - mu) ** 2
    extra = sampling_size - len(x)
    if extra > 0:
        if rng is None:
            raise ValueError("loss sampling needs an rng")
        drawn = rng.standard_normal((extra, x.shape[1])) * np.sqrt(var) + mu
        pooled = np.concatenate([drawn, x])
        mu, var = pooled.mean(0), pooled.var(0, ddof=1)
    var = var + 1e-16
    return np.exp(-0.5 * (x - mu) ** 2 / var).mean(1)


def update_interaction(p: np.ndarray, sampled: np.ndarray, rewards: np.ndarray, alpha: float
                       ) -> tuple[np.ndarray, float]:
    """P after one round (eq. 5) on the rows and columns of the ``sampled`` positions, and the mean squared
    change of those entries. Rows of sampled clients move toward α r_i / Σ r; the rest is unchanged."""
    out = np.array(p, dtype=np.float64, copy=True)
    idx = np.asarray(sampled, dtype=np.int64)
    r = np.asarray(rewards, dtype=np.float64)
    block = out[np.ix_(idx, idx)]
    new = (1 - alpha) * block + alpha * (r / r.sum())[:, None]
    out[np.ix_(idx, idx)] = new
    return out, float(((new - block) ** 2).sum() / max(len(idx), 1) ** 2)


def interaction_affinity(p: np.ndarray, beta: float, perception: Literal["row", "column"] = "row") -> np.ndarray:
    """W [n, n], W_ij = exp(−β ‖u_i − u_j‖²) on the unbiased perception vectors (Sec. 3.3): u_i is row i of the
    min–max normalised P (client i's rewards next to each peer; ``column``: column i, the peers' rewards next
    to i, as the authors' code takes them), with the entries i and j left out of both vectors; zero diagonal."""
    q = np.asarray(p, dtype=np.float64)
    q = q if perception == "row" else q.T
    span = q.max() - q.min()
    q = (q - q.min()) / max(span, 1e-8)
    n = len(q)
    w = np.zeros((n, n))
    for i in range(n - 1):
        diff = (q[i + 1:] - q[i]) ** 2  # [n − i − 1, n]: rows j > i
        keep = diff.sum(1) - diff[:, i] - diff[np.arange(n - i - 1), np.arange(i + 1, n)]
        w[i, i + 1:] = w[i + 1:, i] = np.exp(-beta * keep)
    return w


def best_spectral_split(affinity: np.ndarray, max_clusters: int, seed: int) -> np.ndarray | None:
    """Spectral clustering of ``affinity`` into n = 2 … min(max_clusters, n_clients − 1) groups; the labels
    with the lowest Davies–Bouldin score on the n-dimensional spectral embedding if that score is below 1
    (Sec. 3.4), else None (the cluster stays whole)."""
    w = np.asarray(affinity, dtype=np.float64)
    if _no_structure(w):
        return None
    best, labels = 1.0, None
    for n in range(2, min(max_clusters, len(w) - 1) + 1):
        with warnings.catch_warnings():  # a few clients: scipy's dense eigh instead of ARPACK, as intended
            warnings.simplefilter("ignore", RuntimeWarning)
            emb = SpectralEmbedding(n_components=n, affinity="precomputed", random_state=seed).fit_transform(w)
            lab = SpectralClustering(n_clusters=n, n_components=n, affinity="precomputed",
                                     assign_labels="cluster_qr", random_state=seed).fit_predict(w)
        if len(np.unique(lab)) < 2:
            continue
        score = float(davies_bouldin_score(emb, lab))
        if score < best:
            best, labels = score, lab
    return None if labels is None else labels.astype(np.int64)


def _no_structure(w: np.ndarray) -> bool:
    """True when the normalised Laplacian's non-trivial eigenvalues are all equal (e.g. a uniform affinity): the
    spectral embedding is then any basis of one eigenspace, which BLAS builds differently, so no split is
    meaningful."""
    eig = np.linalg.eigvalsh(laplacian(w, normed=True))[1:]
    return bool(eig.size == 0 or np.ptp(eig) <= 1e-9 * max(1.0, float(np.abs(eig).max())))


def class_frequencies(labels: np.ndarray, owner: np.ndarray, num_clients: int, num_classes: int) -> np.ndarray:
    """[num_clients, num_classes] class frequencies (rows sum to 1; a client without data is all zeros)."""
    counts = np.zeros((num_clients, num_classes))
    np.add.at(counts, (np.asarray(owner), np.asarray(labels)), 1.0)
    return counts / np.maximum(counts.sum(1, keepdims=True), 1.0)


def wasserstein_adjusted_score(frequencies: np.ndarray, labels: np.ndarray,
                               score: Literal["silhouette", "davies-bouldin"] = "silhouette") -> float:
    """The Wasserstein Adjusted Score of a client clustering: ``score`` computed on the clients' class
    frequencies sorted in decreasing order (Sec. 4), so that the distance between clients compares the shape of
    their class distributions. Silhouette (in [−1, 1], higher is better) or Davies–Bouldin (≥ 0, lower is
    better); NaN when the score is undefined (one cluster, or as many clusters as clients)."""
    x = -np.sort(-np.asarray(frequencies, dtype=np.float64), axis=1)
    lab = np.asarray(labels)
    k = len(np.unique(lab))
    if not 2 <= k <= len(x) - 1:
        return float("nan")
    return float(silhouette_score(x, lab) if score == "silhouette" else davies_bouldin_score(x, lab))

"""Linear-algebra building blocks of CFL-GP (CFL-GP paper) and FedMD (FedMD paper), kept free of any run state.

* :func:`spectral_features` (:func:`gram_features`), :func:`match_clusters`, :func:`spectral_clustering` — CFL-GP
  paper Algorithm 3.
* :func:`cumulative_beta` — the CFL-GP paper's β_t as a per-block counter.
* :func:`choose_k` — CFL-GP paper Appendix G: largest singular-value gap, then the largest relative drop of k-means
inertia.
* :func:`orthogonal_iteration` — FedMD paper Algorithm 3 (federated orthogonal iteration) on matrix-vector callbacks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans


def cumulative_beta(count: int) -> float:
    """β for a profile block already updated ``count`` times: 1/(count + 1) keeps the block equal to the
    cumulative average of every gradient collected for it (CFL-GP paper Alg. 1 line 10, β_t = 1/(⌊t/(KP)⌋ + 1))."""
    return 1.0 / (count + 1)


def spectral_features(profiles: np.ndarray, k: int) -> np.ndarray:
    """CFL-GP paper Alg. 3 step 1: g'_c = Û^T g_c with Û the top-k left singular vectors of G = [g_1 … g_C] ∈ R^{Kd×C}.

    ``profiles`` is [C, Kd] (one row per client). Computed from the C×C Gram matrix G^T G = V S² V^T
    (Kd ≫ C): Û^T G = S V^T, so the features are the rows of V_k S_k.
    """
    g = np.asarray(profiles, dtype=np.float64)
    return gram_features(g @ g.T, k)


def gram_features(gram: np.ndarray, k: int) -> np.ndarray:
    """:func:`spectral_features` from the C×C Gram matrix G^T G of the profiles (the rows of V_k S_k)."""
    vals, vecs = np.linalg.eigh(gram)
    order = np.argsort(vals)[::-1][:k]
    return vecs[:, order] * np.sqrt(np.clip(vals[order], 0.0, None))


def match_clusters(labels: np.ndarray, current: np.ndarray, k: int) -> np.ndarray:
    """CFL-GP paper Alg. 3 step 3: permutation ψ of cluster labels maximising #{c : ψ(ẑ_c) = k_c}, solved as a linear
    assignment on the k×k overlap table (Hungarian; CFL-GP paper states the argmax over permutations). Returns ψ(ẑ)."""
    overlap = np.zeros((k, k))
    np.add.at(overlap, (labels, current), 1.0)
    rows, cols = linear_sum_assignment(-overlap)
    psi = np.empty(k, dtype=np.int64)
    psi[rows] = cols
    return psi[labels]


def spectral_clustering(profiles: np.ndarray, current: np.ndarray, k: int, seed: int = 0, gram: bool = False
                        ) -> np.ndarray:
    """CFL-GP paper Algorithm 3: spectral features, k-means (k-means++ init), cluster-to-model matching.
    ``profiles``: [C, Kd], or with ``gram`` their C×C Gram matrix (what the features need)."""
    feats = gram_features(profiles, k) if gram else spectral_features(profiles, k)
    n_clusters = min(k, len(np.unique(feats.round(12), axis=0)))
    if n_clusters < 2:
        return np.asarray(current).copy()
    labels = KMeans(n_clusters, n_init=10, random_state=seed).fit_predict(feats)
    return match_clusters(labels, np.asarray(current), k)


def choose_k(profiles: np.ndarray, k_max: int = 10, seed: int = 0) -> dict[str, object]:
    """CFL-GP paper Appendix G: s = position of the largest gap between consecutive singular values of G; reduce the
    profiles to s dimensions (g'_{c,s} = Û_s^T g_c); pick K with the elbow of the k-means inertia W_k read on
    the log scale (App. G step 4 leaves the heuristic open: "elbow method or gap statistic"):
    K = argmax_{k ≥ 2} W_{k−1} / W_k, the largest relative drop.

    The largest second difference of the raw W_k (the usual elbow) fails when the centres lie on a line, as
    the three lines' do: equally spaced centres make W_1 − W_2 > W_2 − W_3, so it says K = 2 (measured on
    the CFL-GP paper's three lines with the CFL-GP paper's init, 100 rounds: K = 2 in 12/12 seeds, inertia like [10.8,
    2.75, 0.12, 0.08]); the relative drop says 3 in 12/12. k ≤ C − 1 so that W_k > 0."""
    g = np.asarray(profiles, dtype=np.float64)
    sv = np.linalg.svd(g, compute_uv=False)
    top = sv[: min(len(sv), k_max + 1)]
    gaps = top[:-1] - top[1:]
    s = int(np.argmax(gaps)) + 1 if len(gaps) else 1
    feats = spectral_features(g, s)
    ks = list(range(1, max(1, min(k_max, len(g) - 1)) + 1))
    inertia = np.array([KMeans(kk, n_init=5, random_state=seed).fit(feats).inertia_ for kk in ks])
    if len(ks) >= 2:
        drops = inertia[:-1] / np.maximum(inertia[1:], 1e-12 * max(float(inertia[0]), 1e-300))
        k = ks[int(np.argmax(drops)) + 1]
    else:
        k = ks[-1]
    return {"singular_values": sv, "s": s, "k": int(k), "inertia": inertia}


def orthogonal_iteration(
    matvec: Callable[[np.ndarray], np.ndarray], rmatvec: Callable[[np.ndarray], np.ndarray], dim: int, k: int,
    iters: int, rng: np.random.Generator,
) -> np.ndarray:
    """FedMD paper Algorithm 3 (federated orthogonal iteration) on Y = Σ_i w_i Y_i given as callbacks.

    ``rmatvec(Q) = Y^T Q`` and ``matvec(Q) = Y Q`` are the server's weighted sums of the clients' replies
    (even steps: Q_{t+1} = Σ_i w_i Y_i^T Q_t; odd steps: QR of Σ_i w_i Y_i Q_t), i.e. orthogonal iteration on
    Y Y^T; ``iters`` (T_1) is rounded up to an even number. Returns Q_T, an orthonormal basis ≈ the top-k left
    singular space of Y.
    """
    q, _ = np.linalg.qr(rng.standard_normal((dim, k)))
    for _ in range(max(1, (iters + 1) // 2)):
        q, _ = np.linalg.qr(matvec(rmatvec(q)))
    return q

"""Synthetic federations of the papers: FedMD paper's mixed linear regression and CFL-GP paper's three lines.

* :func:`mixed_regression` — FedMD paper (Su, Xu, Yang) §V-A..C: k regression models
  θ*_ℓ ~ (2/√d)·N(0, I_d); client i has a latent label z_i ~ Categorical(p) and n_i samples
  x ~ N(0, I_d), y = ⟨x, θ*_{z_i}⟩ + 0.2·N(0, 1) (feature map φ = identity).
  :func:`mixed_regression_config` gives the paper's configurations A, B and C.
* :func:`cflgp_lines` — CFL-GP paper (Kim, Kim, de Veciana) §5.1 / App. F.4: three
  distributions at angles (Δφ, 0, −Δφ); x ~ U(0, cos φ_k), y = x·tan φ_k + N(0, 0.2²), fitted with
  the two-parameter line ŷ = θ_1·x + θ_2.

Every generator is deterministic given ``seed``: one :class:`numpy.random.SeedSequence` is split
into independent streams (models, labels, train, validation, test), so e.g. changing a client's
size leaves θ* unchanged. Regression targets are float32 and ``num_classes`` is 0.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from fedcluster.data.federation import Federation, Split

_TERM = re.compile(r"^(-?\d+)\s*[x×X]\s*(-?\d+)$")

# FedMD paper §V-A..C. The text says "N = 1000 data points" for all three, but the stated
# (M, n_i) give N = 10,000; the per-config (M, n_i) values are used.
MIXED_REGRESSION_CONFIGS: dict[str, dict[str, Any]] = {
    "A": {"k": 3, "d": 100, "sizes": "50x200", "p": [1 / 3, 1 / 3, 1 / 3], "noise": 0.2},
    "B": {"k": 3, "d": 100, "sizes": "10x900+50x20", "p": [1 / 3, 1 / 3, 1 / 3], "noise": 0.2},
    "C": {"k": 3, "d": 100, "sizes": "10x900+50x20", "p": [0.2, 0.3, 0.5], "noise": 0.2},
}


# -- client sizes ------------------------------------------------------------------------------
def parse_sizes(sizes: str | Sequence[int] | np.ndarray) -> list[int]:
    """Per-client sample counts from a list or from a spec like ``"10x900+50x20"``.

    A spec is ``+``-separated terms ``n x count`` (``x``, ``X`` or ``×``): ``"10x900+50x20"`` is
    900 clients with 10 samples followed by 20 clients with 50 samples. Every size must be ≥ 1.
    """
    if isinstance(sizes, str):
        out: list[int] = []
        for term in sizes.split("+"):
            match = _TERM.match(term.strip())
            if match is None:
                raise ValueError(
                    f"cannot parse sizes term {term.strip()!r} of {sizes!r}; expected 'n x count'"
                )
            n, count = int(match[1]), int(match[2])
            if n < 1 or count < 1:
                raise ValueError(f"sizes term {term.strip()!r}: samples and count must both be ≥ 1")
            out.extend([n] * count)
        return out
    try:
        out = [operator.index(s) for s in sizes]
    except TypeError as err:
        raise ValueError(f"sizes must be integers, got {list(sizes)[:5]}...") from err
    if not out:
        raise ValueError("sizes must name at least one client")
    bad = [(i, s) for i, s in enumerate(out) if s < 1]
    if bad:
        raise ValueError(f"every client needs ≥ 1 sample; got (client, size) {bad[:5]}")
    return out


def format_sizes(sizes: Sequence[int]) -> str:
    """Inverse of :func:`parse_sizes`: run-length spec such as ``"10x900+50x20"``."""
    terms: list[list[int]] = []
    for s in sizes:
        if terms and terms[-1][0] == s:
            terms[-1][1] += 1
        else:
            terms.append([int(s), 1])
    return "+".join(f"{n}x{c}" for n, c in terms)


# -- helpers -----------------------------------------------------------------------------------
def _streams(seed: int, n: int) -> list[np.random.Generator]:
    if operator.index(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def _split(x: np.ndarray, y: np.ndarray, sizes: Sequence[int]) -> Split:
    ptr = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return Split(xt, torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)), ptr)


def _probabilities(p: Sequence[float] | None, k: int) -> np.ndarray:
    if p is None:
        return np.full(k, 1.0 / k)
    q = np.asarray(p, dtype=np.float64)
    if q.ndim != 1 or len(q) != k:
        raise ValueError(f"p needs one probability per cluster: len(p) = {q.size} but k = {k}")
    if not np.all(np.isfinite(q)) or np.any(q < 0):
        raise ValueError(f"p must be non-negative and finite, got {q.tolist()}")
    if abs(q.sum() - 1.0) > 1e-6:
        raise ValueError(f"p must sum to 1, got sum {q.sum():.6g} for {q.tolist()}")
    return q / q.sum()


# -- FedMD paper: mixed linear regression ---------------------------------------------------------------
def mixed_regression_config(name: str) -> dict[str, Any]:
    """Keyword arguments of :func:`mixed_regression` for FedMD paper's configuration A, B or C.

    A: 200 clients × 50 samples, p = (1/3, 1/3, 1/3). B: 900 clients × 10 + 20 clients × 50,
    p = (1/3, 1/3, 1/3). C: as B with p = (0.2, 0.3, 0.5). All have k = 3, d = 100, noise 0.2 and
    N = 10,000 samples in total: FedMD paper writes "N = 1000", which contradicts its own (M, n_i);
    this function follows (M, n_i).
    """
    key = name.strip().upper()
    if key not in MIXED_REGRESSION_CONFIGS:
        choices = sorted(MIXED_REGRESSION_CONFIGS)
        raise ValueError(f"unknown mixed-regression config {name!r}; choose one of {choices}")
    cfg = MIXED_REGRESSION_CONFIGS[key]
    return {**cfg, "p": list(cfg["p"]), "name": f"mixed_regression_{key}"}


def mixed_regression(
    k: int = 3,
    d: int = 100,
    sizes: str | Sequence[int] = "50x200",
    p: Sequence[float] | None = None,
    noise: float = 0.2,
    val_fraction: float = 0.2,
    min_val: int = 10,
    test_size: int = 1000,
    seed: int = 0,
    name: str = "mixed_regression",
) -> Federation:
    """FedMD paper's mixed linear regression federation (§V-A..C).

    θ*_ℓ ~ (2/√d)·N(0, I_d) for ℓ = 1..k (so ‖θ*_ℓ‖ ≈ 2); client i gets z_i ~ Categorical(p)
    independently (cluster sizes are random, as in the paper) and n_i = ``sizes[i]`` training
    samples x ~ N(0, I_d), y = ⟨x, θ*_{z_i}⟩ + noise·N(0, 1).

    Not in FedMD paper, added for the library: every client also gets a local validation set of
    ``max(min_val, ceil(val_fraction·n_i))`` fresh samples from its own model (a separate draw, so the
    training sizes stay exactly n_i; 10 for every client of configs A–C with the defaults), and
    there is one test client per cluster with ``test_size`` fresh samples.

    Args:
        k: number of clusters / regression models.
        d: input dimension.
        sizes: per-client training sizes, a list or a spec like ``"10x900+50x20"`` (:func:`parse_sizes`).
        p: cluster probabilities (length k, summing to 1); None = uniform.
        noise: standard deviation of the additive Gaussian label noise (FedMD paper: 0.2).
        val_fraction, min_val: size of each client's validation draw (see above).
        test_size: samples of each per-cluster test client.
        seed: seed of all randomness.
        name: stored as ``info["name"]``.

    Returns:
        A regression :class:`Federation` with x float32 ``[n, d]``, y float32 ``[n]``,
        ``true_cluster = z``, ``test_cluster = 0..k-1`` and ``extras["theta_star"]`` (float64 ``[k, d]``).
    """
    if k < 1 or d < 1:
        raise ValueError(f"k and d must be ≥ 1, got k={k}, d={d}")
    if noise < 0:
        raise ValueError(f"noise must be ≥ 0, got {noise}")
    if not 0.0 <= val_fraction <= 1.0 or min_val < 0:
        raise ValueError(f"need 0 ≤ val_fraction ≤ 1 and min_val ≥ 0, got {val_fraction}, {min_val}")
    if test_size < 1:
        raise ValueError(f"test_size must be ≥ 1, got {test_size}")
    n = np.asarray(parse_sizes(sizes), dtype=np.int64)
    q = _probabilities(p, k)
    theta_rng, label_rng, train_rng, val_rng, test_rng = _streams(seed, 5)

    theta = theta_rng.standard_normal((k, d)) * (2.0 / math.sqrt(d))
    z = label_rng.choice(k, size=len(n), p=q)

    def draw(rng: np.random.Generator, cluster_of_client: np.ndarray, counts: np.ndarray) -> Split:
        th = theta[np.repeat(cluster_of_client, counts)]
        x = rng.standard_normal(th.shape)
        y = np.einsum("nd,nd->n", x, th) + noise * rng.standard_normal(len(th))
        return _split(x, y, counts)

    n_val = np.maximum(min_val, np.ceil(val_fraction * n - 1e-9)).astype(np.int64)
    train = draw(train_rng, z, n)
    val = draw(val_rng, z, n_val)
    test = draw(test_rng, np.arange(k), np.full(k, test_size, dtype=np.int64))
    info = {
        "name": name, "k": k, "d": d, "sizes": format_sizes(n.tolist()), "num_clients": len(n),
        "p": q.tolist(), "noise": noise, "val_fraction": val_fraction, "min_val": min_val,
        "test_size": test_size, "seed": seed,
    }
    return Federation(
        train=train, val=val, test=test, true_cluster=z, test_cluster=np.arange(k), num_classes=0,
        task="regression", extras={"theta_star": theta}, info=info,
    )


# -- CFL-GP paper: three lines ---------------------------------------------------------------------------
def cflgp_lines(
    num_clients: int = 12,
    delta_phi_deg: float = 20.0,
    batch: int = 10,
    noise_std: float = 0.2,
    pool_size: int = 2000,
    val_size: int = 200,
    test_size: int = 1000,
    assignment: Sequence[int] | None = None,
    seed: int = 0,
    name: str = "cflgp_lines",
) -> Federation:
    """CFL-GP paper's synthetic multiple-linear-regression federation (§5.1, App. F.4).

    Distribution k ∈ {0, 1, 2} has angle φ_k ∈ (Δφ, 0, −Δφ): x ~ U(0, cos φ_k) and
    y = x·tan φ_k + N(0, noise_std²), i.e. points along a unit segment from the origin at angle φ_k.
    The model is the line ŷ = θ_1·x + θ_2, whose MSE-optimal parameters for distribution k are
    (tan φ_k, 0); they are stored in ``extras["theta_star"]`` ([3, 2]) with the angles (radians)
    in ``extras["phi"]``. Defaults are CFL-GP paper's: C = 12 clients, Δφ = 20°, b = 10.

    CFL-GP paper has clients draw a fresh minibatch of size ``batch`` every round and gives no local data
    size. Here every client owns a pool of ``pool_size`` i.i.d. samples (default 2,000 = T·b for CFL-GP paper's
    T = 200 rounds and b = 10) and each round's minibatch is drawn at random from the whole pool (a new
    permutation per round, engine.training.batches): without replacement within a round, with replacement across
    rounds, so a sample can come back (a 200-round run with b = 10 sees about 63 % of a 2,000 pool). With a
    pool much larger than T·b this approaches CFL-GP paper's fresh draws. ``batch`` is stored in ``info`` for the
    engine. CFL-GP paper's initial lines θ_1 ~ U(−a, a), θ_2 = 0 are ``model=linear model.init_range=a``.
    Each client also gets ``val_size`` fresh validation samples, and there is one test client per
    distribution with ``test_size`` samples.

    Clients are split equally over the three distributions in contiguous blocks (CFL-GP paper implies a
    balanced split; the first ``num_clients % 3`` distributions get one extra client); pass
    ``assignment`` (one distribution id in {0, 1, 2} per client) to choose otherwise.

    Returns a regression :class:`Federation` with x float32 ``[n, 1]`` and y float32 ``[n]``.
    """
    if num_clients < 1:
        raise ValueError(f"num_clients must be ≥ 1, got {num_clients}")
    if not 0.0 <= delta_phi_deg < 90.0:
        raise ValueError(f"delta_phi_deg must lie in [0, 90), got {delta_phi_deg}")
    if noise_std < 0:
        raise ValueError(f"noise_std must be ≥ 0, got {noise_std}")
    if pool_size < 1 or val_size < 0 or test_size < 1:
        raise ValueError(
            f"need pool_size ≥ 1, val_size ≥ 0, test_size ≥ 1; got {pool_size}, {val_size}, {test_size}"
        )
    if not 1 <= batch <= pool_size:
        raise ValueError(f"batch must lie in [1, pool_size={pool_size}], got {batch}")
    if assignment is None:
        counts = [num_clients // 3 + (j < num_clients % 3) for j in range(3)]
        cluster = np.repeat(np.arange(3), counts)
    else:
        cluster = np.asarray(assignment, dtype=np.int64)
        if cluster.shape != (num_clients,) or np.any((cluster < 0) | (cluster > 2)):
            raise ValueError(f"assignment needs {num_clients} distribution ids in {{0, 1, 2}}")
    phi = np.deg2rad(np.array([delta_phi_deg, 0.0, -delta_phi_deg]))
    theta = np.stack([np.tan(phi), np.zeros(3)], axis=1)
    pool_rng, val_rng, test_rng = _streams(seed, 3)

    def draw(rng: np.random.Generator, cluster_of_client: np.ndarray, size: int) -> Split:
        per_sample = np.repeat(cluster_of_client, size)
        x = rng.uniform(0.0, 1.0, len(per_sample)) * np.cos(phi[per_sample])
        y = x * np.tan(phi[per_sample]) + noise_std * rng.standard_normal(len(per_sample))
        return _split(x[:, None], y, np.full(len(cluster_of_client), size, dtype=np.int64))

    info = {
        "name": name, "num_clients": num_clients, "delta_phi_deg": delta_phi_deg,
        "angles_deg": [delta_phi_deg, 0.0, -delta_phi_deg], "batch": batch, "noise_std": noise_std,
        "pool_size": pool_size, "val_size": val_size, "test_size": test_size,
        "assignment": "equal" if assignment is None else "given", "seed": seed,
    }
    return Federation(
        train=draw(pool_rng, cluster, pool_size), val=draw(val_rng, cluster, val_size),
        test=draw(test_rng, np.arange(3), test_size), true_cluster=cluster, test_cluster=np.arange(3),
        num_classes=0, task="regression", extras={"theta_star": theta, "phi": phi}, info=info,
    )

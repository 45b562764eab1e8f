"""Mixtures of distributions inside one client (CFL-GP paper §5.2 "Extension to mixture distributions", App. F.5.2)."""

from __future__ import annotations

import numpy as np


def mix_two(
    indices_a: np.ndarray,
    indices_b: np.ndarray,
    kappa: float,
    n: int,
    rng: np.random.Generator,
    exact: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` samples, a fraction ``kappa`` from pool A and ``1 − kappa`` from pool B (CFL-GP paper App. F.5.2).

    ``exact=True`` takes exactly ``round(kappa · n)`` from A; ``exact=False`` follows CFL-GP paper's wording
    ("each sample is assigned to one of the two rotations with probabilities κ and 1 − κ") and
    draws the A-count as Binomial(n, kappa). Within each pool, samples are drawn without
    replacement; the result is shuffled. Returns ``(indices, source)``: ``indices[j]`` comes from
    ``indices_a`` when ``source[j] == 0`` and from ``indices_b`` when it is 1 (the per-sample
    ground truth). Pass disjoint pools if the same example must not appear twice (e.g. once
    rotated 0° and once 180°).
    """
    a, b = np.asarray(indices_a), np.asarray(indices_b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError("index pools must be 1-D")
    if not 0.0 <= kappa <= 1.0:
        raise ValueError(f"kappa must be in [0, 1], got {kappa}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    n_a = int(round(kappa * n)) if exact else int(rng.binomial(n, kappa))
    n_b = n - n_a
    if n_a > len(a) or n_b > len(b):
        raise ValueError(f"need {n_a} samples from A (has {len(a)}) and {n_b} from B (has {len(b)})")
    chosen = np.concatenate([rng.choice(a, size=n_a, replace=False), rng.choice(b, size=n_b, replace=False)])
    source = np.concatenate([np.zeros(n_a, dtype=np.int64), np.ones(n_b, dtype=np.int64)])
    perm = rng.permutation(n)
    return chosen[perm].astype(np.int64), source[perm]

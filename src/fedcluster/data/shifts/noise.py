"""Label noise: flip a fixed fraction of labels (HCFL paper §5.1 / App. E.1 Table 4, FedRC paper App. H Table 13).

Both functions flip EXACTLY ``round(rate · n)`` samples, chosen uniformly without replacement
(HCFL paper: "χ = 0.1 indicates that 10% of the data have wrong labels"), rather than flipping each
sample independently with probability ``rate``. Applied per client, every client then has the
stated noise rate. Each returns ``(new_labels, flipped_mask)``; the input is not modified.
"""

from __future__ import annotations

import numpy as np


def _pick(
    y: np.ndarray, num_classes: int, rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {y.shape}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes})")
    n_flip = int(round(rate * len(y)))
    if n_flip and num_classes < 2:
        raise ValueError("flipping labels needs at least 2 classes")
    mask = np.zeros(len(y), dtype=bool)
    mask[rng.choice(len(y), size=n_flip, replace=False)] = True
    return y.astype(np.int64), mask


def symmetric_flip(
    y: np.ndarray, num_classes: int, rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric flip (HCFL paper App. E.1): a flipped label becomes any OTHER class uniformly.

    Exactly ``round(rate · n)`` labels change; a flipped label never keeps its value.
    """
    y, mask = _pick(y, num_classes, rate, rng)
    out = y.copy()
    out[mask] = (y[mask] + rng.integers(1, num_classes, size=int(mask.sum()))) % num_classes
    return out, mask


def pair_flip(
    y: np.ndarray, num_classes: int, rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Pair flip (HCFL paper App. E.1): a flipped label y becomes (y + 1) mod C.

    HCFL paper says "only to a very similar wrong category" without naming it; the usual convention
    (Han et al., Co-teaching, 2018) is the next class. Exactly ``round(rate · n)`` labels change.
    """
    y, mask = _pick(y, num_classes, rate, rng)
    out = y.copy()
    out[mask] = (y[mask] + 1) % num_classes
    return out, mask

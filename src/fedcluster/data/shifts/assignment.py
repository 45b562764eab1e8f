"""Assignment of clients to groups (concepts, styles, rotations, source distributions).

Every function returns an ``int64`` group id per client; clients are put in random order, so
client index carries no information about the group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer counts summing to ``total``, proportional to ``weights`` (Hamilton's method).

    Leftover units go to the largest fractional parts; ties go to the lower index.
    """
    quota = total * weights / weights.sum()
    counts = np.floor(quota + 1e-9).astype(np.int64)
    rest = total - int(counts.sum())
    order = np.argsort(-(quota - counts), kind="stable")
    counts[order[:rest]] += 1
    return counts


def _check_clients(num_clients: int) -> None:
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")


def ratio_assignment(
    num_clients: int, ratios: Sequence[float] | np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Cluster imbalance (FedRC paper Fig. 6b / Table 12: 8 : 1 : 1; FedMD paper config C: 0.2/0.3/0.5, fixed counts).

    Group g gets a number of clients proportional to ``ratios[g]`` (largest-remainder rounding,
    so 8:1:1 over 100 clients gives exactly 80/10/10); clients are then shuffled.
    """
    _check_clients(num_clients)
    w = np.asarray(ratios, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0:
        raise ValueError("ratios must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"every ratio must be positive and finite, got {w.tolist()}")
    counts = _largest_remainder(num_clients, w)
    return rng.permutation(np.repeat(np.arange(len(w)), counts)).astype(np.int64)


def balanced_assignment(num_clients: int, num_groups: int, rng: np.random.Generator) -> np.ndarray:
    """Equal groups (CFL-GP paper §5.2 "C/8 clients per angle", CFL-GP paper App. F.7/F.8 "half of the clients").

    Sizes differ by at most one (the lower-numbered groups get the extra clients).
    """
    if num_groups < 1:
        raise ValueError(f"num_groups must be >= 1, got {num_groups}")
    return ratio_assignment(num_clients, np.ones(num_groups), rng)


def uniform_assignment(num_clients: int, num_groups: int, rng: np.random.Generator) -> np.ndarray:
    """Each client draws its group independently and uniformly (FedRC paper §3 setting: style and concept
    drawn at random per client; FedMD paper §V-A: z_i ~ Categorical(p) with uniform p). Counts are random.
    """
    _check_clients(num_clients)
    if num_groups < 1:
        raise ValueError(f"num_groups must be >= 1, got {num_groups}")
    return rng.integers(0, num_groups, size=num_clients).astype(np.int64)


def diverse_shift_assignment(
    num_clients: int, rng: np.random.Generator, num_concepts: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """FedRC's client types (FedRC paper App. H.8): concept id and corrupted flag per client.

    For 3 concepts: 30% concept 0 clean, 20% concept 0 corrupted, 25% concept 1 and 25% concept 2,
    a fifth of each of those corrupted (300 clients → 90 / 60 / 60+15 / 60+15).
    Generalisation (FedRC paper Table 7 uses 1 and 5 concepts without giving the mix): concept 0 keeps its
    30% clean + 20% corrupted; the other 50% is shared equally by concepts 1..K−1, a fifth of each
    corrupted. With one concept that 50% stays in concept 0 (a fifth corrupted), i.e. 70% clean,
    30% corrupted. Counts use largest-remainder rounding over these cells, so they are exact.
    """
    _check_clients(num_clients)
    if num_concepts < 1:
        raise ValueError(f"num_concepts must be >= 1, got {num_concepts}")
    # cells: (concept, corrupted, share)
    cells: list[tuple[int, bool, float]] = [(0, False, 0.30), (0, True, 0.20)]
    others = max(num_concepts - 1, 1)
    for k in range(1, others + 1):
        concept = k if num_concepts > 1 else 0
        cells += [(concept, False, 0.5 / others * 0.8), (concept, True, 0.5 / others * 0.2)]
    return _cells(num_clients, cells, rng)


def _cells(num_clients: int, cells: Sequence[tuple[int, bool, float]], rng: np.random.Generator
           ) -> tuple[np.ndarray, np.ndarray]:
    """(concept, corrupted) per client from (concept, corrupted, share) cells, exact counts, shuffled."""
    counts = _largest_remainder(num_clients, np.array([c[2] for c in cells]))
    concept = np.repeat(np.array([c[0] for c in cells], dtype=np.int64), counts)
    corrupted = np.repeat(np.array([c[1] for c in cells], dtype=bool), counts)
    perm = rng.permutation(num_clients)
    return concept[perm], corrupted[perm]


def fedrc_code_assignment(num_clients: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The client types of the FedRC paper's public code (github.com/LINs-lab/FedRC, ``create_c/make_fmnist_c.py``),
    which differ from its App. H.8: 20 % corrupted clients of concept 0, 40 % with a swapped concept (half each of
    concepts 1 and 2), 20 % with a swapped concept and corrupted (10 % each), the other 20 % clean concept 0; i.e.
    concepts 40 / 30 / 30 % with 40 % of the clients corrupted (300 clients → 60 + 60 / 60 + 30 / 60 + 30)."""
    _check_clients(num_clients)
    return _cells(num_clients, [(0, False, 0.2), (0, True, 0.2), (1, False, 0.2), (1, True, 0.1), (2, False, 0.2),
                                (2, True, 0.1)], rng)

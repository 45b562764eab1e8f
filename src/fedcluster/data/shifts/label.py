"""Label shift: split a labelled pool into client index sets.

Every function returns one sorted ``int64`` index array per client; the arrays are disjoint.
Randomness comes only from the passed ``np.random.Generator``.
"""

from __future__ import annotations

import numpy as np


def _check_common(labels: np.ndarray, num_clients: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    return labels


def iid_split(labels: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """IID split: a random permutation of all samples cut into ``num_clients`` near-equal parts.

    The homogeneous reference partition (e.g. CFL-GP paper §B.6 "randomly partitioned" CIFAR10, FedMD paper §V
    equal-size clients). Sizes differ by at most one; ``labels`` is used only for its length.
    """
    labels = _check_common(labels, num_clients)
    if len(labels) < num_clients:
        raise ValueError(f"{len(labels)} samples cannot give {num_clients} clients one sample each")
    perm = rng.permutation(len(labels))
    return [np.sort(p).astype(np.int64) for p in np.array_split(perm, num_clients)]


def dirichlet_split(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    min_size: int = 2,
) -> list[np.ndarray]:
    """LDA split (HCFL paper §5.1, CFL-GP paper App. F.8, FedRC paper §5.1): every class is divided over clients with
    q_c ~ Dir(alpha·1).

    Smaller ``alpha`` gives more skewed label distributions. Draws are repeated until every client
    holds at least ``min_size`` samples. Every sample is assigned; sizes are unequal.
    """
    labels = _check_common(labels, num_clients)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    classes = np.unique(labels)
    if len(labels) < num_clients * min_size:
        raise ValueError(f"{len(labels)} samples cannot give {num_clients} clients {min_size} samples each")
    for _ in range(1000):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            q = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(q)[:-1] * len(idx)).astype(np.int64)
            for client, chunk in enumerate(np.split(idx, cuts)):
                parts[client].append(chunk)
        out = [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
        if min(len(o) for o in out) >= min_size:
            return out
    raise ValueError(f"could not give every client {min_size} samples with alpha={alpha}; raise alpha")


def _safe_dirichlet(concentration: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Dir(concentration); tiny concentrations can underflow to all zeros, then fall back to one class."""
    q = rng.dirichlet(concentration)
    if not np.all(np.isfinite(q)) or q.sum() <= 0:
        q = np.zeros_like(concentration, dtype=np.float64)
        q[rng.choice(len(q), p=concentration / concentration.sum())] = 1.0
    return q


def dirichlet_split_global(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    samples_per_client: int | None = None,
) -> list[np.ndarray]:
    """FedRC-code LDA variant (FedRC paper §5.1 / App. H.8): equal-size clients.

    For each client in turn, q ~ Dir(alpha · p_global) with p_global the class frequencies of
    ``labels``; then exactly ``samples_per_client`` (default ``len(labels) // num_clients``) samples
    are drawn without replacement, the class of every draw following q restricted to the classes
    that still have unused samples (q renormalised when a class runs out). Counts are drawn as a
    multinomial, the overflow of exhausted classes is redrawn from the renormalised q — the same
    law as per-sample sequential draws. Leftover samples (``len % num_clients``) stay unused.
    """
    labels = _check_common(labels, num_clients)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    n = len(labels) // num_clients if samples_per_client is None else int(samples_per_client)
    if n < 1:
        raise ValueError(f"samples_per_client must be >= 1, got {n}")
    if n * num_clients > len(labels):
        raise ValueError(f"{len(labels)} samples cannot give {num_clients} clients {n} samples each")
    classes, counts = np.unique(labels, return_counts=True)
    p_global = counts / counts.sum()
    # each class pool is shuffled once and consumed from the front (= sampling without replacement)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    used = np.zeros(len(classes), dtype=np.int64)
    out: list[np.ndarray] = []
    for _ in range(num_clients):
        q = _safe_dirichlet(alpha * p_global, rng)
        take = np.zeros(len(classes), dtype=np.int64)
        need = n
        while need > 0:
            avail = counts - used - take
            w = np.where(avail > 0, q, 0.0)
            if w.sum() <= 0:  # q has no mass left on non-empty classes: renormalise over what remains
                w = (avail > 0).astype(np.float64)
            draw = rng.multinomial(need, w / w.sum())
            got = np.minimum(draw, avail)
            take += got
            need -= int(got.sum())
        chunks = [pools[c][used[c] : used[c] + take[c]] for c in range(len(classes))]
        used += take
        out.append(np.sort(np.concatenate(chunks)).astype(np.int64))
    return out


def classes_per_client_split(
    labels: np.ndarray,
    num_clients: int,
    classes_per_client: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Pathological split (HCFL paper App. E Tables 11–13 "C = 2 / C = 4"): each client holds exactly C classes.

    Shard-based as in McMahan et al. (2017), but shards never cross a class boundary and no client
    gets two shards of one class, so every client sees exactly ``classes_per_client`` classes.
    Each class is held by ⌊M·C/K⌋ or ⌈M·C/K⌉ clients (the extra slots go to random classes);
    class-to-client sets are drawn at random under that constraint, and every class is cut into
    equal shards (sizes differ by ≤ 1), one per holder. All samples are assigned unless M·C < K
    (then the classes that no client holds are left out).
    """
    labels = _check_common(labels, num_clients)
    classes = np.unique(labels)
    k, c = len(classes), int(classes_per_client)
    if not 1 <= c <= k:
        raise ValueError(f"classes_per_client must be in [1, {k}], got {classes_per_client}")
    slots = np.full(k, num_clients * c // k, dtype=np.int64)
    slots[rng.choice(k, size=num_clients * c - slots.sum(), replace=False)] += 1
    holders: list[list[int]] = [[] for _ in range(k)]
    remaining = slots.copy()
    for i, left in enumerate(range(num_clients, 0, -1)):
        # classes that need every remaining client must be taken now; the rest are random.
        # This keeps the assignment feasible: afterwards no class needs more than left-1 clients.
        must = np.flatnonzero(remaining == left)
        free = np.setdiff1d(np.flatnonzero(remaining > 0), must)
        pick = np.concatenate([must, rng.choice(free, size=c - len(must), replace=False)])
        remaining[pick] -= 1
        for cls in pick:
            holders[cls].append(i)
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for cls, who in enumerate(holders):
        if not who:  # only when M·C < K: this class is left out
            continue
        idx = rng.permutation(np.flatnonzero(labels == classes[cls]))
        if len(idx) < len(who):
            raise ValueError(f"class {classes[cls]} has {len(idx)} samples for {len(who)} clients")
        for client, shard in zip(who, np.array_split(idx, len(who)), strict=True):
            parts[client].append(shard)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]

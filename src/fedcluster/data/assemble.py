"""Turn per-client plans (sample indices + shifts) into a :class:`Federation`.

A scenario decides, for every participating and every test client, which samples of the source
pool it holds, which concept (label map) and which feature transform apply; this module applies
them once, splits each participating client's samples into training and local validation, and packs
everything into the CSR container.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedcluster.data.federation import Federation, Split
from fedcluster.data.progress import progress
from fedcluster.data.sources.base import ArrayDataset

Transform = Callable[[np.ndarray, np.random.Generator], np.ndarray]


@dataclass
class ClientPlan:
    """One client's data: rows of the source pool, its concept and the shifts applied to it."""

    indices: np.ndarray
    concept: int = 0
    label_map: np.ndarray | None = None  # [classes]: y → label_map[y]
    transform: Transform | None = None  # feature shift applied to x (corruption, rotation, ...)
    style: int = -1
    sample_concept: np.ndarray | None = None  # per-sample concept where a client mixes sources


def realise(x: np.ndarray, y: np.ndarray, plan: ClientPlan, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = x[plan.indices], y[plan.indices]
    if plan.transform is not None:
        xs = plan.transform(xs, rng).astype(np.float32)
    if plan.label_map is not None:
        ys = plan.label_map[ys]
    return xs, ys


def split_validation(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random train/validation positions; every client keeps ≥ 1 training and, if n ≥ 2, ≥ 1 validation."""
    n_val = min(max(int(round(fraction * n)), 1 if n >= 2 and fraction > 0 else 0), n - 1) if n else 0
    perm = rng.permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def assemble(
    data: ArrayDataset, clients: list[ClientPlan], tests: list[ClientPlan], val_fraction: float,
    rng: np.random.Generator, info: dict[str, Any], style_names: list[str] | None = None,
) -> Federation:
    """Apply every plan (participating clients from the train pool, test clients from the test pool)."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    tr_x, tr_y, va_x, va_y, concepts = [], [], [], [], []
    has_mix = any(p.sample_concept is not None for p in clients)
    for plan, crng in progress(zip(clients, rng.spawn(len(clients)), strict=True), len(clients), "building clients"):
        xs, ys = realise(data.x_train, data.y_train, plan, crng)
        tr, va = split_validation(len(ys), val_fraction, crng)
        tr_x.append(xs[tr])
        tr_y.append(ys[tr])
        va_x.append(xs[va])
        va_y.append(ys[va])
        if has_mix:
            sc = plan.sample_concept if plan.sample_concept is not None else np.full(len(ys), plan.concept)
            concepts.append(sc[tr])
    te = [realise(data.x_test, data.y_test, p, r) for p, r in zip(tests, rng.spawn(len(tests)), strict=True)]
    return Federation(
        train=Split.from_parts(tr_x, tr_y), val=Split.from_parts(va_x, va_y),
        test=Split.from_parts([t[0] for t in te], [t[1] for t in te]),
        true_cluster=np.array([p.concept for p in clients]), test_cluster=np.array([p.concept for p in tests]),
        num_classes=data.num_classes,
        sample_concept=np.concatenate(concepts) if has_mix else None,
        style=np.array([p.style for p in clients], dtype=np.int64), style_names=list(style_names or []),
        info=info,
    )

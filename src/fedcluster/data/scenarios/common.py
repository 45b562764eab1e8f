"""Pieces shared by the scenario modules: parameter checks, partitioning, label maps, finishing touches.

The partitioner's one job is to turn a label vector into client index sets (:func:`partition`,
:func:`grouped_partition`); the shifts (label maps, feature transforms, label noise) are applied on top
through :class:`~fedcluster.data.assemble.ClientPlan` or, for label noise, after assembly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Literal

import numpy as np
import torch

from fedcluster.data.assemble import ClientPlan, Transform
from fedcluster.data.federation import Federation
from fedcluster.data.shifts.concept import (
    fedrc_label_maps,
    hcfl_beta_label_maps,
    permutation_label_maps,
    shift_label_map,
)
from fedcluster.data.shifts.geometric import downsample
from fedcluster.data.shifts.label import (
    classes_per_client_split,
    dirichlet_split,
    dirichlet_split_global,
    iid_split,
)
from fedcluster.data.shifts.noise import pair_flip, symmetric_flip
from fedcluster.data.sources.base import ArrayDataset

SplitKind = Literal["iid", "dirichlet", "dirichlet-global", "classes"]
MapKind = Literal["fedrc", "hcfl-beta", "shift", "permutation"]
NoiseKind = Literal["none", "symmetric", "pair"]


# -- parameter checks (raise ValueError: the config layer turns it into one clear line) ----------
def check_val_fraction(v: float) -> None:
    if not 0 <= v < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {v}")


def check_split(alpha: float, classes_per_client: int) -> None:
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if classes_per_client < 1:
        raise ValueError(f"classes_per_client must be >= 1, got {classes_per_client}")


def check_image_size(size: int | None) -> None:
    if size is not None and size < 1:
        raise ValueError(f"image_size must be >= 1 (or null for the original size), got {size}")


def check_ratios(ratios: Sequence[float] | None, groups: int, what: str = "concepts") -> None:
    if ratios is None:
        return
    if len(ratios) != groups:
        raise ValueError(f"ratios needs one entry per {what[:-1]} ({groups}), got {list(ratios)}")
    if any(not r > 0 for r in ratios):
        raise ValueError(f"every ratio must be > 0, got {list(ratios)}")


def check_noise_rate(rate: float) -> None:
    if not 0 <= rate <= 1:
        raise ValueError(f"noise_rate must be in [0, 1], got {rate}")


def check_data(data: ArrayDataset | None, scenario: str) -> ArrayDataset:
    if data is None:
        raise ValueError(f"scenario {scenario!r} needs an image data set (dataset=digits, fashion-mnist, ...)")
    return data


def scenario_info(name: str, data: ArrayDataset, params: Any) -> dict[str, Any]:
    """``Federation.info``: the scenario name, the data set and every resolved parameter."""
    return {"name": name, "dataset": data.name, **asdict(params)}


# -- partitioning ----------------------------------------------------------------------------------
def partition(
    labels: np.ndarray, num_clients: int, split: SplitKind, alpha: float, classes_per_client: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Client index sets (positions in ``labels``) by the named label-shift rule.

    ``iid``: equal random parts. ``dirichlet``: per-class LDA with Dir(α·1) (HCFL paper §5.1, CFL-GP paper App. F.8,
    FedRC paper §5.1). ``dirichlet-global``: FedRC-code LDA, q ~ Dir(α·p_global) per client, equal sizes. ``classes``:
    each client holds exactly ``classes_per_client`` classes
    (HCFL paper App. E Tables 11–13, "C = 2 / 4").
    """
    if split == "iid":
        return iid_split(labels, num_clients, rng)
    if split == "dirichlet":
        return dirichlet_split(labels, num_clients, alpha, rng)
    if split == "dirichlet-global":
        return dirichlet_split_global(labels, num_clients, alpha, rng)
    if split == "classes":
        return classes_per_client_split(labels, num_clients, classes_per_client, rng)
    raise ValueError(f"unknown split {split!r}")


def grouped_partition(
    labels: np.ndarray, group_of_client: np.ndarray, num_groups: int, split: SplitKind, alpha: float,
    classes_per_client: int, rng: np.random.Generator,
) -> list[np.ndarray]:
    """Cut the pool into ``num_groups`` disjoint equal random parts; share part g among group g's clients.

    CFL-GP paper §5.2 / App. F.5: "MNIST split into 8 disjoint equal parts; part r rotated by angle r; parts
    distributed over the clients" (and the three equal subsets of the mixture run, App. F.5.2).
    Returns one index array per client (positions in ``labels``).
    """
    parts = iid_split(labels, num_groups, rng)
    out: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(group_of_client)
    for g, part in enumerate(parts):
        members = np.flatnonzero(group_of_client == g)
        if len(members) == 0:
            continue
        for client, pos in zip(members, partition(labels[part], len(members), split, alpha,
                                                  classes_per_client, rng), strict=True):
            out[client] = part[pos]
    return out


def subsample(n: int, samples: int | None, rng: np.random.Generator) -> np.ndarray:
    """Sorted random subset of ``range(n)`` of size ``samples`` (all when None; CFL-GP paper App. F.8 uses 200,000)."""
    if samples is None or samples >= n:
        return np.arange(n)
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    return np.sort(rng.choice(n, size=samples, replace=False))


# -- concept shift ----------------------------------------------------------------------------------
def label_maps(
    kind: MapKind, num_classes: int, concepts: int, beta: float = 0.2, shift: int = 5,
    perms: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """[concepts, classes] label maps of the named rule.

    ``fedrc``: identity, C−1−y, (y+1) mod C, … (FedRC paper App. H.8). ``hcfl-beta``: the HCFL paper's β rule in the
   . ``shift``: concept c maps y → (y + c·shift) mod C (CFL-GP paper App. F.7 uses two
    concepts with shift 5). ``permutation``: the user's list of permutations, one per concept.
    """
    if kind == "fedrc":
        return fedrc_label_maps(num_classes, concepts)
    if kind == "hcfl-beta":
        return hcfl_beta_label_maps(num_classes, concepts, beta)
    if kind == "shift":
        return np.stack([shift_label_map(num_classes, c * shift) for c in range(concepts)])
    if kind == "permutation":
        if perms is None:
            raise ValueError("maps=permutation needs scenario.perms=[[...],[...]] (one permutation per concept)")
        maps = permutation_label_maps(perms)
        if maps.shape[1] != num_classes:
            raise ValueError(f"perms must permute {num_classes} classes, got length {maps.shape[1]}")
        return maps
    raise ValueError(f"unknown label maps {kind!r}")


# -- feature shift composition ----------------------------------------------------------------------
def then_downsample(transform: Transform | None, size: int) -> Transform:
    """``transform`` followed by area downsampling to ``size``×``size`` (FedMD paper §V-D: 14×14)."""

    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return downsample(transform(x, rng) if transform is not None else x, size)

    return apply


def resize_plans(plans: Sequence[ClientPlan], size: int | None) -> None:
    """Downsample every client's images (after its own transform) when ``size`` is given."""
    if size is None:
        return
    for p in plans:
        p.transform = then_downsample(p.transform, size)


def full_test(data: ArrayDataset, concept: int = 0, label_map: np.ndarray | None = None,
              transform: Transform | None = None, style: int = -1) -> ClientPlan:
    """A non-participating test client holding the whole official test set."""
    return ClientPlan(np.arange(len(data.y_test)), concept, label_map, transform, style)


# -- label noise (applied after assembly, to training labels only) ---------------------------------
def add_label_noise(fed: Federation, noise: NoiseKind, rate: float, rng: np.random.Generator) -> None:
    """Flip exactly round(rate·n_i) training labels of every client (HCFL paper App. E.1 Table 4, FedRC paper Table 13).

    ``symmetric``: to any other class uniformly; ``pair``: y → (y+1) mod C. Local
    validation and test labels stay clean. Records ``extras["flipped"]`` (bool per training sample) and
    ``extras["clean_label"]`` (the labels before flipping).
    """
    if noise == "none" or rate == 0:
        return
    flip = symmetric_flip if noise == "symmetric" else pair_flip
    clean = fed.train.y.numpy().copy()
    noisy, flipped = clean.copy(), np.zeros(len(clean), dtype=bool)
    ptr = fed.train.ptr
    for i, crng in enumerate(rng.spawn(fed.num_clients)):
        lo, hi = int(ptr[i]), int(ptr[i + 1])
        noisy[lo:hi], flipped[lo:hi] = flip(clean[lo:hi], fed.num_classes, rate, crng)
    fed.train.y = torch.from_numpy(noisy)
    fed.extras["flipped"] = flipped
    fed.extras["clean_label"] = clean

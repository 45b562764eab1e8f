"""Concept shift: per-concept label maps (row c maps an original label y to ``maps[c, y]``).

Every map is a permutation of ``0..C-1`` stored as an ``int64`` array of shape [concepts, classes].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _check_classes(num_classes: int) -> None:
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")


def fedrc_label_maps(num_classes: int, num_concepts: int) -> np.ndarray:
    """FedRC's label swaps (FedRC paper §5.1, App. H.8): identity, y → C−1−y, y → (y+1) mod C.

    More concepts (FedRC paper Table 7 uses 5, maps not given) continue with y → (y+2) mod C, (y+3) mod C, …
    """
    _check_classes(num_classes)
    if num_concepts < 1:
        raise ValueError("num_concepts must be >= 1")
    y = np.arange(num_classes)
    maps = [y, num_classes - 1 - y]
    shift = 1
    while len(maps) < num_concepts:
        maps.append((y + shift) % num_classes)
        shift += 1
    return np.stack(maps[:num_concepts]).astype(np.int64)


def hcfl_beta_label_maps(num_classes: int, num_concepts: int, beta: float) -> np.ndarray:
    """HCFL's β concept rule (HCFL paper §5.1, App. E.1)

    C_β = ⌊C·β⌋; the affected labels are {0, …, C_β} (capped at C−1) and concept c maps an affected
    y to (y + c) mod (C_β + 1); other labels are unchanged. As printed, HCFL paper's rule maps C_β + 1
    labels into C_β values; this reading is a permutation and fits the "β = 0.1 on CIFAR10 swaps two
    labels per concept" example. Concepts whose shift is a multiple of C_β + 1 repeat the identity
    (e.g. β = 0.1, C = 10 gives only 2 distinct concepts among 3).
    """
    _check_classes(num_classes)
    if num_concepts < 1:
        raise ValueError(f"num_concepts must be >= 1, got {num_concepts}")
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    c_beta = math.floor(num_classes * beta + 1e-9)  # tolerance: 100·0.29 must give 29, not 28
    m = min(c_beta + 1, num_classes)
    y = np.arange(num_classes)
    maps = np.tile(y, (num_concepts, 1))
    for c in range(num_concepts):
        maps[c, :m] = (y[:m] + c) % m
    return maps.astype(np.int64)


def shift_label_map(num_classes: int, shift: int) -> np.ndarray:
    """Cyclic label shift y → (y + shift) mod C, one map of shape [C] (CFL-GP paper App. F.7: (y + 5) mod 10).

    Stack it with the identity for a two-concept setting: ``np.stack([np.arange(C), shift_label_map(C, 5)])``.
    """
    _check_classes(num_classes)
    return ((np.arange(num_classes) + int(shift)) % num_classes).astype(np.int64)


def permutation_label_maps(perms: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """Validate user-given label permutations (CFL-GP paper App. F.7 "label permutation", generalised).

    Accepts one permutation (1-D) or several (2-D); returns [concepts, classes] ``int64``.
    Raises ValueError unless every row is a permutation of 0..C−1.
    """
    maps = np.asarray(perms)
    if maps.ndim == 1:
        maps = maps[None, :]
    if maps.ndim != 2 or maps.shape[1] == 0 or maps.shape[0] == 0:
        raise ValueError(f"label maps must be a non-empty [concepts, classes] array, got shape {maps.shape}")
    if not np.issubdtype(maps.dtype, np.integer) and not np.all(np.mod(maps, 1) == 0):
        raise ValueError("label maps must hold integers")
    maps = maps.astype(np.int64)
    ref = np.arange(maps.shape[1])
    for c, row in enumerate(maps):
        if not np.array_equal(np.sort(row), ref):
            raise ValueError(f"label map {c} is not a permutation of 0..{maps.shape[1] - 1}: {row.tolist()}")
    return maps


def apply_label_map(y: np.ndarray, maps: np.ndarray, concept_of_sample: np.ndarray | int) -> np.ndarray:
    """New labels ``maps[concept_of_sample, y]`` (HCFL paper §5.1, CFL-GP paper App. F.7, FedRC paper §5.1 concept
    shift).

    ``maps`` is [concepts, classes] (a single 1-D map is accepted); ``concept_of_sample`` is one
    concept id for all samples or one per sample.
    """
    y = np.asarray(y)
    maps = np.asarray(maps)
    if maps.ndim == 1:
        maps = maps[None, :]
    if maps.ndim != 2:
        raise ValueError(f"maps must be [concepts, classes], got shape {maps.shape}")
    concept = np.broadcast_to(np.asarray(concept_of_sample), y.shape)
    if y.size and (y.min() < 0 or y.max() >= maps.shape[1]):
        raise ValueError(f"labels must lie in [0, {maps.shape[1]}), got range [{y.min()}, {y.max()}]")
    if concept.size and (concept.min() < 0 or concept.max() >= maps.shape[0]):
        raise ValueError(f"concept ids must be in [0, {maps.shape[0]}), got {concept.min()}..{concept.max()}")
    return maps[concept, y].astype(np.int64)

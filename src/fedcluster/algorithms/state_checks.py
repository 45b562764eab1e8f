"""Checks of a method's saved values that the structural schema (:mod:`fedcluster.tracking.checkpoint_schema`)
cannot see: cluster positions inside the model stack, per-cluster lists one entry per cluster, counters that a run
of the checkpoint's rounds could have reached. Each returns None or one phrase naming the entry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def num_models(state: dict[str, Any]) -> int:
    """The number of cluster models of a state (the leading axis of its stacked weights; the schema check has
    made sure every weight has the same)."""
    return int(next(iter(state["models"].values())).shape[0])


def integers_within(value: Any, name: str, low: int, high: int) -> str | None:
    """``value`` (an array, tensor or list) holds integers only, each in [low, high]."""
    if isinstance(value, list | tuple):
        if not all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) for v in value):
            return f"algorithm.{name} holds values that are not integers"
        values = np.asarray(value, dtype=np.int64)
    else:
        values = value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if values.dtype.kind not in "iu":
            return f"algorithm.{name} holds values that are not integers"
    if values.size and (values.min() < low or values.max() > high):
        return f"algorithm.{name} holds values outside [{low}, {high}] (from {values.min()} to {values.max()})"
    return None


def one_per_cluster(value: Any, name: str, k: int) -> str | None:
    """``value`` is a list with one entry per cluster model."""
    if not isinstance(value, list | tuple) or len(value) != k:
        got = len(value) if isinstance(value, list | tuple) else type(value).__name__
        return f"algorithm.{name} has {got} entries; the checkpoint has {k} cluster models"
    return None


def finite_non_negative(values: Sequence[Any] | np.ndarray, name: str) -> str | None:
    """Every number of ``values`` is finite and ≥ 0."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return f"algorithm.{name} holds values that are not numbers"
    if not np.isfinite(array).all() or (array < 0).any():
        return f"algorithm.{name} holds non-finite or negative values"
    return None


def all_bools(values: Any, name: str) -> str | None:
    if not all(isinstance(v, bool | np.bool_) for v in values):
        return f"algorithm.{name} holds values that are not true/false"
    return None


def first_problem(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)

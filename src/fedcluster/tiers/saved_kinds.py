"""What a method's saved field may hold, declared once with the field (a method's ``saved`` maps each attribute
to its :class:`Kind`) and checked on resume before anything of a checkpoint is used.

The structural schema (:mod:`fedcluster.tracking.checkpoint_schema`) compares keys, kinds of value, dtypes and the
axes the data fix; a kind checks the values: cluster positions inside the model stack, finite numbers, rows on
the simplex, non-negative counts at most the rounds run, true/false flags, a cluster book or random generator
state that can be read. A kind with ``cluster_axis`` also checks that this axis has one entry per cluster model.
Every check is one pass over the values (a resume stays fast); each returns None or one phrase naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Limits:
    """What a checkpoint's values are compared with: its number of cluster models ``k``, the ``rounds`` it has
    run, this run's ``clients`` and the stable ids of its cluster book (None without one)."""

    k: int
    rounds: int
    clients: int
    ids: tuple[int, ...] | None = None

    @staticmethod
    def of(state: Mapping[str, Any], rounds: int, clients: int) -> Limits:
        models = state.get("models")
        k = int(next(iter(models.values())).shape[0]) if isinstance(models, Mapping) and models else 0
        book = state.get("book")
        ids = None
        if isinstance(book, Mapping) and isinstance(book.get("ids"), list | tuple):
            ids = tuple(i for i in book["ids"] if isinstance(i, int) and not isinstance(i, bool))
        return Limits(k, rounds, clients, ids)


def numbers(value: Any) -> np.ndarray | None:
    """``value`` (a tensor, array, number or list of them) as one flat array of numbers; None when it holds
    anything else (text, true/false, mappings)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, bool | np.bool_) or value is None:
        return None
    if isinstance(value, list | tuple):
        if any(isinstance(v, bool | np.bool_ | str) for v in value):
            return None
        if all(isinstance(v, int | float | np.integer | np.floating) for v in value):
            try:
                return np.asarray(value).ravel() if value else np.zeros(0, dtype=np.int64)
            except OverflowError:  # an integer past 64 bits
                return np.asarray([float(v) for v in value])
        parts = [numbers(v) for v in value]
        if any(p is None for p in parts):
            return None
        return np.concatenate([np.ravel(p) for p in parts if p is not None])
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        return None
    return array.ravel()


def axis_size(value: Any, axis: int) -> int | None:
    """The size of ``axis`` of ``value`` (a list: its length along axis 0), None when it has no such axis."""
    if isinstance(value, list | tuple):
        return len(value) if axis == 0 else None
    shape = getattr(value, "shape", None)
    return int(shape[axis]) if shape is not None and len(shape) > axis else None


class Kind:
    """What one saved field may hold. ``cluster_axis``: the axis with one entry per cluster model (None: none)."""

    cluster_axis: int | None = None
    checked_first = False  # other fields' checks read this one (the cluster book's ids)

    @property
    def what(self) -> str:
        """What the field holds, in words."""
        return "a value"

    def problem(self, value: Any, name: str, limits: Limits) -> str | None:
        """One phrase naming what is wrong with ``value`` (the field ``name``), None when nothing is; None is a
        field not kept yet (the schema refuses None where the run keeps a value)."""
        if value is None:
            return None
        if self.cluster_axis is not None and limits.k:
            size = axis_size(value, self.cluster_axis)
            if size is not None and size != limits.k:
                return (f"algorithm.{name} has {size} entries along its cluster axis; the checkpoint has {limits.k} "
                        "cluster models")
        return self.value_problem(value, f"algorithm.{name}", limits)

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Weights(Kind):
    """Model weights keyed by parameter name (the cluster models, personal or global models); the schema checks
    every tensor stored under a parameter name for the model's shape and finite values."""

    what = "model weights"

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        if not isinstance(value, Mapping) or not all(isinstance(v, torch.Tensor) for v in value.values()):
            return f"{name} is not a mapping of weight tensors"
        return None


@dataclass(frozen=True)
class Reals(Kind):
    """Finite numbers in [low, high] (``nan_ok``: NaN marks "not yet")."""

    low: float = -math.inf
    high: float = math.inf
    nan_ok: bool = False
    cluster_axis: int | None = None

    @property
    def what(self) -> str:
        return "finite numbers" + (f" in [{self.low:g}, {self.high:g}]" if math.isfinite(self.low) or
                                   math.isfinite(self.high) else "")

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        array = numbers(value)
        if array is None:
            return f"{name} holds values that are not numbers"
        if array.dtype.kind == "f":
            known = array[~np.isnan(array)] if self.nan_ok else array
            if not np.isfinite(known).all():
                return f"{name} holds non-finite values"
        else:
            known = array
        if known.size and (known.min() < self.low or known.max() > self.high):
            return (f"{name} holds values outside [{self.low:g}, {self.high:g}] (from {known.min():g} to "
                    f"{known.max():g})")
        return None


def non_negative(cluster_axis: int | None = None) -> Reals:
    return Reals(low=0.0, cluster_axis=cluster_axis)


@dataclass(frozen=True)
class Rows(Kind):
    """A matrix whose rows lie on the simplex: finite, ≥ 0, each summing to one (client or sample weights over
    the clusters, a label distribution)."""

    cluster_axis: int | None = None
    tolerance: float = 1e-3  # float32 rows over many clusters
    what = "rows of non-negative weights that sum to one"

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        if (problem := Reals(low=0.0).value_problem(value, name, limits)) is not None:
            return problem
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if array.ndim != 2:
            return f"{name} has {array.ndim} dimensions, not rows"
        sums = array.sum(1, dtype=np.float64)
        if sums.size and np.abs(sums - 1).max() > self.tolerance:
            row = int(np.abs(sums - 1).argmax())
            return f"{name} has rows that do not sum to one (row {row} sums to {sums[row]:g})"
        return None


def _integers(value: Any) -> np.ndarray | None:
    array = numbers(value)
    if array is None:
        return None
    if array.dtype.kind == "f":
        return None
    return array.astype(np.int64)


@dataclass(frozen=True)
class Positions(Kind):
    """Integers naming a cluster position (``of="clusters"``: 0..K−1) or a client (``of="clients"``: 0..M−1);
    ``unassigned``: −1 (not assigned yet) too."""

    of: str = "clusters"
    unassigned: bool = False
    cluster_axis: int | None = None

    @property
    def what(self) -> str:
        return f"{'cluster positions' if self.of == 'clusters' else 'client indices'}" + \
            (" or −1" if self.unassigned else "")

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        array = _integers(value)
        if array is None:
            return f"{name} holds values that are not integers"
        low, high = (-1 if self.unassigned else 0), (limits.k if self.of == "clusters" else limits.clients) - 1
        if array.size and (array.min() < low or array.max() > high):
            what = "cluster models" if self.of == "clusters" else "clients"
            return (f"{name} holds values outside [{low}, {high}] (from {array.min()} to {array.max()}; the "
                    f"checkpoint has {high + 1} {what})")
        return None


@dataclass(frozen=True)
class Counts(Kind):
    """Non-negative integers; ``at_most_rounds``: at most the rounds the checkpoint has run."""

    at_most_rounds: bool = False
    cluster_axis: int | None = None

    @property
    def what(self) -> str:
        return "non-negative integers" + (" up to the rounds run" if self.at_most_rounds else "")

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        array = _integers(value)
        if array is None:
            return f"{name} holds values that are not integers"
        high = limits.rounds if self.at_most_rounds else np.iinfo(np.int64).max
        if array.size and (array.min() < 0 or array.max() > high):
            bound = f", {high}] (the rounds run)" if self.at_most_rounds else ", ∞)"
            return f"{name} holds values outside [0{bound} (from {array.min()} to {array.max()})"
        return None


@dataclass(frozen=True)
class Flags(Kind):
    """true/false values (one, or an array or list of them)."""

    cluster_axis: int | None = None
    what = "true/false values"

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        if isinstance(value, bool | np.bool_):
            return None
        if isinstance(value, np.ndarray | torch.Tensor):
            if value.dtype in (np.bool_, torch.bool):
                return None
        elif isinstance(value, list | tuple) and all(isinstance(v, bool | np.bool_) for v in value):
            return None
        return f"{name} holds values that are not true/false"


@dataclass(frozen=True)
class StableId(Kind):
    """A cluster's stable id (or None once it is gone): one of the ids of the checkpoint's cluster book."""

    what = "a stable cluster id of the cluster book"

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
            return f"{name} is not a cluster id"
        if limits.ids is not None and int(value) not in limits.ids:
            return f"{name} is {value}, not one of the cluster book's ids {list(limits.ids)[:5]}"
        return None


@dataclass(frozen=True)
class Book(Kind):
    """A cluster book (stable ids and the log of splits, merges and removals) as plain data: one distinct id per
    cluster model, each below its next id, and events it can read."""

    what = "a cluster book"
    checked_first = True

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        from fedcluster.tiers.cluster_book import ClusterBook

        try:
            book = ClusterBook.from_state(value)
        except (KeyError, TypeError, ValueError, AttributeError):
            return f"{name} (the clusters' ids and events) cannot be read"
        ids, k = book.ids, limits.k
        if len(ids) != k or len(set(ids)) != k or min(ids, default=0) < 0 or max(ids, default=-1) >= book.next_id:
            return f"{name}.ids {ids[:5]} are not {k} distinct cluster ids below next_id {book.next_id}"
        return None


@dataclass(frozen=True)
class RandomState(Kind):
    """The position of a NumPy random generator (PCG64), as ``bit_generator.state`` gives it."""

    what = "a random generator's state"

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        probe = np.random.PCG64()
        try:
            if not isinstance(value, Mapping) or value.get("bit_generator") != "PCG64":
                raise TypeError
            state = value.get("state")
            if not isinstance(state, Mapping) or not all(isinstance(state.get(k), int) and 0 <= state[k] < 2**128
                                                         for k in ("state", "inc")):
                raise ValueError
            setattr(probe, "state", dict(value))  # noqa: B010 - numpy types the state as its own TypedDict
        except (TypeError, ValueError, KeyError, OverflowError):
            return f"{name} is not a random generator state"
        return None


@dataclass(frozen=True)
class InputStatistics(Kind):
    """γ-weighted input statistics (Σγ, Σγx, Σγx²: ``s0`` ≥ 0, ``s1`` finite, ``s2`` ≥ 0, one row per cluster);
    ``per_client``: a mapping of client index to such statistics."""

    per_client: bool = False
    what = "input statistics"

    def value_problem(self, value: Any, name: str, limits: Limits) -> str | None:
        if not self.per_client:
            return self._one(value, name, limits)
        if not isinstance(value, Mapping):
            return f"{name} is not a mapping of clients to statistics"
        for client, stats in value.items():
            if not isinstance(client, int | np.integer) or not 0 <= int(client) < limits.clients:
                return f"{name} names client {client!r}; this run has {limits.clients} clients"
            if (problem := self._one(stats, f"{name}[{client}]", limits)) is not None:
                return problem
        return None

    def _one(self, stats: Any, name: str, limits: Limits) -> str | None:
        parts = vars(stats) if hasattr(stats, "__dict__") else stats
        if not isinstance(parts, Mapping) or not {"s0", "s1", "s2"} <= set(parts):
            return f"{name} is not input statistics"
        for key, kind in (("s0", non_negative(0)), ("s1", Reals(cluster_axis=0)), ("s2", non_negative(0))):
            if (problem := kind.problem(parts[key], f"{name.removeprefix('algorithm.')}.{key}", limits)) is not None:
                return problem
        return None


def first_problem(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)


def kinds_problem(state: Mapping[str, Any], kinds: Mapping[str, Kind], limits: Limits) -> str | None:
    """The first field of ``state`` whose value its kind refuses (fields ``state`` lacks are left to the schema)."""
    for name, kind in sorted(kinds.items(), key=lambda item: not item[1].checked_first):
        if name in state and (problem := kind.problem(state[name], name, limits)) is not None:
            return problem
    return None


def num_models(state: Mapping[str, Any]) -> int:
    """The number of cluster models of a saved state (the leading axis of its stacked weights; the schema check
    has made sure every weight has the same)."""
    return int(next(iter(state["models"].values())).shape[0])

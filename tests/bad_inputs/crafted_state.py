"""Bad values for every saved field of a method, made from the field's declared kind
(:mod:`fedcluster.tiers.saved_kinds`) and its value in a real checkpoint: what a hand-edited checkpoint with a
valid checksum could hold. Used by tests/tiers/test_saved_kinds.py and the bad-input net."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from fedcluster.tiers import saved_kinds as kinds

Crafts = list[tuple[str, Any]]  # (label, the bad value)


def filled(value: Any, x: float | int | bool) -> Any:
    """``value`` (tensor, array, list or number) with every entry ``x``, its type and shape kept; None where
    ``x`` cannot be held (NaN in an integer array)."""
    integral = isinstance(x, int) and not isinstance(x, bool)
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() and not integral:
            return None
        return torch.full_like(value, x)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "f" and not (integral and value.dtype.kind in "iu"):
            return None
        return np.full_like(value, x)
    if isinstance(value, list | tuple):
        return [filled(v, x) if isinstance(v, np.ndarray | torch.Tensor | list) else x for v in value] or [x]
    return x


def one_more(value: Any, axis: int) -> Any:
    """``value`` with one more entry along ``axis`` (a copy of its first); None when it has none."""
    if isinstance(value, list | tuple):
        return [*value, value[0]] if value and axis == 0 else None
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim > axis and value.shape[axis]:
        first = value.narrow(axis, 0, 1) if isinstance(value, torch.Tensor) else np.take(value, [0], axis)
        return torch.cat([value, first], axis) if isinstance(value, torch.Tensor) else np.concatenate([value, first],
                                                                                                       axis)
    return None


def _reals(kind: kinds.Reals, value: Any, rounds: int) -> Crafts:
    out = [("NaN", filled(value, float("nan")))] if not kind.nan_ok else []
    out += [("infinite", filled(value, float("inf")))]
    if np.isfinite(kind.low):
        out.append(("below its low end", filled(value, kind.low - 1.0)))
    if np.isfinite(kind.high):
        out.append(("above its high end", filled(value, kind.high + 1.0)))
    return out


def _rows(kind: kinds.Rows, value: Any, rounds: int) -> Crafts:
    return [("NaN", filled(value, float("nan"))), ("negative", filled(value, -0.5)),
            ("rows summing to two", None if value is None else value * 2)]


def _positions(kind: kinds.Positions, value: Any, rounds: int) -> Crafts:
    out = [("10^6", filled(value, 10**6)), ("-2", filled(value, -2))]
    return out if kind.unassigned else [*out, ("-1", filled(value, -1))]


def _counts(kind: kinds.Counts, value: Any, rounds: int) -> Crafts:
    out = [("-1", filled(value, -1))]
    return [*out, ("past the rounds run", filled(value, rounds + 1000))] if kind.at_most_rounds else out


def _flags(kind: kinds.Flags, value: Any, rounds: int) -> Crafts:
    if isinstance(value, np.ndarray):
        return [("integers", value.astype(np.int8))]
    return [("integers", filled(value, 1))]


def _book(kind: kinds.Book, value: Any, rounds: int) -> Crafts:
    if not isinstance(value, dict):
        return []
    return [("ids 999", {**value, "ids": [999] * len(value["ids"])}),
            ("one id short", {**value, "ids": value["ids"][:-1]}), ("events unreadable", {**value, "events": [7]})]


def _random_state(kind: kinds.RandomState, value: Any, rounds: int) -> Crafts:
    if not isinstance(value, dict):
        return []
    return [("another generator", {**value, "bit_generator": "MT19937"}),
            ("a negative position", {**value, "state": {**value["state"], "state": -1}})]


def _statistics(kind: kinds.InputStatistics, value: Any, rounds: int) -> Crafts:
    if value is None or (kind.per_client and not value):
        return []
    if kind.per_client:
        first = next(iter(value.values()))
        return [("a client past the federation", {**value, 10**6: first}),
                ("negative weights", {c: _negative_s0(s) for c, s in value.items()})]
    return [("negative weights", _negative_s0(value))]


def _negative_s0(stats: Any) -> Any:
    bad = copy.deepcopy(stats)
    bad.s0 = np.full_like(bad.s0, -1.0)
    return bad


def _weights(kind: kinds.Weights, value: Any, rounds: int) -> Crafts:
    if not isinstance(value, dict) or not value:
        return []
    name = next(iter(value))
    return [("NaN weights", {**value, name: filled(value[name], float("nan"))})]


BY_KIND: dict[type[kinds.Kind], Callable[[Any, Any, int], Crafts]] = {
    kinds.Reals: _reals, kinds.Rows: _rows, kinds.Positions: _positions, kinds.Counts: _counts, kinds.Flags: _flags,
    kinds.Book: _book, kinds.RandomState: _random_state, kinds.InputStatistics: _statistics,
    kinds.Weights: _weights, kinds.StableId: lambda kind, value, rounds: [("999", 999), ("-1", -1)],
}


def crafts(kind: kinds.Kind, value: Any, rounds: int) -> Crafts:
    """The bad values of a field of ``kind`` whose good value is ``value`` in a checkpoint of ``rounds`` rounds:
    text always, the kind's own (from :data:`BY_KIND`), one entry too many along its cluster axis."""
    if type(kind) not in BY_KIND:
        raise KeyError(f"no crafted values for the kind {type(kind).__name__}: add them to BY_KIND")
    out: Crafts = [("text", "x")]
    if value is not None:
        out += BY_KIND[type(kind)](kind, value, rounds)
        if kind.cluster_axis is not None:
            out.append(("one entry too many along the cluster axis", one_more(value, kind.cluster_axis)))
    return [(label, bad) for label, bad in out if bad is not None]

"""A checkpoint's structure checked against the run it would resume, before anything of it is used.

The SHA-256 of a state file proves that the file is the one written, not that it holds what this run needs:
whoever can write the file can recompute it, and another version or algorithm writes another structure.
:func:`check_algorithm_state` compares the loaded algorithm state with the state a freshly built algorithm of
the same configuration has (its *template*): the same keys (none missing, none foreign), the same kinds of
value (tensor, array, number, text, mapping, list), the same dtypes and numbers of dimensions; every model
weight (a tensor stored under a parameter name of the model) ends with that parameter's shape. Sizes that a
run may change (the number of clusters, lists that grow) are not compared.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from fedcluster.errors import UserError

OPTIONAL_KEYS = frozenset({"estimated"})  # absent from older checkpoints; the algorithm supplies a default


class CheckpointSchemaError(UserError):
    """A checkpoint whose structure does not fit the run (valid checksum, wrong content)."""


def check_algorithm_state(state: Any, template: Any, param_shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """Raise :class:`CheckpointSchemaError` (one line naming the entry) unless ``state`` fits ``template``."""
    problem = _mismatch(state, template, param_shapes, "algorithm", None)
    if problem is not None:
        raise CheckpointSchemaError(f"checkpoint {where} does not fit this run: {problem}; it was not loaded (it "
                                    "is from another algorithm or version, or was modified): start the run again "
                                    "with another out=")


def _kind(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return "tensor"
    if isinstance(x, np.ndarray):
        return "array"
    if isinstance(x, bool | np.bool_):
        return "bool"
    if isinstance(x, int | np.integer):
        return "integer"
    if isinstance(x, float | np.floating):
        return "number"
    if isinstance(x, str):
        return "text"
    if x is None:
        return "none"
    if isinstance(x, dict):
        return "mapping"
    if isinstance(x, list | tuple):
        return "list"
    if dataclasses.is_dataclass(x):
        return type(x).__name__
    return type(x).__name__


def _mismatch(value: Any, template: Any, shapes: dict[str, tuple[int, ...]], name: str,
              key: str | None) -> str | None:
    got, want = _kind(value), _kind(template)
    if "none" in (got, want):  # optional entries (set later in a run, or cleared)
        return None
    if got == "integer" and want == "number":
        got = "number"
    if got != want:
        return f"{name} is a {got}, expected a {want}"
    if got == "number" and not math.isfinite(float(value)) and math.isfinite(float(template)):
        return f"{name} is {value}, not a finite number"
    if got in ("tensor", "array"):
        return _array_mismatch(value, template, shapes, name, key)
    if got == "mapping":
        return _mapping_mismatch(value, template, shapes, name)
    if dataclasses.is_dataclass(value):
        return _mapping_mismatch(vars(value), vars(template), shapes, name)
    if got == "list" and template and all(_kind(t) in ("tensor", "array") for t in template):
        for i, v in enumerate(value):
            if (problem := _mismatch(v, template[0], shapes, f"{name}[{i}]", key)) is not None:
                return problem
    return None


def _mapping_mismatch(value: dict[Any, Any], template: dict[Any, Any], shapes: dict[str, tuple[int, ...]],
                      name: str) -> str | None:
    if not all(isinstance(k, str) for k in template):  # keyed by data (cluster ids, ...): values not compared
        return None
    missing = [k for k in template if k not in value and k not in OPTIONAL_KEYS]
    if missing:
        return f"{name} lacks {', '.join(map(repr, missing[:3]))}"
    foreign = [k for k in value if k not in template and k not in OPTIONAL_KEYS]
    if foreign:
        return f"{name} holds unknown entries {', '.join(map(repr, foreign[:3]))}"
    for k, v in value.items():
        if k in template and (problem := _mismatch(v, template[k], shapes, f"{name}.{k}", k)) is not None:
            return problem
    return None


def _array_mismatch(value: Any, template: Any, shapes: dict[str, tuple[int, ...]], name: str,
                    key: str | None) -> str | None:
    if value.dtype != template.dtype:
        return f"{name} has dtype {value.dtype}, expected {template.dtype}"
    if value.ndim != template.ndim:
        return f"{name} has {value.ndim} dimensions, expected {template.ndim}"
    if key in shapes:  # a model weight: the parameter's shape, finite values
        want = tuple(shapes[key])
        if value.ndim < len(want) or tuple(value.shape[value.ndim - len(want):]) != want:
            return f"{name} has shape {list(value.shape)}; the model's {key} is {list(want)}"
        finite = torch.isfinite(value).all() if isinstance(value, torch.Tensor) else np.isfinite(value).all()
        if not bool(finite):
            return f"{name} holds non-finite weights"
    return None


def check_header(state: Any, where: str) -> None:
    """The checkpoint's top level: a mapping with ``round`` (≥ 0), ``elapsed``
    (seconds ≥ 0), ``config`` and ``algorithm`` (mappings) and optionally ``rows`` (the rounds' numbers)."""
    def refuse(problem: str) -> CheckpointSchemaError:
        return CheckpointSchemaError(f"checkpoint {where} {problem}; it was not loaded (it is from another version "
                                     "or was modified): start the run again with another out=")

    if not isinstance(state, dict):
        raise refuse(f"holds a {_kind(state)}, not a checkpoint")
    for key in ("round", "elapsed", "config", "algorithm"):
        if key not in state:
            raise refuse(f"has no {key!r} entry")
    r = state["round"]
    if _kind(r) != "integer" or r < 0:
        raise refuse(f"names round {r!r}, not a round number")
    e = state["elapsed"]
    if _kind(e) not in ("integer", "number") or not math.isfinite(e) or e < 0:
        raise refuse(f"names {e!r} elapsed seconds")
    for key in ("config", "algorithm"):
        if not isinstance(state[key], dict):
            raise refuse(f"has a {key!r} entry that is a {_kind(state[key])}, not a mapping")
    rows = state.get("rows")
    if rows is not None and not (isinstance(rows, list) and len(rows) == r and all(
            isinstance(row, dict) and all(isinstance(k, str) and _kind(v) in ("integer", "number") for k, v in
                                          row.items()) for row in rows)):
        raise refuse(f"has 'rows' that are not {r} rounds of numbers")

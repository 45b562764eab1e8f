"""A checkpoint's structure checked against the run it would resume, before anything of it is used.

The SHA-256 of a state file proves that the file is the one written, not that it holds what this run needs:
whoever can write the file can recompute it, and another version or algorithm writes another structure.
:func:`check_algorithm_state` compares the loaded algorithm state with the state a freshly built algorithm of
the same configuration has (its *template*): the same keys (none missing, none foreign), the same kinds of
value (tensor, array, number, text, mapping, list), the same dtypes and numbers of dimensions; every model
weight (a tensor stored under a parameter name of the model) ends with that parameter's shape. An entry the
template holds as a tensor, array, mapping or list may not be empty (None). The number of cluster models is at
least 1 and, for a method whose number of clusters is fixed, the run's; Ω has a finite, non-negative row per
client and a column per cluster model. Axes sized by the data (clients, training samples, classes) keep their
size; sizes that a run may change (the clusters of a method that splits, lists that grow) are not compared.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fedcluster.errors import UserError

OPTIONAL_KEYS = frozenset({"estimated"})  # absent from older checkpoints; the algorithm supplies a default


class CheckpointSchemaError(UserError):
    """A checkpoint whose structure does not fit the run (valid checksum, wrong content)."""


@dataclass(frozen=True)
class _Rules:
    """What an entry is compared with besides its template: the model's parameter shapes, the sizes the data fix
    (every axis of the template of one of these sizes keeps it) and the template's number of clusters ``k``."""

    shapes: dict[str, tuple[int, ...]]
    sizes: frozenset[int] = field(default_factory=frozenset)
    k: int = 0
    fixed_k: bool = False


def check_algorithm_state(state: Any, template: Any, param_shapes: dict[str, tuple[int, ...]], where: str,
                          data_sizes: tuple[int, ...] = (), fixed_clusters: bool = False) -> None:
    """Raise :class:`CheckpointSchemaError` (one line naming the entry) unless ``state`` fits ``template``.
    ``data_sizes``: the data's sizes (clients, training samples, classes); ``fixed_clusters``: the method never
    changes its number of clusters (the checkpoint must then hold the template's)."""
    k = _num_models(template)
    rules = _Rules(param_shapes, frozenset(data_sizes) - ({k} if not fixed_clusters else set()), k or 0,
                   fixed_clusters)
    problem = _mismatch(state, template, rules, "algorithm", None) or _cluster_problem(state, template, rules)
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


def _num_models(state: Any) -> int | None:
    """The number of cluster models of an algorithm state (the leading axis of its stacked weights), if it has."""
    models = state.get("models") if isinstance(state, dict) else None
    if not isinstance(models, dict) or not models:
        return None
    leading = {int(v.shape[0]) if isinstance(v, torch.Tensor) and v.ndim else -1 for v in models.values()}
    return leading.pop() if len(leading) == 1 else -1


def _cluster_problem(state: Any, template: Any, rules: _Rules) -> str | None:
    """The number of cluster models and Ω compared with the run's (see the module docstring)."""
    k = _num_models(state)
    if k is not None and _num_models(template) is not None:
        if k < 1:
            return "algorithm.models holds no cluster model" if k == 0 else \
                "algorithm.models holds weights of different numbers of clusters"
        if rules.fixed_k and k != rules.k:
            return f"algorithm.models holds {k} cluster models; this run has {rules.k}"
    omega, want = state.get("omega"), template.get("omega") if isinstance(template, dict) else None
    if isinstance(omega, np.ndarray | torch.Tensor) and isinstance(want, np.ndarray | torch.Tensor):
        omega = np.asarray(omega.cpu() if isinstance(omega, torch.Tensor) else omega, dtype=np.float64)
        if omega.ndim != 2 or omega.shape[0] != want.shape[0] or (k is not None and omega.shape[1] != k):
            return (f"algorithm.omega has shape {list(omega.shape)}; this run has {want.shape[0]} clients"
                    + (f" and the checkpoint {k} cluster models" if k is not None else ""))
        if not np.isfinite(omega).all() or (omega < 0).any():
            return "algorithm.omega (the clients' cluster weights) holds non-finite or negative values"
    return None


def _mismatch(value: Any, template: Any, rules: _Rules, name: str, key: str | None) -> str | None:
    got, want = _kind(value), _kind(template)
    if got == "none" and want in ("tensor", "array", "mapping", "list"):
        return f"{name} is empty (None), expected a {want}"
    if "none" in (got, want):  # optional entries (set later in a run)
        return None
    if got == "integer" and want == "number":
        got = "number"
    if got != want:
        return f"{name} is a {got}, expected a {want}"
    if got == "number" and not math.isfinite(float(value)) and math.isfinite(float(template)):
        return f"{name} is {value}, not a finite number"
    if got in ("tensor", "array"):
        return _array_mismatch(value, template, rules, name, key)
    if got == "mapping":
        return _mapping_mismatch(value, template, rules, name)
    if dataclasses.is_dataclass(value):
        return _mapping_mismatch(vars(value), vars(template), rules, name)
    if got == "list" and template and all(_kind(t) in ("tensor", "array") for t in template):
        # a list of arrays is one entry per cluster or member group (e.g. FedGWC's interaction matrices, sized by
        # each cluster's members): kinds, dtypes and dimensions are compared, not data-sized axes
        per_item = dataclasses.replace(rules, sizes=frozenset())
        for i, v in enumerate(value):
            if (problem := _mismatch(v, template[0], per_item, f"{name}[{i}]", key)) is not None:
                return problem
    return None


def _mapping_mismatch(value: dict[Any, Any], template: dict[Any, Any], rules: _Rules, name: str) -> str | None:
    if not all(isinstance(k, str) for k in template):  # keyed by data (cluster ids, ...): values not compared
        return None
    missing = [k for k in template if k not in value and k not in OPTIONAL_KEYS]
    if missing:
        return f"{name} lacks {', '.join(map(repr, missing[:3]))}"
    foreign = [k for k in value if k not in template and k not in OPTIONAL_KEYS]
    if foreign:
        return f"{name} holds unknown entries {', '.join(map(repr, foreign[:3]))}"
    for k, v in value.items():
        if k in template and (problem := _mismatch(v, template[k], rules, f"{name}.{k}", k)) is not None:
            return problem
    return None


def _array_mismatch(value: Any, template: Any, rules: _Rules, name: str, key: str | None) -> str | None:
    shapes = rules.shapes
    if value.dtype != template.dtype:
        return f"{name} has dtype {value.dtype}, expected {template.dtype}"
    if value.ndim != template.ndim:
        return f"{name} has {value.ndim} dimensions, expected {template.ndim}"
    for got, want in zip(value.shape, template.shape, strict=True):
        fixed = want in rules.sizes or (rules.fixed_k and want == rules.k and rules.k > 0)
        if fixed and got != want and key not in shapes:  # a model weight: checked against the parameter below
            return f"{name} has shape {list(value.shape)}, expected {list(template.shape)} (sized by this run)"
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

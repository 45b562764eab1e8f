"""Parameters as ``{name: tensor}`` dicts; a *stack* carries a leading unit dimension."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedcluster.models.param_dict import Params as Params  # re-exported: the engine and the methods name it here


def get_params(module: nn.Module) -> Params:
    return {k: v.detach().clone() for k, v in module.named_parameters()}


def stack(items: list[Params]) -> Params:
    return {k: torch.stack([p[k] for p in items]) for k in items[0]}


def unstack(stacked: Params) -> list[Params]:
    n = len(next(iter(stacked.values())))
    return [{k: v[i] for k, v in stacked.items()} for i in range(n)]


def select(stacked: Params, index: torch.Tensor | np.ndarray | list[int]) -> Params:
    idx = torch.as_tensor(index, dtype=torch.long, device=next(iter(stacked.values())).device)
    return {k: v.index_select(0, idx) for k, v in stacked.items()}


def repeat(params: Params, n: int) -> Params:
    """``n`` copies of one parameter set as a stack."""
    return {k: v.unsqueeze(0).expand(n, *v.shape).clone() for k, v in params.items()}


def num_units(stacked: Params) -> int:
    return len(next(iter(stacked.values())))


def flatten(stacked: Params) -> torch.Tensor:
    """[units, total parameters] view of a stack (for distances between models)."""
    return torch.cat([v.reshape(len(v), -1) for v in stacked.values()], dim=1)


def num_bytes(params: Params) -> int:
    """Payload size of one parameter set (not a stack)."""
    return sum(v.numel() * v.element_size() for v in params.values())


def subset(params: Params, prefix: str) -> Params:
    return {k: v for k, v in params.items() if k.startswith(prefix)}


def distances(local: Params, centres: Params, chunk: int = 8) -> torch.Tensor:
    """[m, K] Euclidean distances ‖θ_i − θ_k‖ between two stacks (exact differences, chunked over m)."""
    names = list(centres)
    out = torch.zeros(num_units(local), num_units(centres), dtype=torch.float64, device=centres[names[0]].device)
    for i in range(0, num_units(local), chunk):
        sq: torch.Tensor | None = None
        for n in names:
            a = local[n][i:i + chunk].reshape(-1, 1, centres[n][0].numel()).double()
            part = (a - centres[n].reshape(1, len(centres[n]), -1).double()).square().sum(-1)
            sq = part if sq is None else sq + part
        assert sq is not None
        out[i:i + chunk] = sq.sqrt()
    return out


def state_bytes(state: object) -> int:
    """Bytes of every tensor and NumPy array inside a nested state (dicts, lists, tuples)."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, np.ndarray):
        return state.nbytes
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, list | tuple):
        return sum(state_bytes(v) for v in state)
    return 0

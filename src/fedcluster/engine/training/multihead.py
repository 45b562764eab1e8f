"""A shared feature extractor with K heads, trained as one unit (HCFL+ / FedRC Table 11, ``split=true``).

A unit is one client: its loss is Σ_k Σ_j γ_{j;k} ℓ(head_k(body(x_j)), y_j) / |batch|, so head k gets
the γ_{·;k}-weighted gradient (HCFL paper eq. 6) and the body the sum over k (HCFL paper eq. 7) in one vectorised pass.
The trainer weights such units with [n_i, K] arrays; the loss below returns [batch, K].
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from fedcluster.engine.params import Params
from fedcluster.models.base import SplitModel


class MultiHead(nn.Module):
    """``forward(x)`` = [batch, K, out]: the K heads on one shared ``body(x)``."""

    def __init__(self, model: SplitModel, k: int) -> None:
        super().__init__()
        self.body = copy.deepcopy(model.body)
        self.heads = nn.ModuleList([copy.deepcopy(model.head) for _ in range(k)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.body(x)
        return torch.stack([h(z) for h in self.heads], 1)


class MultiHeadLoss:
    """Per-(sample, head) loss [batch, K] (picklable, for the process pool)."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = out.float()  # bf16 autocast outputs: the loss is computed in fp32
        if self.task == "classification":
            return F.cross_entropy(out.transpose(1, 2), y.unsqueeze(1).expand(-1, out.shape[1]), reduction="none")
        return (out.squeeze(-1) - y.unsqueeze(1)) ** 2


def pack(models: Params) -> Params:
    """K stacked SplitModel parameter sets (shared body) → one MultiHead parameter set."""
    out = {k: v[0] for k, v in models.items() if k.startswith("body.")}
    for name, v in models.items():
        if name.startswith("head."):
            for k in range(len(v)):
                out[f"heads.{k}.{name[5:]}"] = v[k]
    return out


def unpack(stacked: Params, k: int) -> tuple[Params, Params]:
    """Stacked MultiHead parameters [m, ...] → (bodies [m, ...] as ``body.*``, heads [m, K, ...] as ``head.*``)."""
    bodies = {n: v for n, v in stacked.items() if n.startswith("body.")}
    names = sorted({n.split(".", 2)[2] for n in stacked if n.startswith("heads.")})
    heads = {f"head.{n}": torch.stack([stacked[f"heads.{j}.{n}"] for j in range(k)], 1) for n in names}
    return bodies, heads

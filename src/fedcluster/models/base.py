"""The body/head split every model follows, and the model factory."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from fedcluster.catalog.registry import MODELS
from fedcluster.config.run_config import build_params


class SplitModel(nn.Module):
    """``forward(x) = head(body(x))``; parameter names start with ``body.`` or ``head.``."""

    def __init__(self, body: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class GlobalMeanPool(nn.Module):
    """The mean over H and W, keeping them as 1 × 1 (what ``nn.AdaptiveAvgPool2d(1)`` gives, bit for bit on the
    CPU): a plain reduction has a deterministic CUDA backward, ``AdaptiveAvgPool2d``'s has none."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean((-2, -1), keepdim=True)


def flat_dim(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def build_model(name: str, input_shape: tuple[int, ...], output_dim: int, params: Any = None) -> SplitModel:
    """Build a registered model for inputs of ``input_shape`` and ``output_dim`` outputs."""
    entry = MODELS.get(name)
    if params is None or isinstance(params, dict):
        params = build_params(entry.params, params or {}, "model", name)
    return entry.obj(tuple(input_shape), output_dim, params)

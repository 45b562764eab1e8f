"""ResNet-18 for CIFAR-size images (HCFL paper/CFL-GP paper), with GroupNorm instead of BatchNorm.

He et al. 2016's ResNet-18 with the usual CIFAR stem (one 3×3 convolution, stride 1, no max-pool) and
GroupNorm (Wu & He 2018), which keeps no running statistics: a model is its parameters alone, so K
models per client vectorise with ``torch.func.vmap`` and average across clients like any other.
Body = everything up to the global average pool (512 features); head = the last linear layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from fedcluster.catalog.registry import MODELS
from fedcluster.errors import ConfigError
from fedcluster.models.base import GlobalMeanPool, SplitModel
from fedcluster.models.weights import load_weights


def group_norm(channels: int, groups: int) -> nn.GroupNorm:
    """GroupNorm with the largest group count <= ``groups`` that divides ``channels``."""
    return nn.GroupNorm(math.gcd(channels, groups), channels)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = group_norm(cout, groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = group_norm(cout, groups)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), group_norm(cout, groups))
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.norm1(self.conv1(x)))
        return self.relu(self.norm2(self.conv2(out)) + self.shortcut(x))


@dataclass
class ResNetParams:
    groups: int = 32  # GroupNorm groups (the largest divisor of each width up to this)
    weights: str | None = None  # a local state dict to start from (model.weights=PATH)

    def __post_init__(self) -> None:
        if self.groups < 1:
            raise ValueError("model.groups must be >= 1")


@MODELS.register("resnet18", "ResNet-18, CIFAR stem, GroupNorm (11.2M parameters on 3×32×32)", ResNetParams)
def resnet18(input_shape: tuple[int, ...], output_dim: int, params: ResNetParams) -> SplitModel:
    if len(input_shape) != 3:
        raise ConfigError(f"resnet18 needs image inputs [C,H,W], this dataset gives {list(input_shape)}")
    g = params.groups
    layers: list[nn.Module] = [nn.Conv2d(input_shape[0], 64, 3, 1, 1, bias=False), group_norm(64, g), nn.ReLU()]
    width = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(width, cout, stride, g), BasicBlock(cout, cout, 1, g)]
        width = cout
    layers += [GlobalMeanPool(), nn.Flatten()]
    model = SplitModel(nn.Sequential(*layers), nn.Linear(width, output_dim))
    if params.weights:
        load_weights(model, params.weights)
    return model

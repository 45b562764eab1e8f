"""MobileNet-V2 for CIFAR-size images (HCFL paper/FedRC paper), with GroupNorm instead of BatchNorm.

Sandler et al. 2018's inverted-residual network with the CIFAR stem used by FL code bases (3×3 stem
convolution with stride 1 and the first stride-2 stage at stride 1, so 32×32 inputs keep a 4×4 map at the
end) and GroupNorm, which has no running statistics (vmap-friendly, averages across clients).
Body = everything up to the global average pool (1280 features); head = the last linear layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedcluster.catalog.registry import MODELS
from fedcluster.errors import ConfigError
from fedcluster.models.base import GlobalMeanPool, SplitModel
from fedcluster.models.resnet import ResNetParams, group_norm
from fedcluster.models.weights import load_weights

# (expansion t, output channels c, repeats n, first stride s); CIFAR variant: stride 1 in the second stage
CIFAR_STAGES = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))


def conv_norm_act(cin: int, cout: int, kernel: int, stride: int, groups: int, conv_groups: int = 1,
                  act: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=conv_groups, bias=False),
                               group_norm(cout, groups)]
    return layers + [nn.ReLU6()] if act else layers


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, groups: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = conv_norm_act(cin, hidden, 1, 1, groups) if expand != 1 else []
        layers += conv_norm_act(hidden, hidden, 3, stride, groups, conv_groups=hidden)
        layers += conv_norm_act(hidden, cout, 1, 1, groups, act=False)
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.residual else self.block(x)


@dataclass
class MobileNetParams(ResNetParams):
    groups: int = 8  # narrower layers (16–24 channels) than ResNet's: fewer groups


@MODELS.register("mobilenet-v2", "MobileNet-V2, CIFAR stem, GroupNorm (2.2M parameters on 3×32×32)",
                 MobileNetParams)
def mobilenet_v2(input_shape: tuple[int, ...], output_dim: int, params: MobileNetParams) -> SplitModel:
    if len(input_shape) != 3:
        raise ConfigError(f"mobilenet-v2 needs image inputs [C,H,W], this dataset gives {list(input_shape)}")
    g = params.groups
    layers = conv_norm_act(input_shape[0], 32, 3, 1, g)
    width = 32
    for t, c, n, s in CIFAR_STAGES:
        for i in range(n):
            layers.append(InvertedResidual(width, c, s if i == 0 else 1, t, g))
            width = c
    layers += conv_norm_act(width, 1280, 1, 1, g) + [GlobalMeanPool(), nn.Flatten()]
    model = SplitModel(nn.Sequential(*layers), nn.Linear(1280, output_dim))
    if params.weights:
        load_weights(model, params.weights)
    return model

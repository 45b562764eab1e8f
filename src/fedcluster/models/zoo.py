"""The model zoo: logistic/linear regression, MLP, the FedAvg CNN and a light CNN."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import nn

from fedcluster.catalog.registry import MODELS
from fedcluster.errors import ConfigError
from fedcluster.models.base import SplitModel, flat_dim


@MODELS.register("logistic", "multinomial logistic regression (flatten → linear)")
def logistic(input_shape: tuple[int, ...], output_dim: int, params: None) -> SplitModel:
    return SplitModel(nn.Flatten(), nn.Linear(flat_dim(input_shape), output_dim))


@dataclass
class LinearParams:
    """``init_range`` a > 0: θ_1 ~ U(−a, a) for every weight and bias θ_2 = 0 (CFL-GP paper §5.1's initialisation of the
    three-lines task, a ∈ {0.8, 1.6}); 0 keeps PyTorch's default init."""

    init_range: float = 0.0  # a > 0: weights ~ U(−a, a), θ_2 = 0 (CFL-GP paper §5.1); 0 keeps PyTorch's init

    def __post_init__(self) -> None:
        if not self.init_range >= 0 or self.init_range == float("inf"):
            raise ValueError(f"model.init_range must be a finite number >= 0, got {self.init_range}")


@MODELS.register("linear", "linear regression ŷ = <θ, x> + b (init_range=a: CFL-GP paper's θ_1 ~ U(−a, a), θ_2 = 0)",
                 LinearParams)
def linear(input_shape: tuple[int, ...], output_dim: int, params: LinearParams) -> SplitModel:
    head = nn.Linear(flat_dim(input_shape), output_dim)
    if params.init_range > 0:
        nn.init.uniform_(head.weight, -params.init_range, params.init_range)
        nn.init.zeros_(head.bias)
    return SplitModel(nn.Flatten(), head)


@MODELS.register("linear-nobias", "linear regression ŷ = <θ, x> without bias "
                 "(the FedMD paper's mixed-regression model)")
def linear_nobias(input_shape: tuple[int, ...], output_dim: int, params: None) -> SplitModel:
    return SplitModel(nn.Flatten(), nn.Linear(flat_dim(input_shape), output_dim, bias=False))


@dataclass
class MLPParams:
    hidden: list[int] = (200,)  # type: ignore[assignment] hidden-layer widths

    def __post_init__(self) -> None:
        self.hidden = list(self.hidden)
        if not self.hidden or min(self.hidden) < 1:
            raise ValueError("model.hidden needs at least one positive layer width, e.g. [200]")


@MODELS.register("mlp", "multi-layer perceptron, ReLU (default 784-200-10 as in CFL-GP)", MLPParams)
def mlp(input_shape: tuple[int, ...], output_dim: int, params: MLPParams) -> SplitModel:
    layers: list[nn.Module] = [nn.Flatten()]
    width = flat_dim(input_shape)
    for h in params.hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    return SplitModel(nn.Sequential(*layers), nn.Linear(width, output_dim))


@dataclass
class CNNParams:
    channels: list[int] = (32, 64)  # type: ignore[assignment] the two conv layers' channels
    fc: int = 512  # width of the dense layer
    # valid: no padding, as the FedRC paper's public code's FemnistCNN (28×28 → 4×4: FC 64·4·4 = 1024 → 2048)
    padding: Literal["same", "valid"] = "same"  # same: the convolutions keep the size; valid: no padding

    def __post_init__(self) -> None:
        self.channels = list(self.channels)
        if len(self.channels) != 2 or min(self.channels) < 1 or self.fc < 1:
            raise ValueError("model.channels must be two positive widths, e.g. [32,64], and model.fc > 0")
        if self.padding not in ("same", "valid"):
            raise ValueError(f"model.padding must be same or valid, got {self.padding!r}")


def _two_conv_cnn(input_shape: tuple[int, ...], output_dim: int, params: CNNParams) -> SplitModel:
    if len(input_shape) != 3:
        raise ConfigError(f"CNN models need image inputs [C,H,W], this dataset gives {list(input_shape)}")
    c, h, w = input_shape
    if h < 4 or w < 4:
        raise ConfigError(f"CNN models need images of at least 4x4 pixels (two 2x2 max-pools), this dataset gives "
                          f"{h}x{w}; use model=mlp")
    c1, c2 = params.channels
    pad = 2 if params.padding == "same" else 0
    side = (lambda n: n // 4) if pad else (lambda n: ((n - 4) // 2 - 4) // 2)
    if min(side(h), side(w)) < 1:
        raise ConfigError(f"model.padding=valid needs images of at least 16x16 pixels, this dataset gives {h}x{w}; "
                          "use model.padding=same")
    body = nn.Sequential(
        nn.Conv2d(c, c1, 5, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 5, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * side(h) * side(w), params.fc), nn.ReLU(),
    )
    return SplitModel(body, nn.Linear(params.fc, output_dim))


@MODELS.register("cnn", "two-conv CNN of the FedAvg paper (5×5 conv 32/64, max-pool, FC 512)", CNNParams)
def cnn(input_shape: tuple[int, ...], output_dim: int, params: CNNParams) -> SplitModel:
    return _two_conv_cnn(input_shape, output_dim, params)


@dataclass
class LightCNNParams(CNNParams):
    channels: list[int] = (16, 32)  # type: ignore[assignment]
    fc: int = 128


@MODELS.register("light-cnn", "lighter two-conv CNN (16/32 channels, FC 128)", LightCNNParams)
def light_cnn(input_shape: tuple[int, ...], output_dim: int, params: LightCNNParams) -> SplitModel:
    return _two_conv_cnn(input_shape, output_dim, params)

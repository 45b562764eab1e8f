"""Milliseconds per SGD step (forward + backward + update, 32 images of 1×28×28, one CPU thread) of the models the
reproduction budgets use: the light MLPs of the small budgets and the papers' CNN and MobileNetV2.

    python benchmarks/speed/model_step_cost.py

``fedcluster reproduce`` scales a small run's wall time by these ratios to say what a paper budget needs on a CPU
(see ``fedcluster.reproduce.cost``)."""

from __future__ import annotations

import time

import torch

from fedcluster.catalog.registry import load_builtins  # noqa: F401  (registers the models)
from fedcluster.models.base import build_model
from fedcluster.models.mobilenet import MobileNetParams
from fedcluster.models.zoo import CNNParams, MLPParams

CASES = {"MLP 784-128-10": ("mlp", MLPParams(hidden=[128])), "MLP 784-200-10": ("mlp", MLPParams(hidden=[200])),
         "CNN 32/64, FC 2048": ("cnn", CNNParams(channels=[32, 64], fc=2048)),
         "MobileNetV2": ("mobilenet-v2", MobileNetParams())}


def step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
    for name, (kind, params) in CASES.items():
        model = build_model(kind, (1, 28, 28), 10, params)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):
            step(model, opt, x, y)
        n = 5 if kind == "mobilenet-v2" else 50
        t = time.perf_counter()
        for _ in range(n):
            step(model, opt, x, y)
        print(f"{name}: {(time.perf_counter() - t) / n * 1000:.1f} ms per step", flush=True)


if __name__ == "__main__":
    main()

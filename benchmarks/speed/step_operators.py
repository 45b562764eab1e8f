"""Operators per step of the vectorised training path: what an accelerator launches a kernel for, counted on the CPU.

Every operator a training call dispatches is counted (``TorchDispatchMode``); views (``view``, ``permute``,
``slice``, ...) launch nothing and are counted apart. The figure per step is the call's count over its steps, for
the models of the FedRC paper's protocol (the MLP 784-200-10, the light CNN and the paper's CNN), with momentum and
weight decay (the SGD update's full form). The same numbers on any machine: no timing.

Usage: python benchmarks/speed/step_operators.py [--units 6] [--samples 64] [--batch 32]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: the operator counter is a test tool
from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.kernels import build_batch, per_sample_loss, train_vectorized
from fedcluster.models import build_model
from tests.support.operator_count import OperatorCount

MODELS = {"mlp 784-200-10": ("mlp", None), "light CNN 8/16, FC 64": ("light-cnn", {"channels": [8, 16], "fc": 64}),
          "paper CNN 32/64, FC 2048": ("cnn", {"channels": [32, 64], "fc": 2048, "padding": "valid"})}
UPDATE = ("add", "mul_", "add_", "sub_")  # the SGD update's kinds per tensor (and a few of the backward's adds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=6)
    ap.add_argument("--samples", type=int, default=64, help="training samples per unit")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    solver = Solver(lr=0.1, batch_size=args.batch, momentum=0.9, weight_decay=5e-4)
    print("| model | parameter tensors | operators per step | of them `add`, `mul_`, `add_`, `sub_`, `_foreach_*` |")
    print("|---|---|---|---|")
    for label, (name, params) in MODELS.items():
        torch.manual_seed(0)
        module = build_model(name, (1, 28, 28), 10, params)
        n = args.units * args.samples
        x, y = torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,))
        sizes = np.full(args.units, args.samples)
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        schedule = make_schedule(sizes, np.arange(args.units), 0, 0, 1, args.batch)
        batch = build_batch(stack([get_params(module)] * args.units), np.arange(args.units), ptr, schedule, None, None)
        counter = OperatorCount()
        with counter:
            train_vectorized(module, x, y, batch, solver, per_sample_loss("classification"))
        steps = int(batch.steps.max())
        launching = counter.launching()
        update = sum(v for k, v in launching.items() if k in UPDATE or k.startswith("_foreach_"))
        print(f"| {label} | {len(module.state_dict())} | {sum(launching.values()) / steps:g} | {update / steps:g} |")


if __name__ == "__main__":
    main()

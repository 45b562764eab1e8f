"""Seconds per FedAvg round for three local-training implementations (the README's speed table).

Setting: 100 clients × 600 samples of 1×28×28, 10 classes, 1 local epoch, batch 32, plain SGD.
* framework-style loop: deep-copy the global model per client, a DataLoader per client, torch.optim.SGD
  (how common FL frameworks write local training);
* sequential reference: fedcluster's reference path (one unit after another, no DataLoader);
* fast path: what ``engine=auto`` picks for the model (vectorised for linear/MLP, process pool for CNNs).

Usage: python benchmarks/engine_speed.py [--rounds 5] [--models logistic,mlp,light-cnn]
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from fedcluster.engine.params import get_params, repeat
from fedcluster.engine.solver import Solver
from fedcluster.engine.training import Trainer, auto_path
from fedcluster.models import build_model

CLIENTS, PER_CLIENT, BATCH = 100, 600, 32


def framework_round(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float) -> None:
    states = []
    for c in range(CLIENTS):
        local = copy.deepcopy(model)
        sl = slice(c * PER_CLIENT, (c + 1) * PER_CLIENT)
        loader = DataLoader(TensorDataset(x[sl], y[sl]), batch_size=BATCH, shuffle=True)
        opt = torch.optim.SGD(local.parameters(), lr=lr)
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(local(xb), yb).backward()
            opt.step()
        states.append(local.state_dict())
    avg = {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}
    model.load_state_dict(avg)


def interleaved(fns: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """Median seconds per call of each function, calls interleaved round by round so that a slow phase
    of a shared machine hits every variant alike (the ratios are what the table is for)."""
    for fn in fns.values():
        fn()  # warm-up: first-call costs (pool start, allocations) are not per-round costs
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default="logistic,mlp,light-cnn")
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.rand(CLIENTS * PER_CLIENT, 1, 28, 28)
    y = torch.randint(0, 10, (CLIENTS * PER_CLIENT,))
    ptr = np.arange(CLIENTS + 1) * PER_CLIENT
    solver = Solver(lr=0.05, epochs=1, batch_size=BATCH)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; seconds per round, "
          f"{CLIENTS} clients × {PER_CLIENT} samples, batch {BATCH}, median of {args.rounds} interleaved rounds")
    print(f"{'model':<10} {'framework':>10} {'sequential':>11} {'fast path':>18} {'fast/framework':>15}"
          f" {'fast/sequential':>16}")
    for name in args.models.split(","):
        model = build_model(name, (1, 28, 28), 10)
        init = repeat(get_params(model), CLIENTS)
        clients = np.arange(CLIENTS)
        fast = auto_path(name)
        trainers = {p: Trainer(model, x, y, ptr, "classification", seed=0, path=p) for p in ("sequential", fast)}
        fns = {"framework": lambda m=model: framework_round(m, x, y, 0.05)}
        fns |= {p: (lambda tr=tr, i=init, c=clients: tr.train(i, c, solver, 0)) for p, tr in trainers.items()}
        times = interleaved(fns, args.rounds)
        for tr in trainers.values():
            tr.close()
        t_fw = times["framework"]
        print(f"{name:<10} {t_fw:>10.3f} {times['sequential']:>11.3f} {times[fast]:>8.3f} ({fast:<8})"
              f" {t_fw / times[fast]:>14.1f}× {times['sequential'] / times[fast]:>15.1f}×", flush=True)


if __name__ == "__main__":
    main()

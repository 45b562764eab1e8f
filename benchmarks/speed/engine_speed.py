"""Seconds per FedAvg round for three local-training implementations (the README's speed table), on the CPU or a
GPU.

Setting: 100 clients × 600 samples (1×28×28; 3×32×32 for resnet18/mobilenet-v2), 10 classes, 1 local epoch,
batch 32, plain SGD.
* framework-style loop: deep-copy the global model per client, a DataLoader per client, torch.optim.SGD
  (how common FL frameworks write local training); on a GPU the batches are copied from host memory;
* sequential reference: fedcluster's reference path (one unit after another, no DataLoader, data resident on
  the device);
* fast path: what ``engine=auto`` picks for the model and device (CPU: dense for linear/MLP, process pool for
  CNNs; GPU: the vectorised cohort, chunked by free memory).
``--fedrc MODEL`` adds one round of FedRC (K = 3: E-step, K × clients units, aggregation) next to one FedAvg
round of the whole engine (the ``Run`` an experiment uses), both on the fast path.

On a GPU the runs' default (fast) mode is timed: cuDNN autotuning on, TF32 convolutions; ``--deterministic`` times
a run's ``deterministic=true`` (deterministic kernels, no autotuning, no TF32). ``--precision bf16`` autocasts
forward/backward (weights, updates and aggregation stay fp32). The vectorised fast path prints its units per call
(engine.memory's chunk planner). ``--paths framework,fast`` times only those columns (``fast`` is what
``engine=auto`` picks: on a GPU ``unit-loop`` for ResNet-18 and MobileNet-V2; any engine name may be added, e.g.
``vectorized``).

Usage: python benchmarks/speed/engine_speed.py [--rounds 5] [--models logistic,mlp,light-cnn]
       python benchmarks/speed/engine_speed.py --device cuda [--precision bf16]   (models mlp,light-cnn,cnn,resnet18
       and a FedRC round by default)
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

from _synthetic import synthetic_federation  # benchmarks/_synthetic.py (on the path above)
from torch.utils.data import DataLoader, TensorDataset

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.device import configure, device_name, resolve_device
from fedcluster.engine.memory import footprint
from fedcluster.engine.params import get_params, repeat
from fedcluster.engine.runner import Run
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.kernels import auto_path
from fedcluster.errors import UserError
from fedcluster.models import build_model

PER_CLIENT, BATCH = 600, 32
CIFAR_MODELS = ("resnet18", "mobilenet-v2")


def framework_round(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, clients: int,
                    device: torch.device, precision: str) -> None:
    states = []
    for c in range(clients):
        local = copy.deepcopy(model)
        sl = slice(c * PER_CLIENT, (c + 1) * PER_CLIENT)
        loader = DataLoader(TensorDataset(x[sl], y[sl]), batch_size=BATCH, shuffle=True)
        opt = torch.optim.SGD(local.parameters(), lr=lr)
        for xb, yb in loader:
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            opt.zero_grad()
            with torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16"):
                out = local(xb)
            torch.nn.functional.cross_entropy(out.float(), yb).backward()
            opt.step()
        states.append(local.state_dict())
    avg = {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}
    model.load_state_dict(avg)
    sync(device)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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


def data(shape: tuple[int, ...], clients: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(clients * PER_CLIENT, *shape, generator=g)
    y = torch.randint(0, 10, (clients * PER_CLIENT,), generator=g)
    return x, y, np.arange(clients + 1) * PER_CLIENT


def train_table(args: argparse.Namespace, device: torch.device) -> None:
    solver = Solver(lr=0.05, epochs=1, batch_size=BATCH)
    print(f"{'model':<10} {'framework':>10} {'sequential':>11} {'fast path':>18} {'fast/framework':>15}"
          f" {'fast/sequential':>16}")
    for name in args.models.split(","):
        shape = (3, 32, 32) if name in CIFAR_MODELS else (1, 28, 28)
        x, y, ptr = data(shape, args.clients)
        xd, yd = x.to(device), y.to(device)
        torch.manual_seed(0)
        model = build_model(name, shape, 10).to(device)
        init = repeat(get_params(model), args.clients)
        clients = np.arange(args.clients)
        fp = footprint(model, shape)
        fast = auto_path(name, device, args.precision, activation_bytes=fp and fp.activations)
        wanted = [fast if p == "fast" else p for p in args.paths.split(",")]
        trainers = {p: LocalTrainer(model, xd, yd, ptr, "classification", seed=0, path=p, precision=args.precision)
                    for p in dict.fromkeys(wanted) if p != "framework"}

        def timed(tr: LocalTrainer, i=init, c=clients) -> None:
            tr.train(i, c, solver, 0)
            sync(device)

        fns = {"framework": lambda m=model, x=x, y=y: framework_round(m, x, y, 0.05, args.clients, device,
                                                                      args.precision)} if "framework" in wanted else {}
        fns |= {p: (lambda tr=tr: timed(tr)) for p, tr in trainers.items()}
        times = interleaved(fns, args.rounds)
        for tr in trainers.values():
            tr.close()
        nan = float("nan")
        t_fw, t_seq, t_fast = times.get("framework", nan), times.get("sequential", nan), times.get(fast, nan)
        units = f"  {trainers[fast].chunk_size(BATCH, args.clients)} units/call" if fast == "vectorized" \
            and fast in trainers else ""
        others = "".join(f"  {p} {t:.3f}" for p, t in times.items() if p not in ("framework", "sequential", fast))
        print(f"{name:<10} {t_fw:>10.3f} {t_seq:>11.3f} {t_fast:>8.3f} ({fast:<8})"
              f" {t_fw / t_fast:>14.1f}× {t_seq / t_fast:>15.1f}×{units}{others}", flush=True)


def fedrc_table(args: argparse.Namespace, device: torch.device) -> None:
    """One round of the whole engine: FedAvg vs FedRC with K = 3 (fast path, evaluation excluded)."""
    name = args.fedrc
    shape = (3, 32, 32) if name in CIFAR_MODELS else (1, 28, 28)
    fed = synthetic_federation(args.clients, PER_CLIENT, shape)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for alg in ("fedavg", "fedrc"):
            cfg, typed = resolve(load_raw(None, [
                f"algorithm={alg}", f"model={name}", f"device={device.type}", f"precision={args.precision}",
                "lr=0.05", f"batch_size={BATCH}", "progress=false", f"out={Path(tmp) / alg}",
                *(["algorithm.num_clusters=3"] if alg == "fedrc" else [])]))
            runs[alg] = Run(cfg, typed, fed=fed)
        clients = np.arange(args.clients)
        state = {"t": 0}

        def one(alg: str) -> None:
            runs[alg].alg.run_round(state["t"], clients)
            state["t"] += 1
            sync(device)

        times = interleaved({a: (lambda a=a: one(a)) for a in runs}, args.rounds)
        for r in runs.values():
            r.ctx.trainer.close()
    fedavg, fedrc = times["fedavg"], times["fedrc"]
    print(f"\nFedRC (K = 3) vs FedAvg, one engine round of {name} ({runs['fedrc'].ctx.trainer.path}): "
          f"FedAvg {fedavg:.3f} s, FedRC {fedrc:.3f} s, ratio {fedrc / fedavg:.2f}×")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default=None, help="default: logistic,mlp,light-cnn (CPU); "
                                                   "mlp,light-cnn,cnn,resnet18 (GPU)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--fedrc", default=None, help="also time a K = 3 FedRC round with this model "
                                                  "(default on a GPU: light-cnn; 'none' to skip)")
    ap.add_argument("--deterministic", action="store_true",
                    help="a run's deterministic=true: deterministic kernels, no cuDNN autotuning, no TF32")
    ap.add_argument("--nondeterministic", action="store_true", help="the default mode (kept for older commands)")
    ap.add_argument("--paths", default="framework,sequential,fast",
                    help="columns to time: framework, sequential, fast (what engine=auto picks) or an engine name")
    args = ap.parse_args()
    try:
        device = resolve_device(args.device)
    except UserError as e:
        raise SystemExit(f"engine_speed: {e}") from None
    gpu = device.type != "cpu"
    args.models = args.models or ("mlp,light-cnn,cnn,resnet18" if gpu else "logistic,mlp,light-cnn")
    args.fedrc = args.fedrc or ("light-cnn" if gpu else "none")
    configure(device, deterministic=args.deterministic)
    where = f"{device_name(device)}, {args.precision}" if gpu else f"{torch.get_num_threads()} threads"
    if args.precision != "fp32" and not gpu:
        where += f", {args.precision}"
    if gpu:
        where += ", deterministic" if args.deterministic else ", fast mode (cuDNN autotuning, TF32 convolutions)"
    print(f"torch {torch.__version__}, {where}; seconds per round, "
          f"{args.clients} clients × {PER_CLIENT} samples, batch {BATCH}, median of {args.rounds} interleaved rounds")
    if args.models != "none":
        train_table(args, device)
    if args.fedrc != "none":
        fedrc_table(args, device)


if __name__ == "__main__":
    main()

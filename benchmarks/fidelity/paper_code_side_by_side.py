"""Seconds per training round, fedcluster beside the FedRC paper's own code (github.com/LINs-lab/FedRC), on the CPU.

Protocol (the paper's code as run, at a size a CPU times in minutes): 15 clients x 160 training samples
(1x28x28, 10 classes, 3 concepts), the paper's CNN (``FemnistCNN``: conv 32/64, FC 2048), K = 3 for FedRC and IFCA,
one local step of 128 samples per round (its Fashion-MNIST-C loaders: ``drop_last=True``), SGD lr 0.06, momentum
0.9 kept per client and cluster model across rounds, weight decay 5e-4; FedRC's and IFCA's E-step over all 160
samples (its ``val_iterator`` reads the training set). One training round is the paper code's ``aggregator.mix()``
(client steps, aggregation, broadcast; its evaluation, ``write_logs``, is switched off) against fedcluster's
``alg.run_round`` with the matching keys (evaluation excluded too). The two sides get the same random images.

Both sides run in this one process with one torch thread, interleaved round by round (a slow phase of a shared
machine hits both alike), after one warm-up round each; the figure is the median seconds per round and the ratio
paper / fedcluster (above 1: fedcluster is faster).

The paper's code is not part of fedcluster: pass the path of a checkout of it (``git clone
https://github.com/LINs-lab/FedRC``). Its ``models.py`` imports torchvision (for models not used here): where
torchvision is missing an empty stand-in module is put in its place. Without ``--paper-code`` the script says so
and exits 0.

``--also KEY=VALUE[,KEY=VALUE]`` adds a third side, fedcluster with those extra run keys (e.g. ``channels_last=true``),
interleaved with the other two.

Usage: python benchmarks/fidelity/paper_code_side_by_side.py --paper-code PATH [--methods fedrc,ifca,fedavg]
       [--rounds 15] [--clients 15] [--per-client 160] [--engine auto] [--also channels_last=true]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np
import torch
from _synthetic import synthetic_federation

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from fedcluster.reproduce.specs_fedrc import PAPER_CNN

LR, BATCH = 0.06, 128
PAPER_CLIENT = {"fedrc": "FedRC", "ifca": "IFCA", "fedavg": "Client"}  # client.py classes
PAPER_AGGREGATOR = {"fedrc": "CentralizedAggregator", "ifca": "IFCAAggregator", "fedavg": "CentralizedAggregator"}


class _IndexedSet(torch.utils.data.Dataset):
    """The paper's datasets yield (x, y, index) and carry ``targets``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.data, self.targets = x, y

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.data[i], self.targets[i], i


def import_paper_code(path: Path) -> dict[str, Any]:
    """The paper code's modules, imported from its checkout (its files import each other by top-level name)."""
    if "torchvision" not in sys.modules and importlib.util.find_spec("torchvision") is None:
        stand_in = types.ModuleType("torchvision")
        stand_in.models = types.ModuleType("torchvision.models")  # type: ignore[attr-defined]
        sys.modules["torchvision"], sys.modules["torchvision.models"] = stand_in, stand_in.models  # type: ignore[attr-defined]
    sys.path.insert(0, str(path))
    names = ("utils.metrics", "models", "learners.learner", "learners.learners_ensemble", "client", "aggregator")
    return {n.rsplit(".", 1)[-1]: importlib.import_module(n) for n in names}


def paper_round(code: dict[str, Any], method: str, xs: list[torch.Tensor], ys: list[torch.Tensor],
                k: int) -> Callable[[], None]:
    """One ``aggregator.mix()`` of the paper's code, built as its run_experiment.py builds it."""
    torch.manual_seed(0)

    def ensemble() -> Any:
        learners = []
        for _ in range(k):
            model = code["models"].FemnistCNN(num_classes=10)
            opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)  # utils.optim "sgd"
            learners.append(code["learner"].Learner(model, torch.nn.CrossEntropyLoss(reduction="none"),
                                                    metric=code["metrics"].accuracy, device="cpu", optimizer=opt))
        return code["learners_ensemble"].LearnersEnsemble(learners, torch.ones(k) / k, device="cpu")

    clients = []
    for x, y in zip(xs, ys, strict=True):
        data = _IndexedSet(x, y)
        train = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=True)
        val = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=False)
        clients.append(getattr(code["client"], PAPER_CLIENT[method])(
            ensemble(), train, val, val, logger=None, local_steps=1))
    base = getattr(code["aggregator"], PAPER_AGGREGATOR[method])
    quiet = type("Quiet" + base.__name__, (base,), {"write_logs": lambda self: None})
    agg = quiet(clients, ensemble(), log_freq=10**9, global_train_logger=None, global_test_logger=None,
                sampling_rate=1.0, seed=0)
    agg.update_clients()  # every client starts from the global models, as run_experiment.py's aggregator does
    return agg.mix


def fedcluster_round(method: str, fed: Any, k: int, engine: str, out: Path, extra: tuple[str, ...] = ()
                     ) -> tuple[Callable[[], None], Run]:
    """One ``alg.run_round`` of fedcluster with the matching keys (and the ``extra`` ones)."""
    cfg, typed = resolve(load_raw(None, [
        f"algorithm={method}", *PAPER_CNN, "device=cpu", "threads=1", f"engine={engine}", f"lr={LR}",
        "momentum=0.9", "weight_decay=5e-4", "client_momentum=keep", f"batch_size={BATCH}", "drop_last=true",
        "local_epochs=1", "progress=false", f"out={out / method}",
        *([f"algorithm.num_clusters={k}"] if method != "fedavg" else []), *extra]))
    run = Run(cfg, typed, fed=fed)
    clients = np.arange(fed.train.num_clients)
    state = {"t": 0}

    def one() -> None:
        run.alg.run_round(state["t"], clients)
        state["t"] += 1

    return one, run


def interleaved(fns: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    for fn in fns.values():
        fn()  # warm-up round
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper-code", type=Path, help="a checkout of github.com/LINs-lab/FedRC")
    ap.add_argument("--methods", default="fedrc,ifca,fedavg")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--clients", type=int, default=15)
    ap.add_argument("--per-client", type=int, default=160)
    ap.add_argument("--engine", default="auto", help="fedcluster's engine= (auto: its CPU choice)")
    ap.add_argument("--also", default="", help="a third side: fedcluster with these extra keys (KEY=VALUE,...)")
    args = ap.parse_args()
    if args.paper_code is None:
        print("skipped: no --paper-code PATH (a checkout of github.com/LINs-lab/FedRC) was given")
        return
    if not (args.paper_code / "client.py").is_file():
        print(f"--paper-code {args.paper_code}: no client.py there; give the path of a LINs-lab/FedRC checkout",
              file=sys.stderr)
        raise SystemExit(2)
    torch.set_num_threads(1)
    code = import_paper_code(args.paper_code.resolve())
    fed = synthetic_federation(args.clients, args.per_client, (1, 28, 28))
    offsets = fed.train.ptr
    xs = [fed.train.x[offsets[i]:offsets[i + 1]].clone() for i in range(args.clients)]
    ys = [fed.train.y[offsets[i]:offsets[i + 1]].clone() for i in range(args.clients)]
    print(f"{args.clients} clients x {args.per_client} samples, paper CNN, K = 3, one step of {BATCH}, momentum kept, "
          f"1 thread, {args.rounds} interleaved rounds after one warm-up (median s/round)")
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            k = 1 if method == "fedavg" else 3
            ours, run = fedcluster_round(method, fed, k, args.engine, Path(tmp))
            sides = {"paper": paper_round(code, method, xs, ys, k), "fedcluster": ours}
            runs = [run]
            if args.also:
                sides[args.also], also = fedcluster_round(method, fed, k, args.engine, Path(tmp) / "also",
                                                          tuple(args.also.split(",")))
                runs.append(also)
            times = interleaved(sides, args.rounds)
            for r in runs:
                r.ctx.trainer.close()
            paper = statistics.median(times["paper"])
            line = f"{method:7s} paper code {paper:.4f} s"
            for side in list(sides)[1:]:
                fc = statistics.median(times[side])
                line += f"  {side} {fc:.4f} s (ratio {paper / fc:.2f}x)"
            print(f"{line}  [{run.ctx.trainer.path}]", flush=True)


if __name__ == "__main__":
    main()

"""Seconds per round of K = 3 soft clustering (FedEM, FedRC) relative to a FedAvg round with the same model.

Each method runs through the library's own ``Run`` (same federation, model, solver and engine path);
only ``run_round`` is timed (E-step + local training + aggregation), after one warm-up round, as the
median of ``--rounds`` rounds run interleaved across the methods (shared machines drift). Evaluation
(validation + global test) is timed separately and shown for reference. ``fedem-naive`` is the
per-client implementation measured at 4–6×: each client computes its E-step losses with one
small eager forward pass per model, and each of the K models is a separate trainer call.

Usage:
  python benchmarks/speed/cost_ratio.py                                   # digits, MLP (the library's demo)
  python benchmarks/speed/cost_ratio.py --dataset fashion-mnist --model light-cnn --clients 100
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from fedcluster.algorithms.clustered import ClusteredAlgorithm
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.federation import Federation
from fedcluster.engine.evaluation.scores import model_outputs, per_sample_losses
from fedcluster.engine.runner import Run, evaluate  # internal on purpose: times run_round and evaluation apart
from fedcluster.tiers.weighting import soft_em


def naive_fedem_round(alg: ClusteredAlgorithm, round_: int, clients: np.ndarray) -> None:
    """FedEM the straightforward way: per-client, per-model E-step; one trainer call per model."""
    fed, k = alg.ctx.fed, alg.num_clusters
    gammas = []
    for c in clients:
        x, y = fed.train.client(int(c))
        losses = torch.stack([per_sample_losses(model_outputs(alg.ctx.module, {n: v[j:j + 1] for n, v in
                                                                               alg.models.items()}, x),
                                                y, fed.task)[0] for j in range(k)], 1).double().numpy()
        est = soft_em(-losses, np.zeros(len(y), np.int64), alg.omega[c:c + 1])
        alg.omega[c] = est.omega[0]
        gammas.append(est.gamma)
    local = []
    for j in range(k):
        init = {n: v[j].unsqueeze(0).expand(len(clients), *v.shape[1:]).clone() for n, v in alg.models.items()}
        local.append(alg.ctx.trainer.train(init, clients, alg.ctx.solver, round_,
                                           weights=[g[:, j].astype(np.float32) for g in gammas]))
    alg.aggregate({n: torch.stack([loc[n] for loc in local], 1) for n in local[0]},
                  np.repeat(alg.sizes(clients)[:, None], k, 1))


def build_run(overrides: list[str], fed: Federation | None) -> Run:
    cfg, typed = resolve(load_raw(None, overrides))
    return Run(cfg, typed, fed=fed)


def one_round(run: Run, t: int, naive: bool) -> tuple[float, float]:
    """Seconds of round ``t`` and of the evaluation after it."""
    t0 = time.perf_counter()
    if naive:
        naive_fedem_round(run.alg, t, run.stream[t])
    else:
        run.alg.run_round(t, run.stream[t])
    t1 = time.perf_counter()
    evaluate(run.alg, run.fed)
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--scenario", default="concept-swap")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--methods", default="fedavg,fedem,fedrc,fedem-split,fedrc-split,fedem-naive")
    ap.add_argument("--out", default="/tmp/fedcluster-cost-ratio")
    args = ap.parse_args()
    base = [f"dataset={args.dataset}", f"scenario={args.scenario}", f"model={args.model}",
            f"num_clients={args.clients}", f"rounds={args.rounds + 1}", f"engine={args.engine}", "progress=false",
            "batch_size=32", "lr=0.05"]
    stamp = time.strftime("%H%M%S")
    methods = ["fedavg"] + [m for m in args.methods.split(",") if m != "fedavg"]
    runs: dict[str, Run] = {}
    fed = None
    for name in methods:
        algo = name.split("-")[0]
        extra = [f"algorithm={algo}"] + ([] if algo == "fedavg" else ["algorithm.num_clusters=3"])
        extra += ["algorithm.split=true"] if name.endswith("split") else []
        runs[name] = build_run(base + extra + [f"out={args.out}/{stamp}-{name}"], fed)
        fed = runs[name].fed  # one federation object for all
    # Rounds interleaved across methods (round t of every method, then t + 1, ...), so that load from
    # other processes on a shared machine hits all methods alike; round 0 warms up (pool start, tracing).
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in runs}
    try:
        for t in range(args.rounds + 1):
            for name, run in runs.items():
                sec = one_round(run, t, name.endswith("naive"))
                if t > 0:
                    times[name].append(sec)
    finally:
        for run in runs.values():
            run.ctx.trainer.close()
    print(f"{args.dataset}/{args.scenario}, model {args.model}, {args.clients} clients, engine {args.engine}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads; median of {args.rounds} interleaved rounds")
    print(f"{'method':<12} {'round s':>9} {'× fedavg':>9} {'eval s':>8} {'round+eval × fedavg':>20}")
    ref = tuple(statistics.median(x[i] for x in times["fedavg"]) for i in (0, 1))
    for name, ts in times.items():
        sec, ev = (statistics.median(x[i] for x in ts) for i in (0, 1))
        ratios = [x[0] / f[0] for x, f in zip(ts, times["fedavg"], strict=True)]  # per-round ratios
        print(f"{name:<12} {sec:>9.3f} {sec / ref[0]:>8.2f}× {ev:>8.3f} {(sec + ev) / sum(ref):>19.2f}×"
              f"   per-round ratios {' '.join(f'{r:.2f}' for r in ratios)}", flush=True)


if __name__ == "__main__":
    main()

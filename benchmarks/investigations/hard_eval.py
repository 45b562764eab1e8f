"""Evaluation of a hard method, and CFL-GP's clustering step, at the CFL-GP paper's rotation scale, on the CPU.

1. One evaluation (validation and test clients) of IFCA with K = 8 on Fashion-MNIST rotated by 8 angles, 32
   clients with all their data: each row through its client's model only (the default) against all K models mixed
   by the one-hot Ω (what evaluation did before), interleaved, medians.
2. CFL-GP's clustering step at C clients (profiles of K blocks of an MLP's d̂ = 159,010 coordinates): the Gram
   matrix kept block by block (the default: one block's rows per round) against the Gram matrix of every profile
   recomputed (before), interleaved, medians.

    python benchmarks/investigations/hard_eval.py [--repeats 5] [--clients 128] [--k 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np

import fedcluster.engine.evaluation.prediction as prediction  # internal: switches the one-model-per-row path off
from fedcluster.algorithms.spectral import gram_features, spectral_features
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.round_evaluation import evaluate
from fedcluster.engine.runner import Run  # internal: the trained algorithm (run.alg) is evaluated again


def evaluation(repeats: int) -> None:
    cfg, typed = resolve(load_raw(None, [
        "dataset=fashion-mnist", "scenario=rotation", "scenario.angles=[0,15,90,105,180,195,270,285]",
        "num_clients=32", "model=mlp", "model.hidden=[200]", "algorithm=ifca", "algorithm.num_clusters=8",
        "rounds=2", "threads=1", "progress=false", f"out={tempfile.mkdtemp()}/run"]))
    run = Run(cfg, typed)
    run.execute()
    hard = prediction.one_hot_rows
    times: dict[str, list[float]] = {"one model per row": [], "all K models mixed": []}
    for _ in range(repeats):
        for label in times:
            prediction.one_hot_rows = hard if label == "one model per row" else (lambda w: False)
            t0 = time.perf_counter()
            evaluate(run.alg, run.fed)
            times[label].append(time.perf_counter() - t0)
    prediction.one_hot_rows = hard
    rows = len(run.fed.val.y) + len(run.fed.test.y)
    for label, ts in times.items():
        print(f"IFCA K=8 evaluation, {rows} rows, {label}: {statistics.median(ts):.2f} s (median of {repeats})")


def clustering(repeats: int, clients: int, k: int, d: int = 159_010) -> None:
    rng = np.random.default_rng(0)
    profiles = rng.standard_normal((clients, k, d))
    grams = np.stack([profiles[:, j] @ profiles[:, j].T for j in range(k)])
    times: dict[str, list[float]] = {"Gram kept by block": [], "Gram recomputed": []}
    for r in range(repeats):
        j = r % k
        profiles[:, j] += 0.01 * rng.standard_normal((clients, d))  # a cluster round updates one block
        t0 = time.perf_counter()
        rows = profiles[:, j] @ profiles[:, j].T
        grams[j] = rows
        gram_features(grams.sum(0), k)
        times["Gram kept by block"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        spectral_features(profiles[np.arange(clients)].reshape(clients, -1), k)
        times["Gram recomputed"].append(time.perf_counter() - t0)
    for label, ts in times.items():
        print(f"CFL-GP clustering step, C={clients}, K={k}, d̂={d}, {label}: {statistics.median(ts):.2f} s "
              f"(median of {repeats})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clients", type=int, default=128)
    ap.add_argument("--k", type=int, default=8)
    args = ap.parse_args()
    evaluation(args.repeats)
    clustering(args.repeats, args.clients, args.k)


if __name__ == "__main__":
    main()

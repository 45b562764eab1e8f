"""CFL-GP paper Figure 1: CFL-GP on three noisy lines, sweeps over clients C, gap Δφ and batch b, two initialisations.

Defaults (CFL-GP paper §5.1): K = 3, C = 12, Δφ = 20°, b = 10, T = 200, lr 0.1, P = 2; slope init
θ_1 ~ U(−a, a) with a ∈ {0.8, 1.6} (solid / dotted lines of Fig. 1), θ_2 = 0. Reports final ARI, MSE and the
first round with ARI = 1 (CFL-GP paper Tables 3–4 style), mean over seeds. The default grid is reduced (2 seeds, T =
100);
``--full`` runs the CFL-GP paper's T = 200 and 5 seeds. Baselines as in CFL-GP paper §5.1: IFCA (option I, gradient
averaging, K = 3)
and CFL/MADMO (one cluster to start, Sattler's tolerances, one full-batch gradient step per round), with the
same initial models.

A thin caller of ``fedcluster reproduce s3-lines-sweeps`` (same runner, settings and methods); that command
writes the multi-seed paper-vs-ours page.

    python benchmarks/fidelity/cflgp_lines.py [--full] [--methods cflgp,ifca,cfl]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np

from fedcluster.reproduce.run_synthetic import run_lines  # sets the same starting lines on each Run (no API hook)
from fedcluster.reproduce.spec import Budget
from fedcluster.reproduce.specs_cflgp import S3_LINES

PAPER = "CFL-GP paper Fig. 1: CFL-GP ARI ≈ 1 across C, b and both inits; ≥ 0.8 at Δφ = 5° (IFCA, MADMO ≈ 0 there)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--methods", default="cflgp,ifca,cfl")
    args = ap.parse_args()
    wanted = args.methods.split(",")
    methods = tuple(m for m in S3_LINES.methods if m.label.split()[0] in wanted)
    exp = dataclasses.replace(S3_LINES, methods=methods)
    rounds, seeds = (200, 5) if args.full else (100, 2)
    budget = Budget(12, rounds, "linear regression")
    t0 = time.perf_counter()
    records: list[dict] = []

    def emit(record: dict) -> None:
        records.append(record)
        print(f"seed {record['seed']} {record['setting']} {record['method']}: ARI {record['metrics']['ari']:.3f}",
              file=sys.stderr, flush=True)

    for seed in range(seeds):
        run_lines(exp, budget, seed, ["threads=1"], set(), emit)
    print(f"{'setting':16} {'method':12} {'ARI':>6} {'MSE':>7} {'rnd→ARI1':>9} {'sec':>5}")
    for setting in exp.settings:
        for m in methods:
            res = [r for r in records if (r["setting"], r["method"]) == (setting.name, m.label)]
            hit = [r["metrics"]["to_ari1"] for r in res]
            to1 = "-" if any(np.isnan(hit)) else f"{np.mean(hit):.1f}"
            print(f"{setting.name:16} {m.label:12} {np.mean([r['metrics']['ari'] for r in res]):6.3f} "
                  f"{np.mean([r['metrics']['mse'] for r in res]):7.4f} {to1:>9} "
                  f"{np.mean([r['seconds'] for r in res]):5.1f}", flush=True)
    print(f"\npaper: {PAPER}\nours: {seeds} seeds, T = {rounds}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

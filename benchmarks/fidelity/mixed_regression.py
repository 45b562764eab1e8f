"""FedMD paper Figs. 1–3: mixed linear regression, configurations A, B, C.

Two-phase (FedMD + FedX+clustering) vs vanilla FedAvg, one-shot clustering, IFCA from a random start and the
oracle (iterative clustering from θ*), all with FedAvg s = 5 full-batch local steps in Phase 2 and the FedMD paper's
averaging rule (every client's copy weighted n_i/N). The baselines are ``fedmd`` with ``init`` = oneshot /
random / oracle (same Phase 2 code); FedAvg is the registered ``fedavg`` on ``linear-nobias``. k = 3, d = 100;
5 Phase-1 + 400 Phase-2 rounds (the baselines run 405 Phase-2 rounds). Writes one error-vs-round PNG per config.

    python benchmarks/fidelity/mixed_regression.py [--configs A B C] [--rounds 405] [--seed 0] [--out bench_out/s2]

A thin caller of :mod:`fedcluster.reproduce` (the runs are ``run_synthetic.mixreg_curve``); the multi-seed
paper-vs-ours page is ``fedcluster reproduce s2-mixreg-a`` (``-b``, ``-c``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # 2 shared cores: no BLAS threads
    os.environ.setdefault(_var, "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedcluster.data.sources.synthetic import mixed_regression, mixed_regression_config  # noqa: E402
from fedcluster.reproduce.run_synthetic import mixreg_curve  # noqa: E402  (FedAvg's per-round θ̂ is not in rounds.csv)
from fedcluster.reproduce.specs_fedmd import MIXREG_LR as LR  # noqa: E402
from fedcluster.reproduce.specs_fedmd import MIXREG_PAPER  # noqa: E402

METHODS = ("two-phase", "fedavg", "one-shot", "ifca-random", "oracle")
PAPER = {c: "; ".join(f"{m} {v}" for m, v in p.items() if m != "oracle") for c, p in MIXREG_PAPER.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["A", "B", "C"])
    ap.add_argument("--rounds", type=int, default=405)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench_out/s2_mixed_regression")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = []
    for name in args.configs:
        kw = mixed_regression_config(name)
        fed = mixed_regression(**kw, seed=args.seed)
        curves, times = {}, {}
        with tempfile.TemporaryDirectory() as tmp:
            for method in METHODS:
                t0 = time.perf_counter()
                curves[method] = mixreg_curve(fed, method, args.rounds, [f"lr={LR[name]}", f"seed={args.seed}",
                                                                         "threads=1"], Path(tmp) / method)
                times[method] = time.perf_counter() - t0
        fig, ax = plt.subplots(figsize=(6, 4))
        for method, c in curves.items():
            ax.semilogy(np.arange(1, len(c) + 1), c, label=method)
        ax.axvline(5, color="grey", lw=0.5, ls=":")
        ax.set(xlabel="iteration", ylabel="estimation error d(θ̂, θ*)", title=f"FedMD paper config {name} (seed "
                                                                              f"{args.seed})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"config_{name}.png", dpi=120)
        plt.close(fig)
        oracle = curves["oracle"][-1]
        for method, c in curves.items():
            hit = np.flatnonzero(c <= 1.1 * oracle)
            table.append((name, method, c[4], c[min(104, len(c) - 1)], c[-1], c[-1] / oracle,
                          int(hit[0]) + 1 if len(hit) else -1, times[method]))
    print(f"{'cfg':3} {'method':12} {'err@5':>8} {'err@105':>8} {'final':>8} {'/oracle':>8} "
          f"{'rnd≤1.1·orc':>11} {'sec':>6}")
    for r in table:
        print(f"{r[0]:3} {r[1]:12} {r[2]:8.4f} {r[3]:8.4f} {r[4]:8.4f} {r[5]:8.2f} {r[6]:11d} {r[7]:6.1f}")
    print("\npaper (FedMD paper Figs. 1-3, qualitative):")
    for name in args.configs:
        print(f"  {name}: {PAPER[name]}")
    print(f"plots: {out}/config_*.png")


if __name__ == "__main__":
    main()

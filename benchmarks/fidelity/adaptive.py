"""Adaptive clustered FL on ``hcfl-shift`` Fashion-MNIST (3 concepts) in the layout of HCFL paper Table 1.

CFL, ICFL, StoCFL (the HCFL paper's hyper-parameters) and HCFL+ with the FeSEM, FedEM and FedRC backbones at ρ ∈
{0.05, 0.1, 0.3}: best local-validation accuracy, best global-test accuracy (HCFL paper: best over the rounds)
and K^T, the final number of clusters, next to the HCFL paper's CIFAR-10 numbers (the HCFL paper has no
Fashion-MNIST column, so only the shape compares: larger ρ → fewer clusters; HCFL+(FedRC) at ρ = 0.3 near 3
clusters with the best test accuracy; ICFL / StoCFL with many clusters and a lower test accuracy).

Federation (HCFL paper §5.1): LDA α = 1, one of 20 styles and one of 3 β-rule concepts (β = 0.2) per client,
three non-participating test clients (one per concept). HCFL paper uses 100 clients, MobileNetV2, 200 rounds. To finish
well under an hour on two CPU cores the defaults are reduced: ``--clients`` 100 (480 train / 120 validation samples
each; ``--fraction`` keeps a share of them), 1,000 images per test client, ``--rounds`` 40, evaluation every
``--eval-every`` 2 rounds, the ``mlp`` model with one hidden layer of ``--hidden`` 128 (φ = the hidden layer,
θ_k = the output layer), SGD lr 0.05, momentum 0.9, batch 32, 1 local epoch, full participation (CFL needs it).
CFL keeps Sattler's warm-up of 20 rounds. K^t per round of the HCFL+ runs is drawn as HCFL paper Figure 4
(``kt-<backbone>.png``).

Every run goes through the library API: ``configs/s1-adaptive-hcfl-shift.yaml`` with the options below, one
``fedcluster.build_federation`` shared by all methods, ``fedcluster.run`` per method.

Usage: python benchmarks/fidelity/adaptive.py [--rounds 40] [--clients 100] [--fraction 1] [--methods all|name,...]
       (names: the row labels' keys printed by --list)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # first: pins BLAS threads before numpy/torch load

import fedcluster
from fedcluster.tracking.kplot import plot_num_clusters  # `fedcluster report`'s K^t plot, several runs on one axis

CONFIG = "s1-adaptive-hcfl-shift"  # configs/CONFIG.yaml: the federation, model and solver of every run

# key: (row label, the algorithm section of the run, HCFL paper Table 1 CIFAR-10 (Val, Test, K^T))
METHODS: dict[str, tuple[str, dict[str, Any], tuple[float, float, int]]] = {
    "cfl-0.4-1.6": ("CFL tol=(0.4,1.6)", {"name": "cfl", "tol1": 0.4, "tol2": 1.6}, (61.55, 46.88, 6)),
    "cfl-0.4-0.8": ("CFL tol=(0.4,0.8)", {"name": "cfl", "tol1": 0.4, "tol2": 0.8}, (65.06, 45.74, 9)),
    "cfl-0.2-0.8": ("CFL tol=(0.2,0.8)", {"name": "cfl", "tol1": 0.2, "tol2": 0.8}, (58.92, 55.02, 4)),
    "icfl-0.85": ("ICFL α*(0)=0.85", {"name": "icfl", "alpha0": 0.85}, (77.59, 57.38, 98)),
    "icfl-0.98": ("ICFL α*(0)=0.98", {"name": "icfl", "alpha0": 0.98}, (60.58, 61.18, 14)),
    "stocfl-0.05": ("StoCFL τ=0.05", {"name": "stocfl", "tau": 0.05}, (59.79, 57.35, 15)),
    "stocfl-0.10": ("StoCFL τ=0.10", {"name": "stocfl", "tau": 0.1}, (70.84, 51.72, 54)),
}
S1_HCFL = {("fesem", 0.05): (87.77, 41.85, 58), ("fesem", 0.1): (85.08, 43.34, 44), ("fesem", 0.3): (79.31, 47.62, 17),
           ("fedem", 0.05): (82.45, 57.73, 22), ("fedem", 0.1): (84.64, 60.90, 16), ("fedem", 0.3): (83.67, 62.43, 10),
           ("fedrc", 0.05): (69.16, 67.37, 8), ("fedrc", 0.1): (71.67, 68.64, 8), ("fedrc", 0.3): (69.33, 69.67, 3)}
NAMES = {"fesem": "FeSEM", "fedem": "FedEM", "fedrc": "FedRC"}
for (_b, _rho), _paper in S1_HCFL.items():
    METHODS[f"hcfl-{_b}-{_rho}"] = (f"HCFL+({NAMES[_b]}) ρ={_rho}",
                                    {"name": "hcfl-plus", "backbone": _b, "rho": _rho}, _paper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="all")
    ap.add_argument("--list", action="store_true", help="print the method keys and exit")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--test-size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--beta", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=f"runs/adaptive-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args()
    if args.list:
        print("\n".join(f"{k:<16} {v[0]}" for k, v in METHODS.items()))
        return
    keys = list(METHODS) if args.methods == "all" else args.methods.split(",")
    # the shipped config's algorithm section is replaced per method (merging would keep HCFL+'s backbone/rho)
    cfg = {**common.shipped(CONFIG, drop=("algorithm",)), "scenario.beta": args.beta, "model.hidden": [args.hidden],
           "num_clients": args.clients, "rounds": args.rounds, "lr": args.lr, "eval_every": args.eval_every,
           "seed": args.seed, "checkpoint_every": args.rounds, "threads": 1}
    fed = common.shrink(fedcluster.build_federation(cfg), args.fraction, args.test_size, args.seed)
    print(fed.summary(), flush=True)
    results, curves = {}, {}
    t_all = time.perf_counter()
    for key in keys:
        label, algorithm, _ = METHODS[key]
        res, seconds = common.run({**cfg, "algorithm": algorithm}, f"{args.out}/{key}", fed)
        summary = res.summary
        curves[key] = res.rows
        results[key] = {"label": label, "val": 100 * summary["best"]["val_acc"]["value"],
                        "test": 100 * summary["best"]["test_acc"]["value"], "k": summary["final"]["num_clusters"],
                        "k_max": summary["max_clusters"], "ari": summary["final"]["ari"], "minutes": seconds / 60}
        r = results[key]
        print(f"{label}: val {r['val']:.2f} test {r['test']:.2f} K^T {r['k']} (max {r['k_max']}) "
              f"ARI {r['ari']:.3f} ({r['minutes']:.1f} min)", flush=True)
    print(f"\nhcfl-shift Fashion-MNIST, 3 concepts (β = {args.beta}), {args.clients} clients × {args.fraction:.2f} of "
          f"their data, {args.rounds} rounds, MLP [{args.hidden}], lr {args.lr}; best val / best test over the rounds; "
          f"total {(time.perf_counter() - t_all) / 60:.1f} min")
    print(f"{'method':<22} {'Val':>6} {'Test':>6} {'K^T':>4} {'ARI':>6} {'min':>5} | "
          f"{'paper Val':>10} {'Test':>6} {'K^T':>4}")
    for key, r in results.items():
        pv, pt, pk = METHODS[key][2]
        print(f"{r['label']:<22} {r['val']:>6.2f} {r['test']:>6.2f} {r['k']:>4d} {r['ari']:>6.3f} "
              f"{r['minutes']:>5.1f} | {pv:>10.2f} {pt:>6.2f} {pk:>4d}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(results, indent=2))
    for b in NAMES:
        runs = {f"ρ={rho}": curves[f"hcfl-{b}-{rho}"] for rho in (0.05, 0.1, 0.3) if f"hcfl-{b}-{rho}" in curves}
        if runs:
            plot_num_clusters(runs, out / f"kt-{b}.png", f"HCFL+({NAMES[b]}): $K^t$ (HCFL paper Fig. 4)")


if __name__ == "__main__":
    main()

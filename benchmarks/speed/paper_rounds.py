"""Seconds per round at the FedRC paper's Table 1 scale, per device mode, and the whole table estimated from them.

Setting: ``configs/s4-diverse-shift-fashion-mnist.yaml`` at the paper's scale (300 clients with all their data,
≈ 160 training samples each, batch 128, K = 3, one local epoch, evaluation every round), IFCA and FedRC, a few
rounds each on one federation; the figure is the median of the ``seconds`` column of ``rounds.csv`` over rounds 2..R
(round 1 carries the start-up: cuDNN autotuning, CUDA graph captures, allocations). Modes, in this order:

* ``light-det``  the shipped light CNN (8/16 channels, FC 64), ``deterministic=true`` (comparable with the figures
  measured before the fast default: 1.23 s per IFCA round, 1.99 s per FedRC round on one H100, 2026-11-25);
* ``light-fast`` the same model in the default (fast) mode;
* ``paper-det``  the FedRC paper's code CNN (32/64 channels, FC 2048), ``deterministic=true``;
* ``paper-fast`` the paper CNN in the default mode;
* ``paper-bf16`` the paper CNN in the default mode with ``precision=bf16``.

Each result is printed, and appended to ``--summary`` (a markdown file) as soon as it exists. Once a mode has both
methods, the line after it estimates the whole Table 1 (9 methods × 3 seeds × 200 rounds) in that mode:
``3 × 200 × (5 t_IFCA + 5 t_FedRC)`` seconds — FedAvg, CFL, CFL (3) and FeSEM train one unit per client as IFCA does
(IFCA's E-step makes it an upper bound for them), FedEM and FedSoft train K units per client as FedRC does, and
FedRC-FT costs about two FedRC rounds (its evaluation fine-tunes every client's K models). An estimate until the
table itself is timed.

Usage: python benchmarks/speed/paper_rounds.py [--modes light-det,light-fast,paper-det,paper-fast,paper-bf16]
       [--methods ifca,fedrc] [--rounds 5] [--summary summary.md] [--out DIR] [--set data_dir=PATH]
       (tiny CPU check: --clients 4 --fraction 0.003 --test-size 20 --rounds 2 --set device=cpu)
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # first: pins BLAS threads before numpy/torch load

import fedcluster
from fedcluster.reproduce.specs_fedrc import PAPER_CNN

CONFIG = "s4-diverse-shift-fashion-mnist"
MODES: dict[str, tuple[str, dict[str, Any]]] = {  # mode -> (model, run keys)
    "light-det": ("light", {"deterministic": True}),
    "light-fast": ("light", {}),
    "paper-det": ("paper", {"deterministic": True}),
    "paper-fast": ("paper", {}),
    "paper-bf16": ("paper", {"precision": "bf16"}),
}
TABLE1_SEEDS, TABLE1_ROUNDS = 3, 200
HARD_LIKE, SOFT_LIKE = 5, 5  # Table 1's methods costed as IFCA rounds / as FedRC rounds (FedRC-FT counts twice)


def per_round(run_dir: Path) -> tuple[float, float]:
    """(median seconds of rounds 2..R, seconds of round 1) from a run's rounds.csv."""
    with open(run_dir / "rounds.csv", newline="") as f:
        seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    later = seconds[1:] or seconds
    return statistics.median(later), seconds[0]


def table1_minutes(t_ifca: float, t_fedrc: float) -> float:
    return TABLE1_SEEDS * TABLE1_ROUNDS * (HARD_LIKE * t_ifca + SOFT_LIKE * t_fedrc) / 60


def append(summary: Path | None, line: str) -> None:
    print(line, flush=True)
    if summary is not None:
        with open(summary, "a") as f:
            f.write(line + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--methods", default="ifca,fedrc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--fraction", type=float, default=1.0, help="share of each client's samples kept")
    ap.add_argument("--test-size", type=int, default=10**9, help="images per test client (default: all)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="run key for every run")
    ap.add_argument("--summary", type=Path, default=None, help="markdown file the rows are appended to")
    ap.add_argument("--out", default=f"runs/paper-rounds-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--no-header", action="store_true",
                    help="rows only in --summary (a later process of the same table: one mode per process)")
    args = ap.parse_args()
    unknown = [m for m in args.modes.split(",") if m not in MODES]
    if unknown:
        raise SystemExit(f"paper_rounds: unknown mode(s) {unknown}; choose from {', '.join(MODES)}")
    extra = common.overrides(args.set)
    base = {**common.shipped(CONFIG, drop=("algorithm",)), "num_clients": args.clients, "rounds": args.rounds,
            "batch_size": 128, "lr": 0.1, "seed": 0, "checkpoint_every": 10**9, **extra}
    t0 = time.perf_counter()
    fed = common.shrink(fedcluster.build_federation(common.without_algorithm(base)), args.fraction, args.test_size, 0)
    sizes = fed.train.sizes
    header = None if args.no_header else args.summary
    append(header, f"\nFederation: {fed.num_clients} clients, median {int(sorted(sizes)[len(sizes) // 2])} "
                   f"training samples, built in {time.perf_counter() - t0:.1f} s; {args.rounds} rounds a run, "
                   "s/round = median of rounds 2..R (round 1 in brackets)\n")
    append(header, "| mode | model | method | s/round | round 1 s | final val acc |")
    append(header, "|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        model, keys = MODES[mode]
        model_keys = common.overrides(PAPER_CNN) if model == "paper" else {}
        times: dict[str, float] = {}
        for method in args.methods.split(","):
            algorithm = {"name": method} if method == "fedavg" else {"name": method, "num_clusters": 3}
            out = Path(args.out) / mode / method
            res, _ = common.run({**base, **model_keys, **keys, **extra, "algorithm": algorithm}, out, fed)
            med, first = per_round(Path(res.run_dir))
            times[method] = med
            append(args.summary, f"| {mode} | {model} | {method} | {med:.3f} | {first:.2f} | "
                                 f"{res.summary['final']['val_acc']:.4f} |")
        if "ifca" in times and "fedrc" in times:
            append(args.summary, f"| {mode} | Table 1 estimate | 9 methods × 3 seeds × 200 rounds | "
                                 f"{table1_minutes(times['ifca'], times['fedrc']):.1f} min (estimate) | | |")


if __name__ == "__main__":
    main()

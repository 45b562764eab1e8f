"""Seconds per round with 1, 2, ... processes (``ranks=N``: torch.distributed, gloo on the CPU, NCCL on GPUs).

Each variant is a normal ``fedcluster run`` in a fresh interpreter (``ranks=1``: the in-process engine;
``ranks=N``: N ranks started by torchrun's elastic agent); variants are interleaved over ``--repeats``. The
figure is the median of the per-round ``seconds`` of rounds.csv over every round but the first (start-up)
and every repeat: the whole round, i.e. training, collectives, the server step, evaluation and the ranks'
consistency check.

Usage: python benchmarks/speed/distributed_ranks.py [--ranks 1,2] [--repeats 2] [--device cpu]
       [--out runs/distributed-ranks] [key=value ...]   (default: fedavg, digits, mlp, 20 clients, 8 rounds)
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
from pathlib import Path

DEFAULT = ["algorithm=fedavg", "dataset=digits", "scenario=concept-swap", "model=mlp", "num_clients=20",
           "rounds=8", "progress=false", "threads=1"]


def seconds(run_dir: Path) -> list[float]:
    with (run_dir / "rounds.csv").open() as f:
        return [float(r["seconds"]) for r in csv.DictReader(f)][1:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="runs/distributed-ranks")
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    args = [*DEFAULT, f"device={a.device}", *a.overrides]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    per: dict[int, list[float]] = {int(n): [] for n in a.ranks.split(",")}
    for rep in range(a.repeats):
        for n in per:
            out = Path(a.out) / f"ranks{n}-rep{rep}"
            cmd = [sys.executable, "-m", "fedcluster", "run", *args, f"ranks={n}", f"out={out}"]
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            per[n] += seconds(out)
    print(f"config: {' '.join(args)}")
    for n, s in per.items():
        print(f"ranks={n}: median {statistics.median(s) * 1000:.1f} ms/round over {len(s)} rounds")


if __name__ == "__main__":
    main()

"""Seconds per round: the Flower path (Simulation Runtime, Ray) vs the in-process engine.

Same config and seed for both: FedAvg on the digits concept-swap federation, ``--clients`` clients (all
participate), one local epoch. The first round of each path is reported apart (start-up: Ray actors, one
federation build per actor) from the mean of the following rounds. Both paths write a normal run
directory; the per-round seconds come from their rounds.csv.

Usage: python benchmarks/speed/flower_overhead.py [--clients 100] [--rounds 4] [--models logistic,light-cnn]
       [--algorithm fedavg] [--out runs/flower-overhead]
(Flower needs the ``flower`` extra; the in-process engine uses engine=auto.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # first: pins BLAS threads before numpy/torch load

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run


def seconds(run_dir: Path) -> list[float]:
    import csv

    with (run_dir / "rounds.csv").open() as f:
        return [float(r["seconds"]) for r in csv.DictReader(f)]


def overrides(model: str, clients: int, rounds: int, algorithm: str) -> list[str]:
    return [f"algorithm={algorithm}", "dataset=digits", "scenario=concept-swap", f"model={model}",
            f"num_clients={clients}", f"rounds={rounds}", *common.QUIET]


def in_process(args: list[str], out: Path) -> tuple[list[float], float]:
    cfg, typed = resolve(load_raw(None, [*args, f"out={out}"]))
    t0 = time.perf_counter()
    Run(cfg, typed).execute()
    return seconds(out), time.perf_counter() - t0


def on_flower(args: list[str], out: Path, clients: int) -> tuple[list[float], float]:
    from fedcluster.flower.commands import resolved_yaml
    from fedcluster.flower.server import FlowerOptions
    from fedcluster.flower.simulation import simulate

    config_yaml, _ = resolved_yaml(None, [*args, f"out={out}"])
    t0 = time.perf_counter()
    simulate(config_yaml, FlowerOptions(), clients)
    return seconds(out), time.perf_counter() - t0


def row(name: str, secs: list[float], wall: float) -> str:
    rest = secs[1:] or secs
    return f"| {name} | {secs[0]:.2f} | {sum(rest) / len(rest):.3f} | {wall:.1f} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--models", default="logistic,light-cnn")
    p.add_argument("--algorithm", default="fedavg")
    p.add_argument("--out", default="runs/flower-overhead")
    a = p.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    print(f"{a.algorithm}, {a.clients} clients, {a.rounds} rounds\n")
    print("| model / path | first round s | later rounds s/round | wall s |\n|---|---|---|---|")
    for model in a.models.split(","):
        args = overrides(model, a.clients, a.rounds, a.algorithm)
        base = Path(a.out) / f"{stamp}-{model}"
        secs, wall = in_process(args, base / "in-process")
        print(row(f"{model} / in-process", secs, wall), flush=True)
        secs, wall = on_flower(args, base / "flower", a.clients)
        print(row(f"{model} / Flower simulation", secs, wall), flush=True)


if __name__ == "__main__":
    main()

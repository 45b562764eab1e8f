"""Seconds per round and peak memory of FedAvg and FedRC (K = 3) as the federation grows (100 → 10,000 clients).

Each federation is synthetic (benchmarks/_synthetic.py: ``--samples`` images of 1×28×28 per client, three
concepts), 10 % of the clients train per round (``--fraction``), the model is ``--model`` (default mlp) on the
engine's fast path for the device. Every (device, method, clients) point runs in a fresh process, so that its
peak memory is its own: peak resident memory of the process (CPU), peak allocated CUDA memory (GPU). The
``state_mb`` column is the algorithm's own state (its ``state_dict``: models, Ω, per-sample weights), which
must grow with the federation (N samples × K weights) and never hold K × clients models.

Seconds per round: median over ``--rounds`` training rounds after one warm-up round, evaluation excluded; wall
time, and the process's CPU time (``cpu_s_per_round``: less sensitive to other work on a shared machine; with
``--threads 1`` the two agree on an idle one).
Writes ``--out`` (CSV) and a plot beside it (PNG): seconds per round and peak memory against the clients.

Usage: python benchmarks/speed/scaling.py [--clients 100,1000,10000] [--devices cpu,cuda] [--rounds 3] [--threads N]
       [--out benchmarks/results/scaling.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import numpy as np
import torch

METHODS = {"fedavg": [], "fedrc": ["algorithm.num_clusters=3"]}
COLUMNS = ["device", "method", "clients", "cohort", "seconds_per_round", "peak_mb", "state_mb", "cpu_s_per_round",
           "model"]


def one_point(device: str, method: str, clients: int, args: argparse.Namespace) -> dict[str, Any]:
    """Runs in the child process: build, warm up, time ``args.rounds`` rounds, report peak memory."""
    from _synthetic import synthetic_federation

    from fedcluster.config.run_config import load_raw, resolve
    from fedcluster.engine.params import state_bytes
    from fedcluster.engine.runner import Run

    fed = synthetic_federation(clients, args.samples, (1, 28, 28))
    with tempfile.TemporaryDirectory() as tmp:
        cfg, typed = resolve(load_raw(None, [
            f"algorithm={method}", *METHODS[method], f"model={args.model}", f"device={device}", "progress=false",
            f"clients_per_round={args.fraction}", f"rounds={args.rounds + 1}", f"out={Path(tmp) / 'run'}",
            *([f"threads={args.threads}"] if args.threads else [])]))
        run = Run(cfg, typed, fed=fed)
        times, cpu = [], []
        for t in range(args.rounds + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            run.alg.run_round(t, run.stream[t])
            if run.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        run.ctx.trainer.close()
        if run.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated() / 2**20
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        return {"device": device, "method": method, "clients": clients, "cohort": cfg.cohort_size(),
                "seconds_per_round": round(float(np.median(times[1:])), 4), "peak_mb": round(peak, 1),
                "state_mb": round(state_bytes(run.alg.state_dict()) / 2**20, 2),
                "cpu_s_per_round": round(float(np.median(cpu[1:])), 4), "model": args.model}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for (dev, method) in sorted({(r["device"], r["method"]) for r in rows}):
        pts = sorted((r for r in rows if r["device"] == dev and r["method"] == method), key=lambda r: r["clients"])
        xs = [r["clients"] for r in pts]
        axes[0].plot(xs, [r["seconds_per_round"] for r in pts], marker="o", label=f"{method} ({dev})")
        axes[1].plot(xs, [r["peak_mb"] for r in pts], marker="o", label=f"{method} ({dev})")
    for ax, title in zip(axes, ("seconds per round (10 % sampled)", "peak memory (MiB)"), strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("clients in the federation")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="100,1000,10000")
    ap.add_argument("--devices", default=None, help="default: cpu, plus cuda when PyTorch sees a GPU")
    ap.add_argument("--methods", default="fedavg,fedrc")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--samples", type=int, default=40, help="training samples per client")
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: PyTorch's)")
    ap.add_argument("--out", default="benchmarks/results/scaling.csv")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child: device,method,clients
    args = ap.parse_args()
    if args.one:
        dev, method, clients = args.one.split(",")
        print(json.dumps(one_point(dev, method, int(clients), args)))
        return
    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    print(" ".join(f"{c:>18}" for c in COLUMNS[:8]), flush=True)
    for dev in devices:
        for method in args.methods.split(","):
            for clients in (int(c) for c in args.clients.split(",")):
                cmd = [sys.executable, __file__, "--one", f"{dev},{method},{clients}", "--model", args.model,
                       "--samples", str(args.samples), "--fraction", str(args.fraction), "--rounds", str(args.rounds),
                       *(["--threads", str(args.threads)] if args.threads else [])]
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    raise SystemExit(f"scaling: {dev}/{method}/{clients} failed:\n{res.stderr[-2000:]}")
                row = json.loads(res.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(" ".join(f"{row[c]!s:>18}" for c in COLUMNS[:8]), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()

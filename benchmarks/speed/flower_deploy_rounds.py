"""Seconds per round of a real Flower deployment on this machine: one ``flower-superlink`` and one
``fedcluster flower node`` per client on loopback (``--insecure``), the run submitted with ``fedcluster
flower serve``. Variants, interleaved: ``warm`` (the default: each node's warm worker does the work) and
``cold`` (``--no-warm-worker`` and Flower's 1 s SuperExec poll: every ``flwr-clientapp`` process imports
PyTorch and builds the partition, as with a bare ``flower-supernode``). Prints each variant's per-round
seconds (rounds.csv) and the median of rounds 2.. over the repeats.

Usage: python benchmarks/speed/flower_deploy_rounds.py [--config configs/flower-ifca-digits.yaml] [--clients 3]
       [--rounds 3] [--repeats 1] [--variants warm,cold] [--out runs/flower-deploy]
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)


def stop(p: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if p.poll() is not None:
            return
        os.killpg(p.pid, sig)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            continue


def deployment(variant: str, config: str, clients: int, rounds: int, out: Path) -> list[float]:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "FLWR_HOME": str(out / "home"),
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    port = free_port()
    procs = [start([str(BIN / "flower-superlink"), "--insecure", "--port", str(port), "--database",
                    str(out / "state.db")], out / "superlink.log", env)]
    try:
        for i in range(clients):
            extra = ["--no-warm-worker"] if variant == "cold" else []
            node_env = {**env, "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "1.0"} if variant == "cold" else env
            procs.append(start([sys.executable, "-m", "fedcluster", "flower", "node", "--insecure", "--superlink",
                                f"127.0.0.1:{port}", "--partition-id", str(i), "--port", str(free_port()), *extra],
                               out / f"node{i}.log", node_env))
        run_dir = out / "run"
        cmd = [sys.executable, "-m", "fedcluster", "flower", "serve", config, f"num_clients={clients}",
               f"rounds={rounds}", f"out={run_dir}", "--superlink", f"127.0.0.1:{port}", "--insecure"]
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=(out / "serve.log").open("wb"), stderr=subprocess.STDOUT)
        print(f"  {variant}: serve took {time.perf_counter() - t0:.1f} s", flush=True)
        with (run_dir / "rounds.csv").open() as f:
            return [float(r["seconds"]) for r in csv.DictReader(f)]
    finally:
        for p in reversed(procs):
            stop(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "configs" / "flower-ifca-digits.yaml"))
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--variants", default="warm,cold")
    ap.add_argument("--out", default="runs/flower-deploy")
    args = ap.parse_args()
    later: dict[str, list[float]] = {}
    for rep in range(args.repeats):
        for variant in args.variants.split(","):
            secs = deployment(variant, args.config, args.clients, args.rounds, Path(args.out) / f"{variant}-{rep}")
            print(f"{variant} repeat {rep}: seconds per round {[round(s, 2) for s in secs]}", flush=True)
            later.setdefault(variant, []).extend(secs[1:])
    for variant, secs in later.items():
        print(f"{variant}: median of rounds 2..{args.rounds}: {statistics.median(secs):.2f} s "
              f"({len(secs)} rounds, {args.clients} nodes)")


if __name__ == "__main__":
    main()

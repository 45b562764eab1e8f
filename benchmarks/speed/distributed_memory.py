"""What each process of a run holds in memory with 1, 2, ... processes (torch.distributed ranks).

Every variant builds the run (federation, model, trainer, method) in fresh interpreters, one per rank, with
torch.distributed's env set here (gloo, this machine), and reports per rank, once the run is built: the bytes
of the federation's data tensors the rank keeps (inputs and labels of train, val and test), those its trainer
reads, its own resident memory (anonymous pages: not the pages of the federation cache it maps while reading
it) and its peak resident memory (all pages). No round is run.

Usage: python benchmarks/speed/distributed_memory.py [--ranks 1,2] [key=value ...]
       (default: fedavg, Fashion-MNIST, concept-swap, 8 clients)
       python benchmarks/speed/distributed_memory.py --child key=value ...   (one process; prints one JSON line)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT = ["algorithm=fedavg", "dataset=fashion-mnist", "scenario=concept-swap", "model=mlp", "num_clients=8",
           "progress=false", "threads=1"]


def status_bytes(field: str) -> int:
    """A memory figure of /proc/self/status (kB there): RssAnon (memory of the process's own, not pages of
    files it maps, such as the federation cache while it reads it) or VmHWM (peak resident, files included)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(f"{field}:"))


def child(args: list[str]) -> None:
    from fedcluster.app import launch
    from fedcluster.config.run_config import load_raw, resolve
    from fedcluster.data.sharded import held_bytes
    from fedcluster.engine.distributed import group

    cfg, typed = resolve(load_raw(None, args))
    run = launch.new_run(cfg, typed)
    gc.collect()
    trainer, splits = run.ctx.trainer, (run.fed.train, run.fed.val, run.fed.test)
    print(json.dumps({"rank": group.rank(), "held": held_bytes(run.fed),
                      "inputs": sum(s.local().x.nbytes for s in splits),
                      "trainer": trainer.x.nbytes + trainer.y.nbytes, "anon": status_bytes("RssAnon"),
                      "peak": status_bytes("VmHWM")}))
    run.dir.abandon()


def measure(args: list[str], ranks: int, out: Path) -> list[dict[str, int]]:
    """One line per rank of a run with ``ranks`` processes (``ranks=1``: the single-process run)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    base = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    envs = [base] if ranks == 1 else [
        {**base, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(ranks), "MASTER_ADDR": "127.0.0.1",
         "MASTER_PORT": port} for r in range(ranks)]
    procs = [subprocess.Popen([sys.executable, __file__, "--child", *args, f"out={out}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for env in envs]
    done = [p.communicate() for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("\n".join(err for _, err in done))
    return [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in done]


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1,2")
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    args = [*DEFAULT, *a.overrides]
    print(f"config: {' '.join(args)}")
    mb = 2**20
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in a.ranks.split(",")):
            for r in measure(args, n, Path(tmp) / f"ranks{n}"):
                print(f"ranks={n} rank {r['rank']}: data {r['held'] / mb:.1f} MiB (inputs {r['inputs'] / mb:.1f}), "
                      f"trainer {r['trainer'] / mb:.1f} MiB, own resident {r['anon'] / mb:.0f} MiB, "
                      f"peak resident {r['peak'] / mb:.0f} MiB")


if __name__ == "__main__":
    main()

"""Host time of a round's layout at the FedRC paper's Table 1 scale: the schedule of 300 clients × K = 3 units
(160 samples each, batch 128, one epoch) and the batch built from it with per-sample weights (FedRC's and FedEM's
responsibilities), which the host prepares every round before an accelerator trains.

Times are CPU seconds of this process (``time.process_time``, one torch thread: what a shared machine's other work
does not inflate), the median of ``--repeats`` repeats, the two parts interleaved. Compare revisions by running the
script with ``PYTHONPATH`` at each revision's ``src``.

Usage: python benchmarks/speed/round_layout.py [--clients 300] [--k 3] [--samples 160] [--batch 128] [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np
import torch

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.kernels import build_batch
from fedcluster.models import build_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--samples", type=int, default=160)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    sizes = np.full(args.clients, args.samples)
    clients = np.repeat(np.arange(args.clients), args.k)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    init = stack([get_params(build_model("light-cnn", (1, 28, 28), 10))] * args.k)
    weights = [np.random.default_rng(u).random(args.samples) for u in range(len(clients))]
    times: dict[str, list[float]] = {"schedule": [], "batch": []}
    for r in range(args.repeats):
        t = time.process_time()
        schedule = make_schedule(sizes, clients, 0, r, 1, args.batch)
        times["schedule"].append(time.process_time() - t)
        t = time.process_time()
        build_batch(init, clients, ptr, schedule, weights, None, init_index=np.tile(np.arange(args.k), args.clients))
        times["batch"].append(time.process_time() - t)
    units = f"{args.clients} clients × K = {args.k}"
    print(f"{units}: schedule {statistics.median(times['schedule']) * 1e3:.1f} ms, "
          f"batch with weights {statistics.median(times['batch']) * 1e3:.1f} ms (CPU time, median of {args.repeats})")


if __name__ == "__main__":
    main()

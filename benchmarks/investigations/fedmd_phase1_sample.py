"""FedMD's Phase-1 sample size on the s2-large-population reproductions (25,000 tiny rotated-image clients, k = 2
or 4 rotations, 200 Phase-2 rounds): the two-phase method exactly as those entries run it, with
``algorithm.phase1_clients`` (the clients sampled afresh every Phase-1 round for the subspace estimate; 0 = every
client) set to each given value.

    python benchmarks/investigations/fedmd_phase1_sample.py [--k 2] --seeds 0 1 2 --phase1-clients 1000 5000 0
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # first: pins BLAS threads before numpy/torch load

from fedcluster.reproduce import run_fedmd_rotation as rotation  # the two-phase method as the entries run it
from fedcluster.reproduce.federations import s2_rotation  # the entries' federation (no public API builds it)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--phase1-clients", type=int, nargs="+", default=[1000, 5000, 0])
    ap.add_argument("--k", type=int, default=2, choices=[2, 4], help="rotations (s2-large-population / -k4)")
    ap.add_argument("--clients", type=int, default=25000)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    k = args.k
    phase1 = min(rotation.PHASE1.get(k, 10), max(1, args.rounds - 1))
    print("k seed phase1_clients final_ari final_test_error_%")
    for seed in args.seeds:
        fed = s2_rotation(k, args.clients, seed)
        for n in args.phase1_clients:
            over = ["model=logistic", "lr=0.1", "clients_per_round=100", f"seed={seed}", "eval_every=1", "threads=1",
                    "progress=false", f"rounds={args.rounds + phase1}",
                    *rotation.method_overrides("two-phase", phase1, k=k), f"algorithm.phase1_clients={n}"]
            with tempfile.TemporaryDirectory() as tmp:
                res, _ = common.run(common.overrides(over), Path(tmp) / "run", fed)
                last = res.rows[-1]
            print(f"{k} {seed} {n} {last['ari']:.3f} {100 * (1 - last['test_acc']):.2f}", flush=True)


if __name__ == "__main__":
    main()

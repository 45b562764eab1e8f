"""What SCWU does to HCFL+'s mixture weights: the s1-table7-scwu reproduction's small budget (Fashion-MNIST
hcfl-shift, 40 clients × ¼ of their data, 30 rounds, MLP), HCFL+(FedEM) and HCFL+(FedRC) at ρ = 0.3 with and
without SCWU, one line per run with the final K, best test accuracy, how one-hot the training clients' Ω rows are
(mean largest weight), how many clusters a test client's fitted weights spread over (mean 1 / Σ_k w_k²) and the
mean distance between the cluster heads.

    python benchmarks/investigations/scwu_weights.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from fedcluster.reproduce import specs_hcfl
from fedcluster.reproduce.run_common import make_run
from fedcluster.reproduce.run_suite import build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    exp, budget = specs_hcfl.S1_TABLE7, specs_hcfl.SMALL
    setting = exp.settings[0]
    print("seed backbone scwu K best_test train_max_omega test_effective_clusters head_distance")
    for seed in args.seeds:
        base = [*exp.overrides, f"num_clients={budget.clients}", f"rounds={budget.rounds}", *budget.overrides,
                *setting.overrides, f"seed={seed}", "threads=1", "progress=false"]
        fed = build(exp, budget, setting, base, seed)
        for backbone in ("fedem", "fedrc"):
            for scwu in ("true", "false"):
                over = [*base, "algorithm=hcfl-plus", f"algorithm.backbone={backbone}", "algorithm.rho=0.3",
                        f"algorithm.scwu={scwu}"]
                with tempfile.TemporaryDirectory() as tmp:
                    run = make_run(over, Path(tmp) / "run", fed)
                    run.execute()
                    best = max(r["test_acc"] for r in run.dir.read_rounds() if r["test_acc"] == r["test_acc"])
                    alg = run.alg
                    test = alg.ctx.fed.test  # the held-out form the run scores (its fit mask)
                    with torch.no_grad():
                        w = np.asarray(alg.fit_weights(alg.outputs(test.x), test), dtype=np.float64)
                    head = alg.models["head.weight"].flatten(1).double()
                    k = len(head)
                    spread = torch.cdist(head, head).sum().item() / max(k * k - k, 1)
                    print(f"{seed} {backbone} {scwu} {k} {best:.3f} {alg.omega.max(1).mean():.3f} "
                          f"{np.mean(1 / (w ** 2).sum(1)):.2f} {spread:.3f}", flush=True)


if __name__ == "__main__":
    main()

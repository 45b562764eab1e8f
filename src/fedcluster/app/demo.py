"""``fedcluster demo`` (and ``fedcluster run`` with no arguments): what clustered FL is for, in under a minute.

The embedded digits data set is split over clients that belong to three *concepts*: the same kind of images,
but each concept labels them differently (y, 9 − y, y + 1 mod 10). One global model (FedAvg) cannot fit
conflicting labels; CFL (Sattler et al.) starts from one model and splits a cluster when its clients' updates
disagree, so it finds the number of clusters, one model per concept and which client belongs to which. Both
run on the same federation; a short table compares them and names the command that draws the clusters.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# The federation and training settings of the demo (configs/demo.yaml holds the same, tested).
FEDERATION = {"dataset": "digits", "scenario": "concept-swap", "num_clients": 12, "seed": 0}
TRAINING = {"model": "logistic", "rounds": 40, "local_epochs": 2, "batch_size": 32, "lr": 0.5, "threads": 1}
METHODS: dict[str, dict[str, Any]] = {
    "fedavg": {"algorithm": "fedavg"},
    "cfl": {"algorithm": "cfl"},
}
CLUSTERED = "cfl"


def demo_config(method: str) -> dict[str, Any]:
    """The full configuration (YAML-style mapping) of one demo run."""
    return {**FEDERATION, **TRAINING, **METHODS[method]}


def run_demo(out: str | None = None, progress: bool = True) -> int:
    """Run FedAvg and the clustered method, print the comparison; returns the CLI exit status."""
    from fedcluster.storage import folders

    if out is not None:
        from fedcluster.storage.paths import output_path

        return _demo(output_path(out, f"--out {out}", folder=True), progress)
    # -2, -3, ... when a demo started in the same second has the name
    root = folders.claim_new_dir(Path("runs") / f"{folders.stamp()}-demo")
    with folders.removed_if_empty(root):  # a demo stopped before its first run leaves no folder
        return _demo(root, progress)


def _demo(root: Path, progress: bool) -> int:
    from fedcluster.app import api

    fed = api.build_federation(demo_config("fedavg"), progress=progress)
    print("fedcluster demo: FedAvg (one model) vs CFL (splits into clusters as needed) on the same federation\n"
          f"{fed.summary()}\n"
          "  three concepts label the same digit images differently (y, 9 − y, y + 1 mod 10): one model "
          "cannot fit them all.", file=sys.stderr)
    results = {}
    for method in METHODS:
        results[method] = api.run(demo_config(method), federation=fed, out=str(root / method), progress=progress)
    print(comparison_table(results))
    clustered = results[CLUSTERED]
    print("\nval acc: clients' own validation data with their model; test acc: new clients of each concept;\n"
          "ARI: learned clusters vs the true concepts (1 = recovered exactly, 0 = no better than chance).\n"
          f"\nsee the clusters:   fedcluster report {clustered.run_dir}\n"
          "                    (clusters.png: where each concept's data went; num_clusters.png: K^t; curves.png)\n"
          "another method:     fedcluster run configs/demo.yaml algorithm=ifca algorithm.num_clusters=3\n"
          "all keys:           fedcluster run --help      methods: fedcluster list\n"
          "paper experiments:  configs/ (fedcluster init copies them into the current folder)")
    return 0


def comparison_table(results: dict[str, Any]) -> str:
    """One row per method: final validation and test accuracy, ARI, clusters, seconds."""
    lines = [f"{'method':<8} {'val acc':>8} {'test acc':>9} {'ARI':>6} {'clusters':>9} {'seconds':>8}"]
    for method, res in results.items():
        final = res.summary["final"]
        lines.append(f"{method:<8} {final['val_acc']:>8.3f} {final['test_acc']:>9.3f} {final['ari']:>6.2f} "
                     f"{int(final['num_clusters']):>9d} {res.summary['wall_seconds']:>8.1f}")
    return "\n".join(lines)

"""Clustering, fedcluster beside the CFL-GP paper's own code
(github.com/Heasung-Kim/clustered-federated-learning-via-gradient-based-partitioning), on one rotated-image federation.

Protocol (that code as run, ``main.py``'s defaults where the paper's App. F.5 does not say otherwise): C clients of
the rotation scenario (eight angles in four pairs, 0/15, 90/105, 180/195, 270/275°; the clients of a pair are one
cluster), its MLP 784-200-10 (``SimpleLinear``), SGD lr 0.1, batch b = 64, gradient averaging (one minibatch gradient
per client and round), K = 4. Both sides get the same images: fedcluster builds the federation and each client of
the paper's code receives that client's training rows as its training set and its held-out rows as its test set
(instead of its own random 70/30 split). Method by method:

- CFL-GP: ``CentralUnit.run_CFLGP`` (clustering period P = 2, no cluster update from round ``--t-cl`` on, its
  ``clustering_termination_threshold``) beside ``algorithm=cflgp`` with ``period=2``, ``t_cl`` and the
  stop-when-stable rule off;
- IFCA: ``run_IFCA`` (the highest accuracy on one minibatch, one minibatch gradient step) beside ``algorithm=ifca``
  as that code runs it (``assign_by=accuracy``, ``assign_on=batch``, ``steps=1``);
- MADMO: ``run_MADMO`` (EPS_1 = 0.4, EPS_2 = 1.6 on gradient norms, splits when c_round > 5) beside
  ``algorithm=cfl`` with one minibatch step (``steps=1``), ``tol1 = 0.4·lr``, ``tol2 = 1.6·lr``, ``warmup=6``.

Printed per method and side: the ARI of the clustering against the angle pairs after a few rounds, the first round
with ARI = 1, the number of clusters some client is in at the end and the accuracy on the held-out rows (the
paper's code measures it at the start of its last round, fedcluster after it). Seeds differ in kind (the paper's
code draws from the global torch / NumPy generators seeded with ``--seed``, fedcluster from its own), so compare
behaviour over a few seeds, not round by round.

The paper's code is not part of fedcluster: pass the path of a checkout of it. It logs to its own folders (tensorboard
events, a log file, a pickle of its metrics each round): they go to a temporary folder that is removed, and nothing
of them is read back; its console output is silenced. Where scikit-learn no longer takes ``affinity=`` (1.4 on), its
MADMO bi-partition (``learning_agent.utils.cluster_clients``, complete linkage on −cos) is given the same clustering
with ``metric=``. Without ``--paper-code`` the script says so and exits 0.

Usage: python benchmarks/fidelity/cflgp_code_side_by_side.py --paper-code PATH [--methods cflgp,ifca,madmo]
       [--rounds 40] [--clients 32] [--samples 16000] [--dataset fashion-mnist] [--seeds 1] [--t-cl 10]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import math
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.engine.runner import Run
from fedcluster.metrics.clustering import clustering_ari

LR, BATCH, K = 0.1, 64, 4
PAPER_NAME = {"cflgp": "CFLGP", "ifca": "IFCA", "madmo": "MADMO"}
SHOWN = (1, 2, 5, 10, 20, 40, 100, 200)  # rounds whose ARI is printed (those within --rounds, and the last)


def ours_keys(method: str, t_cl: int) -> tuple[str, ...]:
    """fedcluster's run keys for ``method`` as the paper's code runs it."""
    return {"cflgp": ("algorithm=cflgp", f"algorithm.num_clusters={K}", "algorithm.period=2", f"algorithm.t_cl={t_cl}",
                      "algorithm.stable_stop=false"),
            "ifca": ("algorithm=ifca", f"algorithm.num_clusters={K}", "algorithm.assign_by=accuracy",
                     "algorithm.assign_on=batch", "algorithm.steps=1"),
            "madmo": ("algorithm=cfl", f"algorithm.tol1={0.4 * LR:g}", f"algorithm.tol2={1.6 * LR:g}",
                      "algorithm.warmup=6", "algorithm.steps=1")}[method]


def import_paper_code(path: Path) -> dict[str, Any]:
    """The paper code's modules, imported from its checkout (its files import each other by top-level name)."""
    sys.path.insert(0, str(path))
    code = {n.rsplit(".", 1)[-1]: importlib.import_module(n) for n in (
        "global_config", "learning_agent.utils", "learning_agent.client", "learning_agent.central_unit",
        "model.neural_networks.simple_neural_classification.simple_linear")}
    code["global_config"].global_logger.setLevel("WARNING")
    from sklearn.cluster import AgglomerativeClustering
    if "affinity" not in inspect.signature(AgglomerativeClustering).parameters:
        def cluster_clients(similarity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # the same, with metric=
            labels = AgglomerativeClustering(metric="precomputed", linkage="complete").fit(-similarity).labels_
            return np.argwhere(labels == 0).flatten(), np.argwhere(labels == 1).flatten()
        code["utils"].cluster_clients = cluster_clients
    return code


def client_rows(split: Any, i: int) -> torch.utils.data.TensorDataset:
    lo, hi = int(split.ptr[i]), int(split.ptr[i + 1])
    return torch.utils.data.TensorDataset(split.x[lo:hi].clone(), split.y[lo:hi].clone())


def paper_side(code: dict[str, Any], method: str, fed: Any, rounds: int, t_cl: int, seed: int, out: Path
               ) -> tuple[list[float], int, float]:
    """The paper code's run: (ARI after every round, clusters at the end, held-out accuracy %)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    model = code["simple_linear"].SimpleLinear
    clients = [code["client"].Client(
        model_class=model, optimizer=lambda p: torch.optim.SGD(p, lr=LR), local_dataset=client_rows(fed.train, i),
        test_dataset=client_rows(fed.val, i), use_scheduler=False, batch_size=BATCH, train_dataset_ratio=0.7,
        local_update_epoch=1, task="classification", device=torch.device("cpu")) for i in range(fed.num_clients)]
    n_models = fed.num_clients if method == "madmo" else K  # MADMO's splits need a model slot each
    unit = code["central_unit"].CentralUnit(
        model_class=model, clients=clients, name=method, clustering_period=2, n_communication_rounds=rounds,
        learning_rate=LR, n_models=n_models, results_path_name=str(out), load=False, optimizer_name="sgd",
        algorithm=PAPER_NAME[method], evaluation_interval=10**9, protocol="gradient_averaging",
        subprotocol="no_subprotocol", task="classification", use_reduced_G=False, unknown_k=False, warmup_epoch=0,
        clustering_termination_threshold=t_cl, device=torch.device("cpu"))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        unit.train()
    ids = [np.asarray(unit.metrics[f"c_round_{t}"]["estimated_cluster_ids"]) for t in range(rounds)]
    aris = [clustering_ari(fed.true_cluster, a, int(a.max()) + 1) for a in ids]
    accuracy = 100 * float(np.mean(unit.metrics[f"c_round_{rounds - 1}"]["client_accuracy"]))
    return aris, len(np.unique(ids[-1])), accuracy


def our_side(method: str, fed: Any, base: list[str], rounds: int, t_cl: int, seed: int, out: Path
             ) -> tuple[list[float], int, float]:
    """fedcluster's run with the matching keys: (ARI after every round, clusters at the end, held-out accuracy %)."""
    cfg, typed = resolve(load_raw(None, [*base, f"seed={seed}", f"rounds={rounds}", f"out={out}",
                                         *ours_keys(method, t_cl)]))
    run = Run(cfg, typed, fed=fed)
    run.execute()
    rows = run.dir.read_rounds()
    used = len(np.unique(run.alg.assignment()))  # clusters some client is in (as counted for the paper's code)
    return [r["ari"] for r in rows], used, 100 * rows[-1]["val_acc"]


def first_one(aris: list[float]) -> str:
    hit = next((t + 1 for t, a in enumerate(aris) if not math.isnan(a) and a >= 1 - 1e-9), None)
    return "never" if hit is None else str(hit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper-code", type=Path, help="a checkout of the CFL-GP paper's code")
    ap.add_argument("--methods", default="cflgp,ifca,madmo")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--samples", type=int, default=16000, help="training images drawn for the federation")
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--t-cl", type=int, default=10, help="no cluster update from this round on (CFL-GP)")
    args = ap.parse_args()
    if args.paper_code is None:
        print("skipped: no --paper-code PATH (a checkout of github.com/Heasung-Kim/"
              "clustered-federated-learning-via-gradient-based-partitioning) was given")
        return
    if not (args.paper_code / "learning_agent" / "central_unit.py").is_file():
        print(f"--paper-code {args.paper_code}: no learning_agent/central_unit.py there; give the path of a checkout "
              "of the CFL-GP paper's code", file=sys.stderr)
        raise SystemExit(2)
    unknown = set(args.methods.split(",")) - set(PAPER_NAME)
    if unknown:
        print(f"--methods: unknown {sorted(unknown)}; choose from {','.join(PAPER_NAME)}", file=sys.stderr)
        raise SystemExit(2)
    torch.set_num_threads(1)
    code = import_paper_code(args.paper_code.resolve())
    base = [f"dataset={args.dataset}", "scenario=rotation", f"num_clients={args.clients}",
            f"scenario.samples={args.samples}", "model=mlp", "model.hidden=[200]", f"lr={LR}", f"batch_size={BATCH}",
            "local_epochs=1", "clients_per_round=1.0", "progress=false", "threads=1", "checkpoint_every=100000"]
    shown = [t for t in SHOWN if t < args.rounds] + [args.rounds]
    print(f"{args.clients} clients, {args.samples} {args.dataset} images in 8 rotations (4 pairs), MLP 784-200-10, "
          f"b = {BATCH}, lr {LR}, K = {K}, {args.rounds} rounds; ARI after rounds {shown}")
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            cfg, typed = resolve(load_raw(None, [*base, f"seed={seed}", f"out={tmp}/fed"]))
            fed = build_federation(cfg, typed["scenario"], use_cache=False)
            for method in args.methods.split(","):
                sides = {"paper code": paper_side(code, method, fed, args.rounds, args.t_cl, seed,
                                                  Path(tmp) / f"paper-{method}-{seed}"),
                         "fedcluster": our_side(method, fed, base, args.rounds, args.t_cl, seed,
                                                Path(tmp) / f"ours-{method}-{seed}")}
                for side, (aris, clusters, acc) in sides.items():
                    curve = " ".join(f"{aris[t - 1]:.2f}" for t in shown)
                    print(f"seed {seed} {method:6s} {side:10s} ARI {curve}  first ARI 1: {first_one(aris):>5s}  "
                          f"clusters {clusters}  acc {acc:.1f} %", flush=True)


if __name__ == "__main__":
    main()

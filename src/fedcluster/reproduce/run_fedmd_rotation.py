"""FedMD paper §V-D runner: FedMD two-phase vs random-start IFCA, FedAvg and the oracle on tiny rotated-image
clients."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from fedcluster.errors import DivergedError
from fedcluster.reproduce.federations import s2_rotation
from fedcluster.reproduce.run_common import Emit, at_round, diverged, make_run
from fedcluster.reproduce.spec import Budget, Experiment

K = 2  # clusters (rotations) unless the setting's params give "k"
PHASE1 = {2: 5, 4: 10}  # FedMD paper: 5 moment-descent rounds for k = 2, 10 for k = 4
# FedMD paper §V-D: "In Phase 1, the parameter server samples 1,000 clients for subspace estimation"
PHASE1_CLIENTS = 1000


def method_overrides(label: str, phase1: int, delta: float = 1.0, k: int = K) -> list[str]:
    fedmd = ["algorithm=fedmd", f"algorithm.num_clusters={k}", "algorithm.local_steps=5"]
    solver = ["local_epochs=5", "batch_size=100"]  # 5 full-batch GD steps on every client (n_i ≤ 20)
    return {"two-phase": [*fedmd, "algorithm.init=fedmd", f"algorithm.phase1_rounds={phase1}",
                          f"algorithm.phase1_clients={PHASE1_CLIENTS}", f"algorithm.num_anchors={k}",
                          f"algorithm.delta={delta}"],
            "ifca-random": [*fedmd, "algorithm.init=random"],
            "fedavg": ["algorithm=fedavg", *solver],
            "oracle": ["algorithm=oracle", f"algorithm.num_clusters={k}", *solver]}[label]


def run(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
        emit: Emit) -> None:
    todo = [m for m in exp.methods if ("", m.label) not in done]
    if not todo:
        return
    k = int(exp.settings[0].params.get("k", K))
    fed = s2_rotation(k, budget.clients, seed)
    phase1 = min(PHASE1.get(k, 10), max(1, budget.rounds - 1))
    base = ["model=logistic", "lr=0.1", "clients_per_round=100", f"seed={seed}", "eval_every=1", *extra]
    for m in todo:
        shift = phase1 if m.label == "two-phase" else 0
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            r = make_run([*base, f"rounds={budget.rounds + shift}", *method_overrides(m.label, phase1, k=k)],
                         Path(tmp) / "run", fed)
            try:
                r.execute()
            except DivergedError as e:  # a result, not a crash: recorded, the page lists it
                emit(diverged(seed, "", m.label, exp, e, time.perf_counter() - t0))
                continue
            rows = r.dir.read_rounds()
        emit({"seed": seed, "setting": "", "method": m.label, "seconds": time.perf_counter() - t0,
              "metrics": {"err10": 100 * (1 - at_round(rows, "test_acc", 10 + shift)),
                          "err": 100 * (1 - rows[-1]["test_acc"]), "ari": rows[-1]["ari"]},
              "curve": [[r["round"] - shift, r["test_acc"]] for r in rows]})

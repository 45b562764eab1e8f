"""The generic runner: every (setting, method) of an experiment on one seed's federation, through ``Run``."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from fedcluster.data.federation import Federation
from fedcluster.errors import DivergedError
from fedcluster.reproduce.federations import merge, shrink
from fedcluster.reproduce.run_common import Emit, curve, diverged, federation, make_run, read_metrics
from fedcluster.reproduce.spec import Budget, Experiment, Setting


def build(exp: Experiment, budget: Budget, setting: Setting, base: Sequence[str], seed: int) -> Federation:
    """The seed's federation of one setting (shrunk to the budget; two datasets merged for s3-merge)."""
    if setting.params.get("merge"):
        half = [o for o in base if not o.startswith("num_clients=")]
        n = budget.clients // 2
        data_dir = any(o.startswith("data_dir=") for o in base)
        fed = merge(federation([*half, f"num_clients={budget.clients - n}"]),
                    federation([*half, f"num_clients={n}", f"dataset={'mnist' if data_dir else 'digits'}"]))
    else:
        fed = federation(base)
    if budget.fraction < 1 or budget.test_size:
        fed = shrink(fed, budget.fraction, budget.test_size, seed)
    return fed


def run(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
        emit: Emit) -> None:
    """Run what ``done`` (the (setting, method) pairs already recorded for this seed) lacks; ``emit`` each result."""
    for setting in exp.settings:
        todo = [m for m in exp.methods if setting.runs(m) and (setting.name, m.label) not in done]
        if not todo:
            continue
        base = [*exp.overrides, f"num_clients={budget.clients}", f"rounds={budget.rounds}", *budget.overrides,
                *setting.overrides, f"seed={seed}", *(["eval_train=true"] if exp.read == "best-train" else []),
                *extra]
        fed = build(exp, budget, setting, base, seed)
        full = int(fed.train.sizes.max())
        k = setting.params.get("num_clusters")  # a sweep over K: the methods' K = 3 becomes the setting's
        for method in todo:
            over = [*base, *(o.replace("=FULL", f"={full}") for o in method.overrides)]
            over = [o.replace("num_clusters=3", f"num_clusters={int(k)}") for o in over] if k else over
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                r = make_run(over, Path(tmp) / "run", fed)
                try:
                    summary = r.execute()
                except DivergedError as e:  # a result, not a crash: recorded, the page lists it
                    emit(diverged(seed, setting.name, method.label, exp, e, time.perf_counter() - t0))
                    continue
                rows = r.dir.read_rounds()
            emit({"seed": seed, "setting": setting.name, "method": method.label,
                  "metrics": read_metrics(exp.read, summary, rows), "curve": curve(rows, exp.curve),
                  "seconds": time.perf_counter() - t0})

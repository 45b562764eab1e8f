"""The generic runner: every (setting, method) of an experiment on one seed's federation, through ``Run``."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from fedcluster.data.federation import Federation
from fedcluster.errors import DivergedError
from fedcluster.reproduce.federations import merge, shrink
from fedcluster.reproduce.run_common import (
    Emit,
    at_best_train,
    best_train_round,
    curve,
    diverged,
    federation,
    make_run,
    read_metrics,
)
from fedcluster.reproduce.spec import Budget, Experiment, Method, Setting


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
        base = base_overrides(exp, budget, setting, seed, extra)
        fed = build(exp, budget, setting, base, seed)
        best_round: dict[str, int] = {}  # method label -> its best-train round (best-train reading)
        for method in sorted(todo, key=lambda m: bool(m.read_at)):  # a read_at partner runs first
            over = method_overrides(setting, method, base, fed)
            t0 = time.perf_counter()
            try:
                summary, rows = execute(over, fed)
            except DivergedError as e:  # a result, not a crash: recorded, the page lists it
                emit(diverged(seed, setting.name, method.label, exp, e, time.perf_counter() - t0))
                continue
            if exp.read == "best-train":
                best_round[method.label] = best_train_round(rows)
                at = _partner_round(exp, setting, method, best_round, base, fed) if method.read_at else None
                metrics = at_best_train(rows, at)
            else:
                metrics = read_metrics(exp.read, summary, rows)
            emit({"seed": seed, "setting": setting.name, "method": method.label, "metrics": metrics,
                  "curve": curve(rows, exp.curve), "seconds": time.perf_counter() - t0})


def base_overrides(exp: Experiment, budget: Budget, setting: Setting, seed: int, extra: Sequence[str]) -> list[str]:
    """The run-config overrides every method of ``setting`` shares at ``budget`` for ``seed``."""
    return [*exp.overrides, f"num_clients={budget.clients}", f"rounds={budget.rounds}", *budget.overrides,
            *setting.overrides, f"seed={seed}", *(["eval_train=true"] if exp.read == "best-train" else []), *extra]


def method_overrides(setting: Setting, method: Method, base: Sequence[str], fed: Federation) -> list[str]:
    """``base`` with ``method``'s overrides (FULL: the largest client's samples; a sweep over K: the setting's K)."""
    full = int(fed.train.sizes.max())
    k = setting.params.get("num_clusters")  # a sweep over K: the methods' K = 3 becomes the setting's
    over = [*base, *(o.replace("=FULL", f"={full}") for o in method.overrides)]
    return [o.replace("num_clusters=3", f"num_clusters={int(k)}") for o in over] if k else over


def execute(overrides: Sequence[str], fed: Federation) -> tuple[dict, list[dict[str, float]]]:
    """One run's summary and rounds (raises DivergedError)."""
    with tempfile.TemporaryDirectory() as tmp:
        r = make_run(overrides, Path(tmp) / "run", fed)
        summary = r.execute()
        return summary, r.dir.read_rounds()


def _partner_round(exp: Experiment, setting: Setting, method: Method, best_round: dict[str, int],
                   base: Sequence[str], fed: Federation) -> int | None:
    """The best-train round of ``method.read_at`` on this seed's federation: from this call's runs, else by running
    it again (its record was written by an earlier call); None if it diverges (then the run's own is used)."""
    if method.read_at not in best_round:
        partner = next(m for m in exp.methods if m.label == method.read_at)
        try:
            best_round[partner.label] = best_train_round(execute(method_overrides(setting, partner, base, fed),
                                                                 fed)[1])
        except DivergedError:
            return None
    return best_round[method.read_at]

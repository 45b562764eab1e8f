"""The generic runner: every (setting, method) of an experiment on one seed's federation, through ``Run``; a run
already in the run store (:mod:`fedcluster.reproduce.run_store`) is read from it instead of trained again."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from fedcluster.data.drift import Drift
from fedcluster.data.federation import Federation
from fedcluster.errors import DivergedError
from fedcluster.reproduce.federations import merge, shrink
from fedcluster.reproduce.run_common import (
    Emit,
    at_best_train,
    best_train_round,
    config,
    curve,
    diverged,
    federation,
    make_run,
    read_metrics,
)
from fedcluster.reproduce.run_store import RunStore, StoredRun, federation_digest, from_run, run_key
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
        emit: Emit, store: RunStore | None = None) -> None:
    """Run what ``done`` (the (setting, method) pairs already recorded for this seed) lacks; ``emit`` each result
    (``"run"``: its store key; ``"reused"``: read from ``store``, not trained)."""
    for setting in exp.settings:
        todo = [m for m in exp.methods if setting.runs(m) and (setting.name, m.label) not in done]
        if not todo:
            continue
        base = base_overrides(exp, budget, setting, seed, extra)
        fed = build(exp, budget, setting, base, seed)
        runs = SeedRuns(setting, base, fed, federation_digest(fed), store, budget.lr_grid)
        for method in sorted(todo, key=lambda m: bool(m.read_at)):  # a read_at partner runs first
            t0 = time.perf_counter()
            try:
                stored, reused = runs.get(method)
            except DivergedError as e:  # a result, not a crash: recorded, the page lists it
                emit(diverged(seed, setting.name, method.label, exp, e, time.perf_counter() - t0))
                continue
            if exp.read == "best-train":
                at = runs.partner_round(exp, method) if method.read_at else None
                metrics = at_best_train(stored.rows, at)
            else:
                metrics = read_metrics(exp.read, stored.summary, stored.rows)
            emit({"seed": seed, "setting": setting.name, "method": method.label, "metrics": metrics,
                  "curve": curve(stored.rows, exp.curve), "seconds": stored.seconds, "run": stored.key,
                  "reused": reused, **runs.grid_of(method)})


class SeedRuns:
    """The runs of one setting on one seed's federation: each trained once, or read from the store; with a
    learning-rate grid, a method's run is the one of its grid with the best validation accuracy."""

    def __init__(self, setting: Setting, base: Sequence[str], fed: Federation, digest: str,
                 store: RunStore | None, lr_grid: Sequence[float] = ()) -> None:
        self.setting, self.base, self.fed, self.digest, self.store = setting, base, fed, digest, store
        self.lr_grid = tuple(lr_grid)
        self.runs: dict[str, StoredRun] = {}
        self.grids: dict[str, dict[str, float | None]] = {}  # method label -> lr -> best validation accuracy

    def get(self, method: Method) -> tuple[StoredRun, bool]:
        """``method``'s run and whether it came from the store (raises DivergedError, with a grid when every
        rate diverged; a diverged run is not stored, so it is tried again by a later call)."""
        if method.label in self.runs:
            return self.runs[method.label], True
        over = method_overrides(self.setting, method, self.base, self.fed)
        if not self.lr_grid:
            found, reused = self._one(over)
        else:
            found, reused = self._best_of_grid(method, over)
        self.runs[method.label] = found
        return found, reused

    def grid_of(self, method: Method) -> dict[str, object]:
        """The record's fields of a grid: the rate kept and every rate's best validation accuracy (None: diverged)."""
        if method.label not in self.grids:
            return {}
        scores = self.grids[method.label]
        return {"lr": float(max((lr for lr in scores if scores[lr] is not None), key=lambda lr: scores[lr] or 0.0)),
                "grid": scores}

    def _best_of_grid(self, method: Method, over: Sequence[str]) -> tuple[StoredRun, bool]:
        """The run of best validation accuracy (summary's best val_acc; the first rate on a tie) over the grid."""
        scores: dict[str, float | None] = {}
        best: tuple[float, StoredRun, bool] | None = None
        error: DivergedError | None = None
        for lr in self.lr_grid:
            try:
                run, reused = self._one([*over, f"lr={lr:g}"])
            except DivergedError as e:
                scores[f"{lr:g}"], error = None, e
                continue
            score = float(run.summary["best"]["val_acc"]["value"])
            scores[f"{lr:g}"] = score
            if best is None or score > best[0]:
                best = (score, run, reused)
        self.grids[method.label] = scores
        if best is None:
            assert error is not None
            raise error
        return best[1], best[2]

    def _one(self, over: Sequence[str]) -> tuple[StoredRun, bool]:
        key = run_key(config(over)[0], self.digest)
        found = self.store.get(key) if self.store is not None else None
        if found is not None:
            return found, True
        t0 = time.perf_counter()
        summary, rows = execute(over, self.fed)
        found = from_run(key, summary, rows, time.perf_counter() - t0)
        if self.store is not None:
            self.store.put(found)
        return found, False

    def partner_round(self, exp: Experiment, method: Method) -> int | None:
        """The best-train round of ``method.read_at`` on this seed's federation: from this call's runs or the
        store, else by running it (and storing it); None if it diverges (then the run's own is used)."""
        partner = next(m for m in exp.methods if m.label == method.read_at)
        try:
            return best_train_round(self.get(partner)[0].rows)
        except DivergedError:
            return None


def base_overrides(exp: Experiment, budget: Budget, setting: Setting, seed: int, extra: Sequence[str]) -> list[str]:
    """The run-config overrides every method of ``setting`` shares at ``budget`` for ``seed``."""
    return [*exp.overrides, f"num_clients={budget.clients}", f"rounds={budget.rounds}", *budget.overrides,
            *setting.overrides, f"seed={seed}", *(["eval_train=true"] if exp.read == "best-train" else []), *extra]


def method_overrides(setting: Setting, method: Method, base: Sequence[str], fed: Federation) -> list[str]:
    """``base`` with ``method``'s overrides (FULL: the largest client's samples; TRUE_K: the federation's number of
    concepts, over every round of a drifting federation; a sweep over K: the setting's K)."""
    full = int(fed.train.sizes.max())
    k = setting.params.get("num_clusters")  # a sweep over K: the methods' K = 3 becomes the setting's
    over = [*base, *(o.replace("=FULL", f"={full}") for o in method.overrides)]
    if any(o.endswith("=TRUE_K") for o in over):
        drift = Drift.of(fed)
        true_k = len(set((fed.true_cluster if drift is None else drift.train).ravel().tolist()))
        over = [o.removesuffix("=TRUE_K") + f"={true_k}" if o.endswith("=TRUE_K") else o for o in over]
    return [o.replace("num_clusters=3", f"num_clusters={int(k)}") for o in over] if k else over


def execute(overrides: Sequence[str], fed: Federation) -> tuple[dict, list[dict[str, float]]]:
    """One run's summary and rounds (raises DivergedError)."""
    with tempfile.TemporaryDirectory() as tmp:
        r = make_run(overrides, Path(tmp) / "run", fed)
        summary = r.execute()
        return summary, r.dir.read_rounds()

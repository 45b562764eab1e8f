"""One seed's benchmark runs: every scenario's federation built once, every method run on it through the
reproduction suite's :class:`~fedcluster.reproduce.run_suite.SeedRuns` (so a run already in the run store is read,
never trained again), one record emitted as each finishes. A method that refuses the scenario is recorded n/a with
its one-line reason; one that diverges is recorded so; another error is recorded as failed (and tried again by the
next call) so that one method cannot stop the table."""

from __future__ import annotations

import time
from collections.abc import Sequence

from fedcluster.benchmark.figures import figures
from fedcluster.benchmark.methods import CHOOSE_K, load_plugins
from fedcluster.benchmark.plan import Benchmark, pair_key
from fedcluster.errors import DivergedError, UserError
from fedcluster.reproduce.federations import shrink
from fedcluster.reproduce.run_common import Emit, federation
from fedcluster.reproduce.run_store import RunStore, StoredRun, federation_digest
from fedcluster.reproduce.run_suite import SeedRuns
from fedcluster.reproduce.spec import Budget, Method


def one_line(text: str) -> str:
    return "; ".join(" ".join(line.split()) for line in str(text).splitlines() if line.strip())[:300]


def run(exp: Benchmark, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]], emit: Emit,
        store: RunStore | None = None) -> None:
    """Run what ``done`` (the (scenario, method) pairs already recorded for this seed) lacks; ``emit`` each record."""
    load_plugins(list(exp.plugins))
    clients = budget.clients
    for setting in exp.settings:
        todo = [m for m in exp.methods if (setting.name, m.label) not in done]
        if not todo:
            continue
        base = [*setting.overrides, f"seed={seed}", *extra]
        fed = federation(base)
        fraction, test_size = float(setting.params["fraction"]), int(setting.params["test_size"])
        if fraction < 1 or test_size:
            fed = shrink(fed, fraction, test_size, seed)
        runs = SeedRuns(setting, base, fed, federation_digest(fed), store)
        for method in todo:
            t0 = time.perf_counter()
            record: dict = {"seed": seed, "setting": setting.name, "method": method.label,
                            "pair": pair_key(exp, setting, method)}
            try:
                grid_seconds = None
                if exp.choose_k and method.label in exp.fixed_k:
                    stored, reused, k, grid_seconds = chosen_k(runs, method, fed.task)
                    record["k_chosen"] = k
                else:
                    stored, reused = runs.get(method)
            except DivergedError as e:
                record.update(status="diverged", reason=one_line(str(e).split(";")[0]))
            except UserError as e:
                record.update(status="n/a", reason=one_line(str(e)))
            except Exception as e:  # a bug of one method: recorded, the others go on
                record.update(status="failed", reason=one_line(f"{type(e).__name__}: {e}"))
            else:
                record.update(status="ok", metrics=figures(stored, clients), run=stored.key, reused=reused)
                if grid_seconds is not None:  # the choice of K cost every run of the grid
                    record["metrics"]["seconds"] = grid_seconds
                record["seconds"] = record["metrics"]["seconds"]
            record.setdefault("seconds", time.perf_counter() - t0)
            emit(record)


def chosen_k(runs: SeedRuns, method: Method, task: str) -> tuple[StoredRun, bool, int, float]:
    """``method`` at each K of :data:`CHOOSE_K`, the run of best final validation accuracy (regression: lowest
    validation loss) kept, never chosen by the test clients (the smallest K on a tie); with the grid's seconds."""
    key = next(o.split("=", 1)[0] for o in method.overrides if o.endswith("=TRUE_K"))
    best: tuple[float, StoredRun, bool, int] | None = None
    seconds = 0.0
    for k in CHOOSE_K:
        over = tuple(f"{key}={k}" if o.endswith("=TRUE_K") else o for o in method.overrides)
        found, reused = runs.get(Method(f"{method.label} K={k}", over))
        seconds += found.seconds
        final = found.summary["final"]
        score = -final.get("val_loss", float("inf")) if task == "regression" else final.get("val_acc", -1.0)
        score = -float("inf") if score != score else score
        if best is None or score > best[0]:
            best = (score, found, reused, k)
    assert best is not None
    return best[1], best[2], best[3], seconds

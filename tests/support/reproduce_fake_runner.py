"""A stand-in reproduction runner for tests/reproduce/test_reproduce_workers.py (imported by spawned worker
processes)."""

from __future__ import annotations

from collections.abc import Sequence

from fedcluster.reproduce.run_common import Emit
from fedcluster.reproduce.spec import Budget, Experiment


def fake_run(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
             emit: Emit) -> None:
    """One record per (setting, method) not in ``done``, noting the settings this call ran (``calls``); seed 1 fails
    after its first record."""
    todo = [(s.name, m.label) for s in exp.settings for m in exp.methods if (s.name, m.label) not in done]
    ran = sorted({s for s, _ in todo})
    for i, (setting, method) in enumerate(todo):
        if seed == 1 and i == 1:
            raise RuntimeError("seed 1 failed")
        emit({"seed": seed, "setting": setting, "method": method, "curve": [], "seconds": 0.0, "calls": ran,
              "metrics": {"x": float(seed), "t": float(len(extra))}})


def sleepy_run(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
               emit: Emit) -> None:
    """One record per (setting, method) not in ``done``; seed 2 sleeps a minute first (a run the limit cuts)."""
    import time

    if seed == 2:
        time.sleep(60)
    for setting in exp.settings:
        for method in exp.methods:
            if (setting.name, method.label) not in done:
                emit({"seed": seed, "setting": setting.name, "method": method.label, "curve": [], "seconds": 0.0,
                      "metrics": {"x": float(seed)}})


def share_run(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
              emit: Emit) -> None:
    """One record per (setting, method) not in ``done``: the memory share this worker process was given (MiB)."""
    import os

    from fedcluster.engine.memory import SHARE_VARIABLE

    for setting in exp.settings:
        for method in exp.methods:
            if (setting.name, method.label) not in done:
                emit({"seed": seed, "setting": setting.name, "method": method.label, "curve": [], "seconds": 0.0,
                      "metrics": {"share": float(os.environ.get(SHARE_VARIABLE, "nan")), "pid": float(os.getpid())}})

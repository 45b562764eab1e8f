"""A stand-in reproduction runner for tests/test_reproduce_workers.py (imported by spawned worker processes)."""

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

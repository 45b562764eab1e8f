"""A stand-in reproduction runner for tests/test_reproduce_workers.py (imported by spawned worker processes)."""

from __future__ import annotations

from collections.abc import Sequence

from fedcluster.reproduce.run_common import Emit
from fedcluster.reproduce.spec import Budget, Experiment


def fake_run(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
             emit: Emit) -> None:
    """One record per method not in ``done``; seed 1 fails after its first record."""
    for i, m in enumerate(x for x in exp.methods if ("", x.label) not in done):
        if seed == 1 and i == 1:
            raise RuntimeError("seed 1 failed")
        emit({"seed": seed, "setting": "", "method": m.label, "metrics": {"x": float(seed), "t": float(len(extra))},
              "curve": [], "seconds": 0.0})

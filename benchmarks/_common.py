"""Shared helpers for the benchmark scripts: single-threaded BLAS, one run from overrides, rounds.csv summaries.

Import this module before numpy/torch (it pins the BLAS thread count: the benchmarks share 2 cores).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # 2 shared cores: no BLAS threads
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import fedcluster.builtin  # noqa: E402,F401
from fedcluster.config import load_raw, resolve  # noqa: E402
from fedcluster.data.build import build_federation  # noqa: E402
from fedcluster.data.federation import Federation  # noqa: E402
from fedcluster.engine.runner import Run  # noqa: E402
from fedcluster.reproduce.run_common import at_round, first_round  # noqa: E402,F401  (used by the scripts)

QUIET = ["progress=false", "threads=1", "checkpoint_every=100000"]


def make_run(overrides: Sequence[str], out: Path, fed: Federation | None = None) -> Run:
    """A ``Run`` from command-line style overrides (plus :data:`QUIET`), writing to ``out``."""
    cfg, typed = resolve(load_raw(None, [*overrides, *QUIET, f"out={out}"]))
    return Run(cfg, typed, fed=fed)


def build_fed(overrides: Sequence[str]) -> Federation:
    """The federation a run with these overrides would build (to share it across methods)."""
    cfg, typed = resolve(load_raw(None, [*overrides, *QUIET]))
    return build_federation(cfg, typed["scenario"])


def shrink_test(fed: Federation, per_client: int) -> Federation:
    """Keep the first ``per_client`` rows of every test client (evaluation cost; 0 = keep all), in place."""
    if per_client > 0:
        t = fed.test
        parts = [slice(int(t.ptr[i]), int(min(t.ptr[i + 1], t.ptr[i] + per_client))) for i in range(len(t.ptr) - 1)]
        fed.test = type(t)(torch.cat([t.x[p] for p in parts]), torch.cat([t.y[p] for p in parts]),
                           np.concatenate([[0], np.cumsum([p.stop - p.start for p in parts])]).astype(np.int64))
    return fed


def execute(run: Run) -> tuple[list[dict[str, float]], float]:
    """Execute ``run``; its rounds.csv rows (as floats) and the wall seconds."""
    t0 = time.perf_counter()
    run.execute()
    seconds = time.perf_counter() - t0
    text = run.dir.rounds_csv.read_text().splitlines()
    rows = [{k: _float(v) for k, v in r.items()} for r in csv.DictReader(text)]
    return rows, seconds


def run_rows(overrides: Sequence[str], out: Path, fed: Federation | None = None,
             setup: Callable[[Run], None] | None = None) -> tuple[list[dict[str, float]], float, Run]:
    """Build, optionally adjust (``setup``, e.g. custom initial models), and execute one run."""
    run = make_run(overrides, out, fed)
    if setup is not None:
        setup(run)
    rows, seconds = execute(run)
    return rows, seconds, run


def fmt(x: float, spec: str = ".3f") -> str:
    return "-" if math.isnan(x) else format(x, spec)


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan

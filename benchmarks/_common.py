"""Shared helpers of the benchmark scripts, over the public library API (``import fedcluster``).

Import this module before numpy/torch (it pins the BLAS thread count: the benchmarks share 2 cores).
A benchmark starts from a shipped ``configs/*.yaml`` (:func:`shipped`) where one exists, builds its
federation with ``fedcluster.build_federation``, runs each method with ``fedcluster.run`` (:func:`run`) and
reads mean ± sd over seeds from the run directories with ``fedcluster compare``'s module (:func:`groups`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # 2 shared cores: no BLAS threads
    os.environ.setdefault(_var, "1")

import yaml  # noqa: E402

import fedcluster  # noqa: E402
from fedcluster.config.run_config import parse_value  # noqa: E402  (the CLI's value parser: --set reads as on the command line)
from fedcluster.data.federation import Federation  # noqa: E402
from fedcluster.reproduce.federations import shrink  # noqa: E402,F401  (no public API subsamples a federation)
from fedcluster.tracking.compare import Group, group_runs, load_run  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
QUIET = ["progress=false", "threads=1", "checkpoint_every=100000"]  # command-line form (flower_overhead.py)
QUIET_RUN = {"progress": False, "checkpoint_every": 10**9}  # defaults of run() below


def overrides(items: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items (``--set``, the reproduction specs' method overrides) as a config mapping."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{item!r} is not of the form KEY=VALUE (e.g. model.fc=128)")
        out[key.strip()] = parse_value(text)
    return out


def at_round(rows: Sequence[Mapping[str, float]], key: str, round_: int) -> float:
    """``key`` in rounds.csv's row of round ``round_`` (NaN if the run has no such row or column)."""
    return next((r.get(key, math.nan) for r in rows if int(r["round"]) == round_), math.nan)


def first_round(rows: Sequence[Mapping[str, float]], key: str, value: float, tol: float = 1e-9) -> float:
    """The first round whose ``key`` is ≥ ``value`` − tol (NaN if never), e.g. the round ARI reaches 1."""
    return next((r["round"] for r in rows if not math.isnan(v := r.get(key, math.nan)) and v >= value - tol),
                math.nan)


def shipped(name: str, *, drop: Sequence[str] = ()) -> dict[str, Any]:
    """``configs/NAME.yaml`` as a config mapping; ``drop`` removes sections (e.g. ``algorithm``) that a caller
    sets afresh, since a new name merged into a section would keep the old method's parameters."""
    config = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    return {k: v for k, v in config.items() if k not in drop}


def without_algorithm(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` minus its algorithm keys: what a federation depends on (``fedcluster.build_federation``)."""
    return {k: v for k, v in config.items() if k != "algorithm" and not k.startswith(("algorithm.", "algorithm_"))}


def run(config: Mapping[str, Any], out: str | Path, fed: Federation | None = None,
        **extra: Any) -> tuple[fedcluster.Result, float]:
    """``fedcluster.run(config, federation=fed, out=out, **extra)`` and its wall seconds; unless ``config`` or
    ``extra`` say otherwise, without a progress bar or periodic checkpoints."""
    t0 = time.perf_counter()
    res = fedcluster.run({**QUIET_RUN, **config}, federation=fed, out=str(out), **extra)
    return res, time.perf_counter() - t0


def groups(run_dirs: Iterable[str | Path], by: str = "algorithm") -> dict[str, Group]:
    """Finished runs pooled over seeds as ``fedcluster compare`` pools them, by their ``by`` label; ``stat``
    of a group gives mean ± sample sd (ddof 1) of any per-run number."""
    return {g.label: g for g in group_runs([load_run(Path(d)) for d in run_dirs], by)}


def pm(mean: float, sd: float, spec: str = ".2f") -> str:
    """``mean ± sd``; the mean alone where there is no sd (one run), ``-`` where there is no mean."""
    if math.isnan(mean):
        return "-"
    return format(mean, spec) if math.isnan(sd) else f"{mean:{spec}} ± {sd:{spec}}"


def fmt(x: float, spec: str = ".3f") -> str:
    return "-" if math.isnan(x) else format(x, spec)

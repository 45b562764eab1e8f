"""The benchmark's numbers: per (scenario, method) the mean ± standard error over seeds of every figure, the ranks
of the methods in each scenario, and the "which method for which shift" summary, generated from those numbers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedcluster.metrics.statistics import mean_sd

Z = 2.0  # a method within Z standard errors of the best counts as tied with it


@dataclass
class Cell:
    """One (scenario, method) over the seeds asked for."""

    seeds: int
    values: dict[str, list[float]] = field(default_factory=dict)  # figure -> per-seed value (ok seeds only)
    status: dict[str, int] = field(default_factory=dict)  # status -> seeds
    reason: str = ""
    k_chosen: list[int] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return self.status.get("ok", 0)

    def mean_se(self, key: str) -> tuple[float, float, int]:
        xs = [x for x in self.values.get(key, []) if not math.isnan(x)]
        mean, sd, n = mean_sd(xs)
        return mean, (sd / math.sqrt(n) if n > 1 else math.nan), n


def cell_of(records: Sequence[Mapping[str, Any] | None], seeds: int) -> Cell:
    """The cell of one (scenario, method)'s records, one per seed (None: not run yet)."""
    cell = Cell(seeds)
    for r in records:
        status = "missing" if r is None else str(r["status"])
        cell.status[status] = cell.status.get(status, 0) + 1
        if r is None:
            continue
        if status == "ok":
            for k, v in r["metrics"].items():
                cell.values.setdefault(k, []).append(float(v))
            if r.get("k_chosen") is not None:
                cell.k_chosen.append(int(r["k_chosen"]))
        elif not cell.reason:
            cell.reason = str(r.get("reason", ""))
    return cell


def primary(task: str) -> tuple[str, bool]:
    """The figure a scenario ranks by and whether higher is better: global accuracy, or the regression's test MSE."""
    return ("mse", False) if task == "regression" else ("global", True)


def ranks(cells: Mapping[str, Cell], task: str) -> dict[str, float]:
    """Method -> rank (1 = best) by the scenario's primary figure's mean; equal means share the mean rank; methods
    without a value are left out."""
    key, higher = primary(task)
    scored = {m: c.mean_se(key)[0] for m, c in cells.items()}
    scored = {m: v for m, v in scored.items() if not math.isnan(v)}
    ordered = sorted(scored.values(), reverse=higher)
    out = {}
    for m, v in scored.items():
        first = ordered.index(v)
        last = len(ordered) - 1 - ordered[::-1].index(v)
        out[m] = (first + last) / 2 + 1
    return out


def leaders(cells: Mapping[str, Cell], task: str) -> tuple[str | None, list[str]]:
    """The best method by the primary figure and the others within :data:`Z` standard errors of it (the larger of
    the two methods' standard errors; with one seed, only exact ties)."""
    key, higher = primary(task)
    scored = {m: c.mean_se(key) for m, c in cells.items() if not math.isnan(c.mean_se(key)[0])}
    if not scored:
        return None, []
    sign = 1.0 if higher else -1.0
    best = max(sorted(scored), key=lambda m: sign * scored[m][0])
    mb, sb, _ = scored[best]
    tied = []
    for m in sorted(scored):
        if m == best:
            continue
        v, s, _ = scored[m]
        spread = max(x for x in (sb, s, 0.0) if not math.isnan(x))
        if abs(mb - v) <= Z * spread:
            tied.append(m)
    return best, tied


def mean_ranks(per_scenario: Mapping[str, Mapping[str, float]], methods: Sequence[str]) -> dict[str, float]:
    """Method -> its mean rank over the scenarios it has a rank in (NaN: none)."""
    out = {}
    for m in methods:
        rs = [r[m] for r in per_scenario.values() if m in r]
        out[m] = math.fsum(rs) / len(rs) if rs else math.nan
    return out

"""A sweep's results: one row per setting (mean ± sd over its seeds), the best setting of each method marked,
as a printed table and ``sweep.csv``, and one picture ``sweep.png``.

A setting is a point of the grid without its seed; a method is the ``algorithm`` of the setting. The best
setting of a method is the one with the highest mean final validation accuracy (``val_acc`` of the last round:
the clients' local validation data, never the test data). The statistics are those of ``fedcluster compare``
(sample sd, ddof = 1; one seed shows no sd).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedcluster.tracking.compare import METRICS, Group, RunRecord, _cell  # noqa: E402

SHOWN = (("final_val_acc", "final val acc"), ("final_test_acc", "final test acc"), ("final_ari", "final ARI"),
         ("final_num_clusters", "final K"))
BEST_BY = "final_val_acc"
MARK = "*"


@dataclass
class Setting:
    """One setting of the grid: its swept values, its method, the runs that finished and those that diverged."""

    values: dict[str, str]
    method: str
    planned: int
    runs: list[RunRecord] = field(default_factory=list)
    diverged: int = 0
    best: bool = False

    def stats(self) -> dict[str, tuple[float, float]]:
        if not self.runs:
            return {m: (math.nan, math.nan) for m, _ in METRICS}
        return Group("", self.runs).stats()

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items()) or self.method


def mark_best(settings: Sequence[Setting]) -> None:
    """Mark, per method, the setting with the highest mean of ``BEST_BY`` (settings without runs never)."""
    for method in dict.fromkeys(s.method for s in settings):
        scored = [(s.stats()[BEST_BY][0], i) for i, s in enumerate(settings)
                  if s.method == method and s.runs and not math.isnan(s.stats()[BEST_BY][0])]
        for s in settings:
            if s.method == method:
                s.best = False
        if scored:
            settings[max(scored)[1]].best = True


def markdown(settings: Sequence[Setting], keys: Sequence[str]) -> str:
    head = [*(keys or ["algorithm"]), "runs", *(h for _, h in SHOWN), "best"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for s in settings:
        stats = s.stats()
        runs = f"{len(s.runs)}/{s.planned}" + (f" ({s.diverged} diverged)" if s.diverged else "")
        cells = [s.values.get(k, "–") for k in keys] if keys else [s.method]
        lines.append("| " + " | ".join([*cells, runs, *(_cell(*stats[m], m) for m, _ in SHOWN),
                                        MARK if s.best else ""]) + " |")
    lines.append(f"\n{MARK}: the best setting of each method by mean final validation accuracy (over seeds).")
    return "\n".join(lines)


def write_csv(settings: Sequence[Setting], keys: Sequence[str], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*keys, "method", "runs", "planned", "diverged",
                    *(f"{m}_{s}" for m, _ in METRICS for s in ("mean", "sd")), "best", "run_dirs"])
        for s in settings:
            stats = s.stats()
            w.writerow([*(s.values.get(k, "") for k in keys), s.method, len(s.runs), s.planned, s.diverged,
                        *(f"{v:.6g}" for m, _ in METRICS for v in stats[m]), int(s.best),
                        ";".join(r.path.name for r in s.runs)])


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def plot(settings: Sequence[Setting], keys: Sequence[str], path: Path, title: str) -> Path:
    """Mean final validation accuracy (± sd over seeds) against the first swept key that is not the method: one
    panel per method, one line per value of the other keys; a method without that key (e.g. FedAvg without
    num_clusters) is a dashed level; the best setting of each method is starred. Without such a key: one bar
    per setting."""
    keys = [k for k in keys if k != "algorithm"]
    methods = list(dict.fromkeys(s.method for s in settings))
    x_key = next((k for k in keys if any(k in s.values for s in settings)), None)
    if x_key is None:
        return _bars(settings, path, title)
    xs = list(dict.fromkeys(s.values[x_key] for s in settings if x_key in s.values))
    numeric = all(_number(v) is not None for v in xs)
    position = {v: (_number(v) if numeric else float(i)) for i, v in enumerate(xs)}
    fig, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods) + 1, 4), sharey=True, squeeze=False)
    for ax, method in zip(axes[0], methods, strict=True):
        lines: dict[str, list[Setting]] = {}
        for s in settings:
            if s.method == method:
                other = ", ".join(f"{k}={v}" for k, v in s.values.items() if k not in (x_key, "algorithm"))
                lines.setdefault(other, []).append(s)
        for i, (label, members) in enumerate(lines.items()):
            colour = f"C{i % 10}"
            on_axis = sorted((position[s.values[x_key]], s) for s in members if x_key in s.values and s.runs)
            level = [s for s in members if x_key not in s.values and s.runs]
            if on_axis:
                x = [p for p, _ in on_axis]
                mean = [s.stats()[BEST_BY][0] for _, s in on_axis]
                sd = [np.nan_to_num(s.stats()[BEST_BY][1]) for _, s in on_axis]
                ax.errorbar(x, mean, yerr=sd, color=colour, marker="o", capsize=3, label=label or method)
                for p, s in on_axis:
                    if s.best:
                        ax.plot([p], [s.stats()[BEST_BY][0]], marker="*", markersize=16, color=colour, zorder=5)
            for s in level:
                mean = s.stats()[BEST_BY][0]
                ax.axhline(mean, color=colour, linestyle="--", label=f"{label or method} (no {x_key})")
                if s.best:
                    ax.plot([min(position.values())], [mean], marker="*", markersize=16, color=colour, zorder=5)
        ax.set_xticks(list(position.values()), xs if not numeric else [f"{v:g}" for v in position.values()])
        if numeric and len(xs) > 2 and min(position.values()) > 0 and max(position.values()) / min(
                position.values()) >= 10:
            ax.set_xscale("log")
            ax.set_xticks(list(position.values()), [f"{v:g}" for v in position.values()])
            ax.minorticks_off()
        ax.set_title(method)
        ax.set_xlabel(x_key)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # a method without finished runs draws nothing to label
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel("final validation accuracy")
    fig.suptitle(f"{title} (star: best per method)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bars(settings: Sequence[Setting], path: Path, title: str) -> Path:
    shown = [s for s in settings if s.runs]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(shown) + 1), 4))
    for i, s in enumerate(shown):
        mean, sd = s.stats()[BEST_BY]
        ax.bar(i, mean, yerr=np.nan_to_num(sd), capsize=3, color=f"C{i % 10}", hatch="//" if s.best else None)
    ax.set_xticks(range(len(shown)), [s.label for s in shown], rotation=20, ha="right")
    ax.set_ylabel("final validation accuracy")
    ax.set_title(f"{title} (hatched: best per method)")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""``fedcluster compare RUN_DIR... [--by KEY]``: several runs side by side, seeds pooled.

Runs whose configs differ only in the seed (and in keys that do not change results, e.g. ``out``) form one
group; a group is labelled by its value of ``--by`` (default ``algorithm``). For each group the table gives
mean ± sd over its runs (sample sd, ddof=1; a single run has no sd) of the final and best test and validation
accuracy, the final ARI and number of clusters K, the bytes communicated (up + down) and the wall seconds.
Only the run-directory contract files are read: ``config.yaml``, ``rounds.csv``, ``summary.json``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedcluster.config.validation import read_config_file  # noqa: E402
from fedcluster.errors import UserError  # noqa: E402
from fedcluster.metrics.statistics import mean_sd  # noqa: E402
from fedcluster.storage import folders  # noqa: E402
from fedcluster.storage.atomic import writing  # noqa: E402
from fedcluster.storage.paths import output_path  # noqa: E402
from fedcluster.tracking.run_files import ROUND_COLUMNS, parse_rounds, parse_summary, rows_as_floats  # noqa: E402

CONTRACT = ("config.yaml", "rounds.csv", "summary.json")
# keys that name where or how a run is computed or logged, not what it computes
NOT_RESULT_KEYS = frozenset({"seed", "data_seed", "out", "progress", "threads", "workers", "engine", "data_dir",
                             "ranks", "checkpoint_every", "tracking", "tracking_uri", "tracking_experiment",
                             "tensorboard_dir"})
# (column, heading) of the table; RunRecord.values reads them from one run
METRICS = (
    ("final_test_acc", "final test acc"), ("best_test_acc", "best test acc"),
    ("final_val_acc", "final val acc"), ("best_val_acc", "best val acc"),
    ("final_ari", "final ARI"), ("final_num_clusters", "final K"),
    ("bytes", "MB (up+down)"), ("seconds", "seconds"),
)
CURVES = (("val_acc", "local validation accuracy"), ("test_acc", "global test accuracy"),
          ("ari", "ARI"), ("num_clusters", "number of clusters K"))


@dataclass
class RunRecord:
    path: Path
    config: dict[str, Any]
    rows: list[dict[str, float]]
    summary: dict[str, Any]

    def values(self) -> dict[str, float]:
        final, best = self.summary.get("final", {}), self.summary.get("best", {})
        seconds = self.summary.get("wall_seconds", sum(r.get("seconds", math.nan) for r in self.rows))
        return {
            "final_test_acc": _num(final.get("test_acc")), "best_test_acc": _num(best.get("test_acc", {}).get("value")),
            "final_val_acc": _num(final.get("val_acc")), "best_val_acc": _num(best.get("val_acc", {}).get("value")),
            "final_ari": _num(final.get("ari")), "final_num_clusters": _num(final.get("num_clusters")),
            "bytes": float(sum(r.get("bytes_up", 0.0) + r.get("bytes_down", 0.0) for r in self.rows)),
            "seconds": _num(seconds),
        }


@dataclass
class Group:
    label: str
    runs: list[RunRecord]

    def stats(self) -> dict[str, tuple[float, float]]:
        """``metric -> (mean, sd)`` over the group's runs (NaN where no run has the value)."""
        table = {m: np.array([r.values()[m] for r in self.runs]) for m, _ in METRICS}
        return {m: _mean_sd(v) for m, v in table.items()}

    def stat(self, value: Callable[[RunRecord], float]) -> tuple[float, float]:
        """Mean and sample sd over the group's runs of any number read from one run, e.g. from its summary:
        ``group.stat(lambda r: r.summary["at_best_val"]["test_acc"])`` (the same statistics as the table)."""
        return _mean_sd(np.array([_num(value(r)) for r in self.runs]))


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def _mean_sd(values: np.ndarray) -> tuple[float, float]:
    """Mean and sample sd (ddof 1) of the finite values; one run shows no sd (NaN)."""
    mean, sd, n = mean_sd(values.tolist())
    return mean, sd if n > 1 else math.nan


def is_run_dir(path: Path) -> bool:
    return all((path / n).is_file() for n in CONTRACT)


def expand(paths: Sequence[Path]) -> list[Path]:
    """Run directories among ``paths``; a folder that is not one stands for the run directories inside it."""
    found: list[Path] = []
    for p in paths:
        if is_run_dir(p):
            found.append(p)
            continue
        if not p.is_dir():
            raise UserError(f"{str(p)!r} does not exist or is not a directory; pass fedcluster run directories")
        inside = sorted(c for c in p.iterdir() if c.is_dir() and is_run_dir(c))
        if not inside:
            missing = [n for n in CONTRACT if not (p / n).is_file()]
            raise UserError(f"{str(p)!r} is not a finished fedcluster run directory (no {', '.join(missing)}) "
                            "and holds none; pass run directories whose runs have finished")
        found.extend(inside)
    if not found:
        raise UserError("no run directories given; usage: fedcluster compare RUN_DIR [RUN_DIR ...]")
    return list(dict.fromkeys(found))


def load_run(path: Path) -> RunRecord:
    """The contract files of one run, checked (a damaged or foreign file is refused in one line)."""
    try:
        config = read_config_file(path / "config.yaml")
    except UserError as e:
        raise UserError(f"{str(path)!r}: {e}") from None
    summary = parse_summary(path / "summary.json")
    rows = rows_as_floats(*parse_rounds(path / "rounds.csv", ROUND_COLUMNS))
    if not rows or summary is None:
        raise UserError(f"{str(path)!r}: rounds.csv has no rows or summary.json is missing; it does not hold a "
                        "finished fedcluster run")
    return RunRecord(path, config, rows, summary)


def group_runs(runs: Sequence[RunRecord], by: str) -> list[Group]:
    """Pool runs that differ only in the seed; label each pool by its ``by`` value (plus what else differs)."""
    if any(by not in r.config for r in runs):
        missing = next(r.path for r in runs if by not in r.config)
        keys = ", ".join(sorted(k for k in runs[0].config if not k.endswith("_params")))
        raise UserError(f"--by {by}: {str(missing)!r} has no config key {by!r}; choose one of: {keys}")
    pools: dict[str, list[RunRecord]] = {}
    for r in runs:
        pools.setdefault(_identity(r.config), []).append(r)
    members = list(pools.values())
    groups = []
    for m in members:
        label = _text(m[0].config[by])
        same = [x for x in members if _text(x[0].config[by]) == label]
        if len(same) > 1:  # same label, other settings: name what differs
            differing = _differing_keys([x[0].config for x in same]) - {by}
            label += " (" + ", ".join(f"{k}={_text(_lookup(m[0].config, k))}" for k in sorted(differing)) + ")"
        groups.append(Group(label, m))
    return groups


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    flat = {}
    for k, v in config.items():
        if k.endswith("_params") and isinstance(v, dict):
            flat.update({f"{k[:-7]}.{s}": sv for s, sv in v.items()})
        elif k not in NOT_RESULT_KEYS:
            flat[k] = v
    return flat


def _identity(config: dict[str, Any]) -> str:
    return json.dumps(_flat(config), sort_keys=True, default=str)


def _differing_keys(configs: Sequence[dict[str, Any]]) -> set[str]:
    flats = [_flat(c) for c in configs]
    keys = set().union(*flats)
    return {k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flats}) > 1}


def _lookup(config: dict[str, Any], key: str) -> Any:
    return _flat(config).get(key)


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _cell(mean: float, sd: float, metric: str) -> str:
    if math.isnan(mean):
        return "–"
    scale, fmt = (1e6, ".3g") if metric == "bytes" else (1.0, ".1f" if metric == "seconds" else ".4f")
    if metric == "final_num_clusters":
        fmt = ".2g"
    text = f"{mean / scale:{fmt}}"
    return text if math.isnan(sd) else f"{text} ± {sd / scale:{fmt}}"


def markdown_table(groups: Sequence[Group], by: str) -> str:
    head = [by, "runs", *(h for _, h in METRICS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for g in groups:
        s = g.stats()
        lines.append("| " + " | ".join([g.label, str(len(g.runs)), *(_cell(*s[m], m) for m, _ in METRICS)]) + " |")
    return "\n".join(lines)


def final_rounds_note(groups: Sequence[Group]) -> str | None:
    """A note when the runs end at different rounds: their "final" columns are then not read at one round."""
    ends = {g.label: sorted({int(max(row["round"] for row in r.rows)) for r in g.runs}) for g in groups}
    if len({e for rounds in ends.values() for e in rounds}) <= 1:
        return None
    which = "; ".join(f"{label}: {', '.join(map(str, rounds))}" for label, rounds in ends.items())
    return (f"note: the runs end at different rounds ({which}); each final column is read at its run's own last "
            "round, so compare them with care (or extend the shorter runs: fedcluster resume RUN_DIR rounds=N)")


def write_csv(groups: Sequence[Group], by: str, path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([by, "runs", *(f"{m}_{s}" for m, _ in METRICS for s in ("mean", "sd")), "run_dirs"])
        for g in groups:
            s = g.stats()
            w.writerow([g.label, len(g.runs), *(f"{v:.6g}" for m, _ in METRICS for v in s[m]),
                        ";".join(str(r.path) for r in g.runs)])


def curve(group: Group, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rounds, mean and sd over the group's runs of one ``rounds.csv`` column (rounds with a value only)."""
    by_round: dict[int, list[float]] = {}
    for run in group.runs:
        for r in run.rows:
            if math.isfinite(r.get(column, math.nan)):
                by_round.setdefault(int(r["round"]), []).append(r[column])
    rounds = np.array(sorted(by_round))
    mean = np.array([np.mean(by_round[t]) for t in rounds])
    sd = np.array([np.std(by_round[t], ddof=1) if len(by_round[t]) > 1 else 0.0 for t in rounds])
    return rounds, mean, sd


def plot_curves(groups: Sequence[Group], path: Path, title: str) -> Path:
    """Validation/test accuracy, ARI and K per round, one colour per group: mean line and ± sd band."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for ax, (column, name) in zip(axes.flat, CURVES, strict=True):
        for i, g in enumerate(groups):
            rounds, mean, sd = curve(g, column)
            if len(rounds) == 0:
                continue
            colour = f"C{i % 10}"
            step = "post" if column == "num_clusters" else None  # K changes at a round, it does not glide
            ax.plot(rounds, mean, color=colour, label=f"{g.label} (n={len(g.runs)})", drawstyle=f"steps-{step}"
                    if step else "default")
            ax.fill_between(rounds, mean - sd, mean + sd, color=colour, alpha=0.2, linewidth=0, step=step)
        ax.set_title(name)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("round")
    k_axis = axes[1][1]
    lo, hi = k_axis.get_ylim()  # a constant K would otherwise get an axis of 2.85-3.15 around it
    k_axis.set_ylim(max(0.0, math.floor(lo) - 1), math.ceil(hi) + 1)
    k_axis.yaxis.get_major_locator().set_params(integer=True)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if not handles:
        handles, labels = axes[1][1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * (len(labels) // 4), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def compare_runs(paths: Sequence[Path], by: str = "algorithm", out: Path | None = None) -> int:
    """Print the Markdown table; write ``comparison.csv``, ``comparison.md`` and ``curves.png`` into ``out``."""
    runs = [load_run(p) for p in expand([Path(p) for p in paths])]
    groups = group_runs(runs, by)
    if out:
        out = output_path(out, f"--out {out}", folder=True)
        with writing(out, "choose another --out"):
            out.mkdir(parents=True, exist_ok=True)
    else:  # a new folder: -2, -3, ... when a comparison of the same second has it
        out = folders.claim_new_dir(runs[0].path.parent / f"compare-{folders.stamp()}")
    table = markdown_table(groups, by)
    print(table)
    note = final_rounds_note(groups)
    if note:
        print(f"\n{note}")
    with writing(out, "choose another --out"):
        (out / "comparison.md").write_text(table + "\n" + (f"\n{note}\n" if note else ""))
        write_csv(groups, by, out / "comparison.csv")
        plot_curves(groups, out / "curves.png", f"{len(runs)} runs by {by}: mean ± sd over seeds")
    print(f"wrote {out / 'comparison.csv'}, {out / 'comparison.md'} and {out / 'curves.png'}", file=sys.stderr)
    return 0

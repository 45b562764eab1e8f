"""``fedcluster report RUN_DIR``: draw a run's curves and where each group's data went, by cluster (heatmaps).

* ``curves.png`` — local validation and global test accuracy (loss for regression) and ARI per round;
* ``clusters.png`` — from ``clusters.jsonl``: for each grouping (true concept, class, feature style) the
  share of the group's training data assigned to each cluster, Σ_{j∈g} γ_{j;k} / Σ_{j∈g} 1 (FedRC Fig. 3),
  at up to four rounds (first, two in between, last).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedcluster.errors import UserError  # noqa: E402
from fedcluster.storage.atomic import writing  # noqa: E402
from fedcluster.tracking.kplot import plot_num_clusters  # noqa: E402
from fedcluster.tracking.run_dir import RunDir  # noqa: E402

MAX_COLUMNS = 60  # groups (classes, styles, ...) drawn per heatmap: the picture stays readable and in memory
MAX_CLUSTERS = 60  # clusters (heatmap rows) drawn per heatmap
GROUP_TITLES = {"concept": "true concept", "class": "class", "style": "feature style"}


def report_run(run_dir: Path) -> int:
    """Write the plots of ``run_dir``; return the CLI exit status."""
    rd = RunDir(Path(run_dir))
    rows = rd.read_rounds()
    if not rows:
        raise UserError(f"{str(run_dir)!r} has no rounds.csv: it is not a fedcluster run directory "
                        "or no round has finished yet")
    records = rd.read_jsonl("clusters.jsonl")
    with writing(rd.path, "check the folder's permissions and free space"):
        written = draw_all(rd, rows, records)
    for p in written:
        print(p)
    return 0


def draw_all(rd: RunDir, rows: list[dict[str, float]], records: list[dict]) -> list[Path]:
    written = [plot_curves(rows, rd.path / "curves.png", rd.path.name)]
    written.append(plot_num_clusters({rd.path.name: rows}, rd.path / "num_clusters.png",
                                     f"{rd.path.name}: number of clusters $K^t$"))
    if records and not [g for g in GROUP_TITLES if all(g in r for r in snapshot_rounds(records))]:
        print(f"fedcluster: note: {rd.path / 'clusters.jsonl'} names no grouping ({', '.join(GROUP_TITLES)}) in "
              "every round drawn; clusters.png is not drawn", file=sys.stderr)
    elif records:
        records, capped = capped_records(records)
        if capped:
            print(f"fedcluster: note: clusters.png shows at most {MAX_COLUMNS} groups and {MAX_CLUSTERS} clusters "
                  f"per heatmap ({capped} are larger); the full numbers stay in clusters.jsonl", file=sys.stderr)
        written.append(plot_cluster_shares(records, rd.path / "clusters.png", rd.path.name))
    else:
        print(f"{rd.path}: no clusters.jsonl (single-model method); only the curves are drawn", file=sys.stderr)
    return written


def capped_records(records: list[dict]) -> tuple[list[dict], str]:
    """The records with every heatmap cut to its first MAX_CLUSTERS clusters and MAX_COLUMNS groups, and
    which groupings were cut (empty when none)."""
    cut: set[str] = set()
    out = []
    for rec in records:
        rec = dict(rec)
        for g in GROUP_TITLES:
            if g not in rec:
                continue
            names, mass = rec[g]["names"], rec[g]["mass"]
            if len(names) > MAX_COLUMNS or len(mass) > MAX_CLUSTERS:
                cut.add(GROUP_TITLES[g])
                rec[g] = {"names": names[:MAX_COLUMNS], "mass": [row[:MAX_COLUMNS] for row in mass[:MAX_CLUSTERS]]}
        out.append(rec)
    return out, ", ".join(sorted(cut))


def plot_curves(rows: list[dict[str, float]], path: Path, title: str) -> Path:
    rounds = [r["round"] for r in rows]
    regression = all(math.isnan(r["val_acc"]) for r in rows)
    keys = ("val_loss", "test_loss") if regression else ("val_acc", "test_acc")
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for key, label in zip(keys, ("local validation", "global test"), strict=True):
        pts = [(t, r.get(key, math.nan)) for t, r in zip(rounds, rows, strict=True)]
        pts = [(t, v) for t, v in pts if not math.isnan(v)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label)
    ax.set(xlabel="round", ylabel="loss" if regression else "accuracy", title=title)
    if regression:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    ari = [(t, r["ari"]) for t, r in zip(rounds, rows, strict=True) if not math.isnan(r.get("ari", math.nan))]
    ax2.plot([p[0] for p in ari], [p[1] for p in ari], color="tab:green")
    ax2.set(xlabel="round", ylabel="ARI vs true clusters", ylim=(-0.1, 1.05), title="clustering")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def shares(mass: list[list[float]]) -> np.ndarray:
    """[K, G] share of each group's data per cluster (columns sum to 1)."""
    m = np.asarray(mass, dtype=np.float64)
    return m / np.maximum(m.sum(0, keepdims=True), 1e-300)


def share_title(group: str) -> str:
    """A heatmap's title: a column is one group, split over the clusters (the rows), as :func:`shares` computes."""
    return f"each {GROUP_TITLES[group]}'s data by cluster\n(each column sums to 1)"


def snapshot_rounds(records: list[dict]) -> list[dict]:
    n = len(records)
    picks = sorted({0, n // 3, (2 * n) // 3, n - 1}) if n > 1 else [0]
    return [records[i] for i in picks]


def plot_cluster_shares(records: list[dict], path: Path, title: str) -> Path:
    snaps = snapshot_rounds(records)
    groups = [g for g in GROUP_TITLES if all(g in r for r in snaps)]
    widths = [max(len(records[-1][g]["names"]), 3) for g in groups]
    fig, axes = plt.subplots(len(snaps), len(groups), squeeze=False,
                             figsize=(1.2 + 0.42 * sum(widths) + 1.2 * len(groups), 1.0 + 1.3 * len(snaps)),
                             gridspec_kw={"width_ratios": widths})
    for r, rec in enumerate(snaps):
        for c, g in enumerate(groups):
            ax = axes[r][c]
            s = shares(rec[g]["mass"])
            im = ax.imshow(s, vmin=0, vmax=1, cmap="viridis", aspect="auto")
            names = rec[g]["names"]
            ax.set_yticks(range(len(s)), [f"k={k}" for k in range(len(s))], fontsize=7)
            ax.set_xticks(range(len(names)), names if r == len(snaps) - 1 else [""] * len(names),
                          rotation=60 if g == "style" else 0, ha="right" if g == "style" else "center",
                          fontsize=6 if g == "style" else 7)
            if len(names) <= 12:
                for (k, j), v in np.ndenumerate(s):
                    ax.text(j, k, f"{v:.2f}", ha="center", va="center", fontsize=6,
                            color="black" if v > 0.6 else "white")
            if r == 0:
                ax.set_title(share_title(g), fontsize=8)
            if r == len(snaps) - 1:
                ax.set_xlabel(GROUP_TITLES[g], fontsize=8)
            if c == 0:
                ax.set_ylabel(f"round {rec['round']}", fontsize=8)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="share of group's data")
    fig.suptitle(f"{title}: where each group's data went, by cluster (FedRC Fig. 3)", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path

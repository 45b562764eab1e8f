"""K^t, the number of clusters over the communication rounds (HCFL paper Figure 4), from ``rounds.csv`` rows:
one run (``fedcluster report``) or several runs on one axis (e.g. HCFL+ with different ρ,
``benchmarks/fidelity/adaptive.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def plot_num_clusters(runs: Mapping[str, Sequence[Mapping[str, float]]], path: Path, title: str) -> Path:
    """A step plot of ``num_clusters`` per round for every labelled run of ``runs``."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    counts = [r["num_clusters"] for rows in runs.values() for r in rows] or [1]
    for label, rows in runs.items():
        ax.step([r["round"] for r in rows], [r["num_clusters"] for r in rows], where="post", label=label)
    ax.set(xlabel="round", ylabel="number of clusters $K^t$", title=title)
    ax.set_ylim(max(0.0, min(counts) - 1), max(counts) + 1)  # a constant K still gets integer ticks around it
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    if len(runs) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

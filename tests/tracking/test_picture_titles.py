"""Rough edges a newcomer saw in the pictures: integer K^t ticks and a typeset title, labelled heatmap axes, the
CLI's data set name in the scenario picture."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

import fedcluster
from fedcluster.data import overview
from fedcluster.tracking import kplot, run_figures


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[plt.Figure]:
    """The figures the plotting functions close (kept open to be looked at)."""
    kept: list[plt.Figure] = []
    monkeypatch.setattr(plt, "close", kept.append)
    return kept


def test_constant_k_gets_integer_ticks_and_a_typeset_title(tmp_path: Path, figures: list) -> None:
    rows = [{"round": t, "num_clusters": 1} for t in range(1, 11)]
    kplot.plot_num_clusters({"fedavg": rows}, tmp_path / "k.png", "fedavg: number of clusters $K^t$")
    ax = figures[-1].axes[0]
    ticks = ax.get_yticks()
    lo, hi = ax.get_ylim()
    shown = [t for t in ticks if lo <= t <= hi]
    assert shown and all(float(t).is_integer() for t in shown) and 1 in shown
    assert ax.get_title() == "fedavg: number of clusters $K^t$"


def test_report_titles_kt_with_mathtext(tmp_path: Path, figures: list) -> None:
    res = fedcluster.run({"num_clients": 6, "rounds": 2, "progress": False, "algorithm": "ifca",
                          "model": "logistic"}, out=str(tmp_path / "r"))
    assert run_figures.report_run(res.run_dir) == 0
    titles = [ax.get_title() for f in figures for ax in f.axes]
    assert "r: number of clusters $K^t$" in titles and not any("K^t" in t and "$" not in t for t in titles)
    heat = figures[-1]  # clusters.png: the bottom row names its groups
    labels = [ax.get_xlabel() for ax in heat.axes if ax.get_xlabel()]
    assert "true concept" in labels and "class" in labels


def test_scenario_picture_titles_the_cli_dataset_name(tmp_path: Path, figures: list) -> None:
    fed = fedcluster.build_federation({"scenario": "iid", "num_clients": 4, "progress": False})
    overview.draw(fed, tmp_path / "p.png", "fashion-mnist")
    assert figures[-1]._suptitle.get_text().startswith("iid on fashion-mnist:")

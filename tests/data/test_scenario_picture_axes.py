"""The scenario picture counts clients with integer ticks (it showed 2.5, 5.0, 7.5 for 20 clients)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

import fedcluster


def _kept_figures(monkeypatch: pytest.MonkeyPatch) -> list:
    figures: list = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


def _visible_ticks(axis) -> list[float]:
    lo, hi = sorted(axis.get_view_interval())
    return [t for t in axis.get_majorticklocs() if lo <= t <= hi]


def test_scenario_picture_numbers_clients_with_integers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fedcluster.data.overview import draw

    fed = fedcluster.build_federation({"dataset": "digits", "scenario": "concept-swap", "num_clients": 20},
                                      progress=False)
    figures = _kept_figures(monkeypatch)
    draw(fed, tmp_path / "scenario.png")
    client_axis = next(ax for ax in figures[0].axes if ax.get_ylabel().startswith("client"))
    ticks = _visible_ticks(client_axis.yaxis)
    assert len(ticks) >= 2 and all(t == int(t) for t in ticks)


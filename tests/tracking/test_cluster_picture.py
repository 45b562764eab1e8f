"""clusters.png: what each heatmap's title says it shows is what its cells hold (a column is one group's data split
over the clusters, so each column sums to 1)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from fedcluster.tracking import run_figures

RECORDS = [{"round": t, "concept": {"names": ["0", "1", "2"], "mass": [[98.0, 47.0, 0.0], [311.0, 41.0, 0.0],
                                                                      [0.0, 231.0, 422.0]]},
            "class": {"names": ["a", "b"], "mass": [[3.0, 1.0], [1.0, 0.0], [0.0, 5.0]]}} for t in (1, 2)]


def test_each_heatmap_title_reads_as_its_cells_add_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = []
    monkeypatch.setattr(run_figures.plt, "close", drawn.append)  # keep the figure to read it back
    run_figures.plot_cluster_shares(RECORDS, tmp_path / "clusters.png", "run")
    (fig,) = drawn
    titled = [ax for ax in fig.axes if ax.get_title() and ax.images]
    assert len(titled) == 2  # one per grouping, on the top row
    for ax in titled:
        cells = np.asarray(ax.images[0].get_array())
        assert "each column sums to 1" in ax.get_title()
        np.testing.assert_allclose(cells.sum(axis=0), 1.0)  # what the title says
        assert not np.allclose(cells.sum(axis=1), 1.0)  # and not the rows
    assert "data went, by cluster" in fig._suptitle.get_text()
    plt.close(fig)

"""examples/tutorial.ipynb runs top to bottom (nbclient, in a temporary folder) and shows its pictures."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).parents[1] / "examples" / "tutorial.ipynb"


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("nbclient", "nbformat", "ipykernel")),
                    reason="needs nbclient, nbformat and ipykernel (the dev extra)")
def test_the_tutorial_notebook_runs_top_to_bottom(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    copy = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, copy)
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2  # the clusters of IFCA and the sweep over K
    text = "".join(o.get("text", "") for o in outputs)
    assert "ifca" in text and "fedavg" in text
    assert (tmp_path / "tutorial-runs" / "sweep-k" / "sweep.csv").is_file()

"""examples/tutorial.ipynb runs top to bottom (nbclient, in a temporary folder), shows its pictures, and every
sentence it prints about its results agrees with the files its runs wrote (checked here from those files)."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).parents[2] / "examples" / "tutorial.ipynb"
TOLERANCE = 0.01  # the notebook's rule: the smallest K within one point of the best validation accuracy


def _text(cell: dict) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _tagged(nb: object, tag: str) -> str:
    (cell,) = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    return _text(cell)


def _concepts_per_cluster(run_dir: Path) -> dict[int, dict[int, int]]:
    held: dict[int, dict[int, int]] = {}
    with open(run_dir / "clients.csv") as f:
        for row in csv.DictReader(f):
            concepts = held.setdefault(int(row["cluster"]), {})
            concepts[int(row["true_cluster"])] = concepts.get(int(row["true_cluster"]), 0) + 1
    return held


def check_cluster_sentences(printed: str, run_dir: Path, ari: float) -> None:
    """The clusters cell: each cluster's concepts and counts, and what it says of shared or split concepts."""
    held = _concepts_per_cluster(run_dir)
    said = {int(k): {int(c): int(n) for c, n in re.findall(r"concept (\d+) \((\d+) clients?\)", rest)}
            for k, rest in re.findall(r"IFCA cluster (\d+) holds (.*)", printed)}
    assert said == held
    shared = {k for k, concepts in held.items() if len(concepts) > 1}
    assert {int(k) for k in re.findall(r"share cluster (\d+)", printed)} == shared
    split = {c for concepts in held.values() for c in concepts if sum(c in v for v in held.values()) > 1}
    assert {int(c) for c in re.findall(r"Concept (\d+) is split", printed)} == split
    assert ("recovered the concepts exactly" in printed) == (not shared and not split)
    assert all(float(a) == pytest.approx(ari, abs=0.005) for a in re.findall(r"ARI (\d\.\d\d)", printed))


def check_conclusion(printed: str, sweep_csv: Path, concepts: int, merged: bool) -> None:
    """The conclusion cell: the table it quotes, the K it recommends and what it says of that K, against sweep.csv."""
    with open(sweep_csv) as f:
        rows = {int(r["algorithm.num_clusters"]): r for r in csv.DictReader(f)}
    val = {k: float(r["final_val_acc_mean"]) for k, r in rows.items()}
    ari = {k: float(r["final_ari_mean"]) for k, r in rows.items()}
    quoted = {int(k): (float(v), float(a)) for k, v, a in
              re.findall(r"K = (\d+): validation accuracy (\d\.\d+), ARI (-?\d\.\d+)", printed)}
    assert quoted.keys() == val.keys()
    for k, (v, a) in quoted.items():
        assert v == pytest.approx(val[k], abs=5e-4) and a == pytest.approx(ari[k], abs=5e-3), k
    best = max(val.values())
    expected = min(k for k, v in val.items() if v >= best - TOLERANCE)
    assert [int(k) for k in re.findall(r"Recommended K: (\d+)", printed)] == [expected]
    assert f"best validation accuracy ({best:.3f})" in printed
    assert ("largest K of the sweep" in printed) == (expected == max(val))
    assert ("is the number of concepts" in printed) == (expected == concepts)
    assert (f"more than the {concepts} concepts" in printed) == (expected > concepts)
    assert (f"fewer than the {concepts} concepts" in printed) == (expected < concepts)
    if expected > concepts:
        assert f"at K = {concepts} IFCA's ARI is {ari[concepts]:.2f} and at K = {expected} {ari[expected]:.2f}" \
            in printed
    assert ("put concepts that disagree in one cluster" in printed) == (expected > concepts and merged)


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("nbclient", "nbformat", "ipykernel")),
                    reason="needs nbclient, nbformat and ipykernel (the dev extra)")
def test_the_tutorial_notebook_runs_and_says_what_its_output_shows(tmp_path: Path) -> None:
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
    assert text.count("is not in this folder: using the copy shipped") == 1  # the fallback to configs/demo.yaml
    runs = tmp_path / "tutorial-runs"
    assert (runs / "sweep-k" / "sweep.csv").is_file()
    ifca = runs / "ifca"
    with open(ifca / "clients.csv") as f:
        concepts = len({row["true_cluster"] for row in csv.DictReader(f)})
    with open(ifca / "rounds.csv") as f:
        final_ari = float(list(csv.DictReader(f))[-1]["ari"])
    check_cluster_sentences(_tagged(nb, "clusters"), ifca, final_ari)
    k = json.loads((ifca / "summary.json").read_text())["final"]["num_clusters"]
    merged = k == concepts and any(len(c) > 1 for c in _concepts_per_cluster(ifca).values())
    check_conclusion(_tagged(nb, "conclusion"), runs / "sweep-k" / "sweep.csv", concepts, merged)
    for cell in nb.cells:  # results are stated by cells that compute them, never typed into the prose
        if cell.cell_type == "markdown":
            assert not re.search(r"\b0\.\d\d", cell.source), cell.source
            assert not re.search(r"levels off|rises until", cell.source), cell.source

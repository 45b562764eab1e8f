"""``fedcluster compare`` on synthetic run directories whose numbers the test chooses."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from fedcluster.app.cli import main

COLUMNS = ["round", "val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "bytes_down", "seconds"]


def write_run(path: Path, algorithm: str, seed: int, test_acc: list[float], *, lr: float = 0.1,
              k: list[int] | None = None) -> Path:
    """A run directory: rounds.csv from ``test_acc`` (val = test + 0.01), its summary and config."""
    path.mkdir(parents=True)
    k = k or [1] * len(test_acc)
    rows = [{"round": t + 1, "val_acc": a + 0.01, "test_acc": a, "ari": 0.1 * (t + 1) + 0.01 * seed,
             "num_clusters": k[t], "bytes_up": 100 * (seed + 1), "bytes_down": 300, "seconds": 0.5 + seed}
            for t, a in enumerate(test_acc)]
    with (path / "rounds.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    best = max(rows, key=lambda r: r["test_acc"])
    best_val = max(rows, key=lambda r: r["val_acc"])
    summary = {"rounds": len(rows), "final": {c: rows[-1][c] for c in COLUMNS[1:5]},
               "best": {"test_acc": {"value": best["test_acc"], "round": best["round"]},
                        "val_acc": {"value": best_val["val_acc"], "round": best_val["round"]}},
               "wall_seconds": sum(r["seconds"] for r in rows)}
    (path / "summary.json").write_text(json.dumps(summary))
    config = {"algorithm": algorithm, "dataset": "digits", "seed": seed, "lr": lr, "out": str(path),
              "algorithm_params": {"k": 3} if algorithm != "fedavg" else {}, "scenario_params": {}}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    return path


ACC = {("fedavg", 0): [0.2, 0.5, 0.4], ("fedavg", 1): [0.3, 0.6, 0.7], ("fedavg", 2): [0.1, 0.2, 0.55],
       ("ifca", 0): [0.3, 0.8, 0.9], ("ifca", 1): [0.2, 0.6, 0.65]}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    for (alg, seed), acc in ACC.items():
        write_run(tmp_path / "runs" / f"{alg}-{seed}", alg, seed, acc, k=[1, 3, 2] if alg == "ifca" else None)
    return tmp_path / "runs"


def _table(out: Path) -> dict[str, dict[str, str]]:
    with (out / "comparison.csv").open() as f:
        return {r["algorithm"]: r for r in csv.DictReader(f)}


def _check(row: dict[str, str], metric: str, values: list[float]) -> None:
    assert float(row[f"{metric}_mean"]) == pytest.approx(np.mean(values), rel=1e-5), metric
    assert float(row[f"{metric}_sd"]) == pytest.approx(np.std(values, ddof=1), rel=1e-5), metric


def test_mean_and_sd_over_seeds(runs: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", str(runs), "--out", str(out)]) == 0
    table = _table(out)
    assert set(table) == {"fedavg", "ifca"} and table["fedavg"]["runs"] == "3" and table["ifca"]["runs"] == "2"
    for alg, row in table.items():
        accs = [a for (name, _), a in ACC.items() if name == alg]
        seeds = [s for (name, s) in ACC if name == alg]
        _check(row, "final_test_acc", [a[-1] for a in accs])
        _check(row, "best_test_acc", [max(a) for a in accs])
        _check(row, "final_val_acc", [a[-1] + 0.01 for a in accs])
        _check(row, "best_val_acc", [max(a) + 0.01 for a in accs])
        _check(row, "final_ari", [0.3 + 0.01 * s for s in seeds])
        _check(row, "bytes", [3 * (100 * (s + 1) + 300) for s in seeds])
        _check(row, "seconds", [3 * (0.5 + s) for s in seeds])
    assert float(table["ifca"]["final_num_clusters_mean"]) == 2.0
    printed = capsys.readouterr().out
    fedavg_final = [a[-1] for (n, _), a in ACC.items() if n == "fedavg"]
    assert f"{np.mean(fedavg_final):.4f} ± {np.std(fedavg_final, ddof=1):.4f}" in printed
    assert printed.splitlines()[0].startswith("| algorithm | runs | final test acc")
    assert (out / "comparison.md").read_text().strip() == printed.strip()
    assert (out / "curves.png").stat().st_size > 10_000


def test_runs_differing_in_more_than_seed_are_not_pooled(runs: Path, tmp_path: Path) -> None:
    write_run(runs / "fedavg-lr", "fedavg", 0, [0.9, 0.9, 0.9], lr=0.5)
    out = tmp_path / "cmp"
    assert main(["compare", *sorted(str(p) for p in runs.iterdir()), "--out", str(out)]) == 0
    table = _table(out)
    assert set(table) == {"fedavg (lr=0.1)", "fedavg (lr=0.5)", "ifca"}
    assert table["fedavg (lr=0.5)"]["runs"] == "1" and table["fedavg (lr=0.5)"]["final_test_acc_sd"] == "nan"
    _check(table["fedavg (lr=0.1)"], "final_test_acc", [0.4, 0.7, 0.55])


def test_group_by_another_key(runs: Path, tmp_path: Path) -> None:
    write_run(runs / "fedavg-lr", "fedavg", 0, [0.9, 0.9, 0.9], lr=0.5)
    out = tmp_path / "cmp"
    assert main(["compare", str(runs / "fedavg-0"), str(runs / "fedavg-lr"), "--by", "lr", "--out", str(out)]) == 0
    with (out / "comparison.csv").open() as f:
        assert sorted(r["lr"] for r in csv.DictReader(f)) == ["0.1", "0.5"]


def test_default_folders_of_the_same_second_differ(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fedcluster.storage.folders.stamp", lambda: "20250101-120000")
    monkeypatch.setattr("fedcluster.tracking.compare.plot_curves", lambda *args: None)  # fast: tables only
    for _ in range(2):
        assert main(["compare", str(runs / "fedavg-0"), str(runs / "ifca-0")]) == 0
    made = sorted(p.name for p in runs.iterdir() if p.name.startswith("compare-"))
    assert made == ["compare-20250101-120000", "compare-20250101-120000-2"]
    assert all((runs / name / "comparison.csv").is_file() for name in made)


def test_curves_are_means_over_seeds(runs: Path) -> None:
    from fedcluster.tracking.compare import curve, group_runs, load_run

    groups = group_runs([load_run(p) for p in sorted(runs.iterdir())], "algorithm")
    fedavg = next(g for g in groups if g.label == "fedavg")
    rounds, mean, sd = curve(fedavg, "test_acc")
    matrix = np.array([a for (n, _), a in ACC.items() if n == "fedavg"])
    assert list(rounds) == [1, 2, 3]
    np.testing.assert_allclose(mean, matrix.mean(axis=0))
    np.testing.assert_allclose(sd, matrix.std(axis=0, ddof=1))
    ifca = next(g for g in groups if g.label == "ifca")
    assert curve(ifca, "num_clusters")[1].tolist() == [1, 3, 2]
    np.testing.assert_allclose(curve(ifca, "ari")[1], [0.105, 0.205, 0.305])  # 0.1·t + 0.01·seed, seeds 0 and 1


@pytest.mark.parametrize("case", ["missing", "not_a_run", "empty", "bad_by"])
def test_bad_input_is_one_line(case: str, runs: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    (runs / "fedavg-0" / "summary.json").unlink()
    args = {"missing": [str(tmp_path / "nope")], "not_a_run": [str(runs / "fedavg-0")],
            "empty": [str(tmp_path / "empty")], "bad_by": [str(runs / "ifca-0"), "--by", "colour"]}[case]
    assert main(["compare", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("fedcluster: error:")
    assert {"missing": "does not exist", "not_a_run": "summary.json", "empty": "holds none",
            "bad_by": "colour"}[case] in err
    assert not (tmp_path / "o").exists()


def test_runs_ending_at_different_rounds_get_a_note(runs: Path, tmp_path: Path, capsys) -> None:
    """An 8-round run beside 3-round runs: the table's "final" columns are read at different rounds, and it says so."""
    write_run(runs / "ifca-long", "ifca", 2, [0.3, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.95])
    out = tmp_path / "cmp"
    assert main(["compare", str(runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "note: the runs end at different rounds (fedavg: 3; ifca: 3, 8)" in printed
    assert "note: the runs end at different rounds" in (out / "comparison.md").read_text()
    assert main(["compare", str(runs / "fedavg-0"), str(runs / "ifca-0"), "--out", str(tmp_path / "same")]) == 0
    assert "note:" not in capsys.readouterr().out  # all at round 3: no note


def test_the_k_axis_of_a_constant_k_has_integer_ticks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 3 throughout: the axis spans whole numbers around 3 (it ran 2.85-3.15 with a tick at 3 alone)."""
    import matplotlib.pyplot as plt

    from fedcluster.tracking.compare import group_runs, load_run, plot_curves

    runs = [load_run(write_run(tmp_path / f"ifca-{s}", "ifca", s, [0.5, 0.6, 0.7], k=[3, 3, 3])) for s in (0, 1)]
    figures: list = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_curves(group_runs(runs, "algorithm"), tmp_path / "curves.png", "K")
    k_axis = next(ax for ax in figures[0].axes if ax.get_title() == "number of clusters K")
    lo, hi = k_axis.get_ylim()
    ticks = [t for t in k_axis.get_yticks() if lo <= t <= hi]
    assert hi - lo >= 2 and 3 in ticks and len(ticks) >= 3 and all(t == int(t) for t in ticks)

"""The command-line contract: run directory files, CSV columns, determinism, resume, errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedcluster.app.cli import main

FAST = ["num_clients=8", "rounds=3", "progress=false"]
ROUND_COLUMNS = ["round", "val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "bytes_down", "seconds"]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _run(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    assert main(["run", *FAST, f"out={out}", *extra]) == 0
    return out


def test_run_directory_contract(tmp_path: Path) -> None:
    out = _run(tmp_path, "r", "clients_per_round=0.5")
    with (out / "rounds.csv").open() as f:
        header = next(csv.reader(f))
    assert header[:8] == ROUND_COLUMNS
    rows = _rows(out / "rounds.csv")
    assert [int(r["round"]) for r in rows] == [1, 2, 3]
    for r in rows:
        assert 0 <= float(r["val_acc"]) <= 1 and 0 <= float(r["test_acc"]) <= 1
        assert float(r["ari"]) == 0.0 and int(r["num_clusters"]) == 1
        # 4 of 8 clients each receive and return one MLP (8·8·200 + 200 + 200·10 + 10 floats)
        assert int(r["bytes_down"]) == int(r["bytes_up"]) == 4 * 4 * (64 * 200 + 200 + 2010)
    clients = _rows(out / "clients.csv")
    assert list(clients[0])[:4] == ["client", "true_cluster", "cluster", "val_acc"] and len(clients) == 8
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["algorithm"] == "fedavg" and cfg["rounds"] == 3 and cfg["scenario_params"]["concepts"] == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final"]["val_acc"] == pytest.approx(float(rows[-1]["val_acc"]), abs=1e-5)
    assert summary["best"]["test_acc"]["value"] >= summary["final"]["test_acc"] - 1e-5
    assert {"torch", "python", "fedcluster"} <= set(summary["versions"]) and "git_revision" in summary
    assert (out / "accuracy.png").stat().st_size > 1000


def _numbers(path: Path) -> list[list[str]]:
    return [[v for k, v in r.items() if k != "seconds"] for r in _rows(path / "rounds.csv")]


def test_same_seed_same_numbers_other_seed_differs(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", "seed=5")
    b = _run(tmp_path, "b", "seed=5")
    c = _run(tmp_path, "c", "seed=6")
    assert _numbers(a) == _numbers(b)
    assert _numbers(a) != _numbers(c)


def test_config_file_and_fedprox(tmp_path: Path) -> None:
    f = tmp_path / "exp.yaml"
    f.write_text("algorithm: fedprox\nalgorithm_params:\n  mu: 0.1\nscenario: label-skew\n")
    out = tmp_path / "p"
    assert main(["run", str(f), *FAST, f"out={out}"]) == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["algorithm_params"]["mu"] == 0.1


def test_resume_continues_to_the_same_numbers(tmp_path: Path) -> None:
    full = _run(tmp_path, "full", "rounds=4", "checkpoint_every=2")
    part = _run(tmp_path, "part", "rounds=2", "checkpoint_every=2")
    assert main(["resume", str(part), "rounds=4"]) == 0
    assert _numbers(part) == _numbers(full)


def test_existing_run_dir_is_not_overwritten(tmp_path: Path, capsys) -> None:
    out = _run(tmp_path, "x")
    assert main(["run", *FAST, f"out={out}"]) == 2
    assert "fedcluster resume" in capsys.readouterr().err


def test_list_names_everything(capsys) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for name in ("fedavg", "fedprox", "digits", "fashion-mnist", "concept-swap", "mlp", "cnn", "light-cnn"):
        assert name in text


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "algorithm=nope"], "unknown algorithm 'nope'; choose one of:"),
        (["run", "rounds=-1"], "rounds must be >= 1"),
        (["run", "missing.yaml"], "config file 'missing.yaml' does not exist"),
        (["run", "dataset=mnist"], "pass data_dir="),
        (["run", "dataset=mnist", "data_dir=/nonexistent"], "mnist"),
        (["resume", "/nonexistent"], "no checkpoint.pt"),
    ],
)
def test_bad_input_is_one_clear_line(args: list[str], needle: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "fedcluster.app.cli", *args], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

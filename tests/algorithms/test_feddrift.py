"""FedDrift (FedDrift paper, Algorithm 1) on a sudden drift: the drifted clients are detected, get a new model,
and after a round of isolation and merging the clustering matches the new concepts (ARI ≥ 0.9), while one global
model (FedAvg) loses accuracy on the drifted concept. Three seeds; an IID split inside each concept, as the
paper's MNIST federations."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import fedcluster

AT = 6  # the round of the drift
RUN = {"dataset": "digits", "scenario": "drift-sudden", "num_clients": 10, "model": "logistic", "rounds": 10,
       "lr": 0.5, "local_epochs": 2, "batch_size": 32, "threads": 1, "progress": False,
       "scenario.at": AT, "scenario.split": "iid", "scenario.ratio": 0.5}


def rounds(tmp_path: Path, algorithm: str, seed: int) -> list[dict[str, float]]:
    out = tmp_path / f"{algorithm}-{seed}"
    fedcluster.run({**RUN, "algorithm": algorithm, "seed": seed, "data_seed": seed}, out=str(out))
    with open(out / "rounds.csv") as f:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feddrift_detects_the_drift_and_recovers_the_concepts(tmp_path: Path, seed: int) -> None:
    rows = rounds(tmp_path, "feddrift", seed)
    before, at, after = rows[AT - 2], rows[AT - 1], rows[AT + 1:]
    assert all(r["drifts"] == 0 for r in rows[:AT - 1]) and before["num_clusters"] == 1  # one concept: one model
    assert at["drifts"] == 5 and at["num_clusters"] > before["num_clusters"]  # detected: new models
    assert all(r["ari"] >= 0.9 for r in after), [r["ari"] for r in rows]  # the new concepts recovered
    assert rows[-1]["test_acc"] >= before["test_acc"] - 0.05
    fedavg = rounds(tmp_path, "fedavg", seed)
    assert fedavg[-1]["test_acc"] < fedavg[AT - 2]["test_acc"] - 0.2  # one model cannot serve both concepts
    assert rows[-1]["test_acc"] > fedavg[-1]["test_acc"] + 0.2

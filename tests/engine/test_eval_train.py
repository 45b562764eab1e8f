"""eval_train=true (rounds.csv train_acc) and the reproduce reading at the round of best training accuracy."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.func import functional_call

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from fedcluster.reproduce.run_common import read_metrics


def _run(tmp_path: Path, *extra: str) -> Run:
    cfg, typed = resolve(load_raw(None, ["algorithm=fedavg", "rounds=2", "progress=false", f"out={tmp_path}",
                                         *extra]))
    return Run(cfg, typed)


def test_train_acc_is_the_mean_client_accuracy_on_their_training_data(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", "eval_train=true")
    run.execute()
    with open(tmp_path / "r" / "rounds.csv") as f:
        rows = list(csv.DictReader(f))
    assert "train_acc" in rows[0]
    tr = run.fed.train
    with torch.no_grad():
        pred = functional_call(run.ctx.module, {k: v[0] for k, v in run.alg.models.items()}, (tr.x,)).argmax(-1)
    hits = (pred == tr.y).double().cpu().numpy()
    per_client = [hits[a:b].mean() for a, b in zip(tr.ptr[:-1], tr.ptr[1:], strict=True) if b > a]
    assert float(rows[-1]["train_acc"]) == pytest.approx(float(np.mean(per_client)), abs=2e-6)


def test_without_eval_train_rounds_csv_keeps_its_columns(tmp_path: Path) -> None:
    _run(tmp_path / "r").execute()
    with open(tmp_path / "r" / "rounds.csv") as f:
        header = f.readline().strip().split(",")
    assert "train_acc" not in header
    assert header[:10] == ["round", "val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "bytes_down",
                           "seconds", "val_loss", "test_loss"]


def _row(round_: int, train: float, val: float, test: float) -> dict[str, float]:
    return {"round": round_, "train_acc": train, "val_acc": val, "test_acc": test, "ari": round_ / 10}


def test_best_train_reads_the_round_of_best_training_accuracy() -> None:
    rows = [_row(5, 0.6, 0.9, 0.8), _row(10, 0.8, 0.5, 0.4), _row(15, math.nan, 0.95, 0.95),
            _row(20, 0.8, 0.7, 0.7), _row(25, 0.7, 0.6, 0.3)]
    got = read_metrics("best-train", {}, rows)
    assert got == {"local": pytest.approx(50.0), "global": pytest.approx(40.0), "ari": 1.0, "round": 10.0}  # first best


def test_best_train_needs_train_acc() -> None:
    with pytest.raises(ValueError, match="eval_train=true"):
        read_metrics("best-train", {}, [{"round": 1, "val_acc": 0.5, "test_acc": 0.5, "ari": 0.0}])


def test_reproduce_suite_runs_score_the_training_data_for_best_train() -> None:
    """A suite experiment read at best-train gets eval_train=true on every run (the reading needs the column)."""
    from fedcluster.reproduce import run_suite
    from fedcluster.reproduce.specs_fedrc import Q_S4_PROTOCOL

    seen: list[list[str]] = []

    class Stop(Exception):
        pass

    def fake_make_run(over: list[str], out: Path, fed: object) -> None:
        seen.append(list(over))
        raise Stop

    real_make_run, real_build, real_digest = run_suite.make_run, run_suite.build, run_suite.federation_digest
    run_suite.make_run, run_suite.build = fake_make_run, lambda *a: type("F", (), {"train": type(
        "T", (), {"sizes": torch.tensor([1])})()})()
    run_suite.federation_digest = lambda fed: "a stand-in federation"
    try:
        with pytest.raises(Stop):
            run_suite.run(Q_S4_PROTOCOL, Q_S4_PROTOCOL.budget("tiny"), 0, [], set(), lambda r: None)
    finally:
        run_suite.make_run, run_suite.build, run_suite.federation_digest = real_make_run, real_build, real_digest
    assert "eval_train=true" in seen[0]

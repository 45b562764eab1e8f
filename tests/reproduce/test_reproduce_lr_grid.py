"""A budget's learning-rate grid (the HCFL paper's {0.03, 0.06, 1.0}): every run at each rate, the rate of best
validation accuracy kept per seed, never the one of best test accuracy; a diverged rate is skipped."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fedcluster.errors import DivergedError
from fedcluster.reproduce import run_suite
from fedcluster.reproduce.experiments import get
from fedcluster.reproduce.run_store import RunStore

# lr -> (best validation accuracy, best test accuracy); 1.0 diverges
OUTCOME = {"0.03": (0.60, 0.90), "0.06": (0.80, 0.50), "1": None}


def _fake(overrides, fed):  # type: ignore[no-untyped-def]
    lr = next(o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("lr="))
    if OUTCOME[lr] is None:
        raise DivergedError("the loss is not finite")
    val, test = OUTCOME[lr]
    summary = {"best": {"val_acc": {"value": val, "round": 1}, "test_acc": {"value": test, "round": 1}},
               "final": {"num_clusters": 3, "ari": 1.0}}
    return summary, [{"round": 1.0, "val_acc": val, "test_acc": test, "ari": 1.0, "num_clusters": 3.0}]


@pytest.fixture()
def exp(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    calls: list[str] = []

    def counted(overrides, fed):  # type: ignore[no-untyped-def]
        calls.append(next(o for o in reversed(overrides) if o.startswith("lr=")))
        return _fake(overrides, fed)

    monkeypatch.setattr(run_suite, "execute", counted)
    monkeypatch.setattr(run_suite, "federation_digest", lambda fed: "a stand-in federation")
    monkeypatch.setattr(run_suite, "build", lambda *a: type("Fed", (), {"train": type("S", (), {
        "sizes": np.array([10])})()})())
    e = get("s1-table1-fmnist")
    e = replace(e, methods=e.methods[:1])
    return e, calls


def test_the_rate_of_best_validation_is_kept_not_that_of_best_test(exp, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    e, calls = exp
    budget = e.budget("protocol")
    assert budget.lr_grid == (0.03, 0.06, 1.0)
    records: list[dict] = []
    run_suite.run(e, budget, 0, [], set(), records.append, RunStore(tmp_path))
    (record,) = records
    assert calls == ["lr=0.03", "lr=0.06", "lr=1"]
    assert record["lr"] == 0.06 and record["metrics"]["val"] == pytest.approx(80.0)
    assert record["metrics"]["test"] == pytest.approx(50.0)  # not 0.03's higher test accuracy
    assert record["grid"] == {"0.03": 0.60, "0.06": 0.80, "1": None}
    calls.clear()
    again: list[dict] = []
    run_suite.run(e, budget, 0, [], set(), again.append, RunStore(tmp_path))
    assert calls == ["lr=1"]  # the two finished rates are read from the store; the diverged one is tried again
    assert again[0]["metrics"] == record["metrics"] and again[0]["lr"] == 0.06


def test_a_method_whose_every_rate_diverges_is_recorded_as_diverged(exp, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    e, _ = exp
    monkeypatch.setitem(OUTCOME, "0.03", None)
    monkeypatch.setitem(OUTCOME, "0.06", None)
    records: list[dict] = []
    run_suite.run(e, e.budget("protocol"), 0, [], set(), records.append, None)
    assert records[0]["diverged"]


def test_the_grid_is_part_of_the_protocol_and_older_protocols_are_unchanged() -> None:
    e = get("s1-table1-fmnist")
    assert "[0.03, 0.06, 1.0]" in e.protocol("protocol") and "[0.03, 0.06, 1.0]" not in e.protocol("small")
    assert e.protocol("small").startswith('protocol {"budget": [40, 30, ')


def test_the_estimate_counts_every_rate_of_the_grid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fedcluster.reproduce import estimate

    monkeypatch.setattr(run_suite, "build", lambda *a: type("Fed", (), {"train": type("S", (), {
        "sizes": np.array([10])})()})())
    monkeypatch.setattr(estimate, "timed_run", lambda over, fed: (10.0, [2.0, 1.0, 1.0, 1.5], 0.5))
    e = get("s1-table1-fmnist")
    e = replace(e, methods=e.methods[:2])
    found = estimate.estimate(e, "protocol", [], tmp_path, lambda line: None)
    assert [r.method for r in found.runs] == ["FedAvg", "FedAvg lr=0.06", "FedAvg lr=1", "FeSEM", "FeSEM lr=0.06",
                                              "FeSEM lr=1"]
    one = found.runs[0].seconds
    assert found.cpu_hours(3) == pytest.approx(3 * (found.build + 6 * one) / 3600)

"""The added paper tables of `fedcluster reproduce`: their checks (fed made-up numbers) and the runner paths they
use (FedMD's settings and FedProx weight, k = 4 rotations, the HCFL paper's max_t K^t)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedcluster.errors import DivergedError
from fedcluster.reproduce import run_fedmd_rotation, run_synthetic
from fedcluster.reproduce.experiments import EXPERIMENTS
from fedcluster.reproduce.run_common import read_metrics

Cells = dict[tuple[str, str], dict[str, list[float]]]


def _left(hits: dict[str, dict[int, float]], finals: dict[str, dict[int, float]]) -> Cells:
    return {(c, f"FedAvg s={s}"): {"hit2": [hits[c][s]], "final": [finals[c][s]]} for c in hits for s in hits[c]}


def test_local_steps_check_reads_never_as_slowest() -> None:
    exp = EXPERIMENTS["s2-local-steps"]
    flat = {s: 0.04 for s in (1, 5, 10)}
    inflated = {1: 0.04, 5: 0.04, 10: 0.05}
    paper_like = _left({"A": {1: 300.0, 5: 60.0, 10: 30.0}, "B": {1: math.nan, 5: 200.0, 10: 150.0},
                        "C": {1: math.nan, 5: 350.0, 10: 300.0}}, {"A": flat, "B": inflated, "C": inflated})
    assert exp.judge(paper_like, "small")[0] == "holds"
    never = _left({"A": {1: math.nan, 5: 60.0, 10: 30.0}, "B": {1: math.nan, 5: 200.0, 10: 150.0},
                   "C": {1: math.nan, 5: 350.0, 10: 300.0}}, {"A": flat, "B": inflated, "C": inflated})
    assert exp.judge(never, "small")[0] == "holds"  # s = 1 never got there: the slowest, not a missing cell
    # s = 1 and s = 5 never within 2× the oracle in A: no faster with more steps -> the main claim fails
    stalled = _left({**{c: dict(v) for c, v in {"A": {1: math.nan, 5: math.nan, 10: 30.0}}.items()},
                     "B": {1: math.nan, 5: 200.0, 10: 150.0}, "C": {1: math.nan, 5: 350.0, 10: 300.0}},
                    {"A": flat, "B": inflated, "C": inflated})
    assert exp.judge(stalled, "small")[0] == "does not hold"
    # B speeds up with s more than A does: only the "only slightly" part fails
    proportional = _left({"A": {1: 300.0, 5: 60.0, 10: 30.0}, "B": {1: math.nan, 5: 200.0, 10: 90.0},
                          "C": {1: math.nan, 5: 350.0, 10: 300.0}}, {"A": flat, "B": inflated, "C": inflated})
    verdict, why = exp.judge(proportional, "small")
    assert verdict == "partly" and ("B's speed-up from s = 5 to s = 10 minus A's (only slightly faster in B), per "
                                    "seed: 0.222 misses") in why


def test_mixreg_runner_runs_every_setting_and_gives_fedprox_the_weight_one_over_lr(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, list[str]]] = []

    def fake_curve(fed: Any, method: str, rounds: int, common: list[str], out: Path,
                   over: list[str] = ()) -> np.ndarray:  # type: ignore[assignment]
        calls.append((fed.info.get("name", ""), method, [*common, *over]))
        return np.linspace(1.0, 0.1 if method == "oracle" else 0.15, rounds)

    monkeypatch.setattr(run_synthetic, "mixreg_curve", fake_curve)
    exp = EXPERIMENTS["s2-local-steps"]
    records: list[dict[str, Any]] = []
    run_synthetic.run_mixreg(exp, exp.budget("tiny"), 0, [], {("A", m.label) for m in exp.methods}, records.append)
    assert {r["setting"] for r in records} == {"B", "C"}  # A was recorded already
    assert len(records) == 2 * len(exp.methods)
    prox = [over for _, method, over in calls if method == "FedProx"]
    assert prox and all("algorithm.prox_mu=80" in over and "lr=0.0125" in over for over in prox)  # 1/0.0125
    steps = {method: over for _, method, over in calls}
    assert "algorithm.local_steps=10" in steps["FedAvg s=10"]
    rec = next(r for r in records if r["method"] == "FedAvg s=1")
    assert rec["metrics"]["ratio"] == pytest.approx(1.5) and math.isnan(rec["metrics"]["hit2"]) is False


def test_rotation_runner_builds_k_rotations_and_k_models(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class FailingRun:
        def execute(self) -> None:
            raise DivergedError("training diverged at round 1: test")

    def fake_rotation(k: int, clients: int, seed: int) -> str:
        seen["k"] = k
        return "federation"

    def fake_make_run(overrides: list[str], out: Path, fed: Any) -> FailingRun:
        seen.setdefault("overrides", []).append(overrides)
        return FailingRun()

    monkeypatch.setattr(run_fedmd_rotation, "s2_rotation", fake_rotation)
    monkeypatch.setattr(run_fedmd_rotation, "make_run", fake_make_run)
    exp = EXPERIMENTS["s2-large-population-k4"]
    records: list[dict[str, Any]] = []
    run_fedmd_rotation.run(exp, exp.budget("small"), 0, [], set(), records.append)
    assert seen["k"] == 4 and len(records) == len(exp.methods)
    two_phase = seen["overrides"][0]
    for key in ("algorithm.num_clusters=4", "algorithm.num_anchors=4", "algorithm.phase1_rounds=10"):
        assert key in two_phase
    assert all("diverged" in r for r in records)


def test_hcfl_reading_records_the_largest_cluster_count() -> None:
    summary = {"best": {"val_acc": {"value": 0.8}, "test_acc": {"value": 0.6}},
               "final": {"num_clusters": 3, "ari": 0.5}}
    rows = [{"round": 1, "num_clusters": 1.0}, {"round": 2, "num_clusters": 5.0}, {"round": 3, "num_clusters": 3.0}]
    assert read_metrics("best", summary, rows)["kmax"] == 5.0
    assert read_metrics("best", summary, rows)["kt"] == 3.0


def test_added_table_checks_encode_their_claims() -> None:
    t2 = EXPERIMENTS["s1-table2-distance"]
    full = "HCFL+(FedRC) ρ=0.3"
    ablations = ("① gradient similarity", "② without the ω̃ factors", "③ mean instead of max")
    cells: Cells = {("", full): {"test": [70.0], "kt": [3.0]}}
    cells |= {("", a): {"test": [65.0], "kt": [6.0]} for a in ablations}
    assert t2.judge(cells, "small")[0] == "holds"
    cells[("", ablations[1])] = {"test": [65.0], "kt": [3.0]}  # as close to 3: still "closer or as close"
    assert t2.judge(cells, "small")[0] == "holds"
    cells[("", ablations[2])] = {"test": [71.0], "kt": [3.0]}  # an ablation has the higher test accuracy
    assert t2.judge(cells, "small")[0] == "does not hold"  # the headline (test accuracy) fails
    t10 = EXPERIMENTS["s1-table10-prime"]
    base = {("", n): {"test": [50.0]} for n in ("FedEM", "FedRC", "FedSoft")}
    better = {("", f"HCFL'({n})"): {"test": [52.0]} for n in ("FedEM", "FedRC", "FedSoft")}
    assert t10.judge({**base, **better}, "small")[0] == "holds"
    assert t10.judge({**base, **better, ("", "HCFL'(FedSoft)"): {"test": [49.0]}}, "small")[0] == "does not hold"
    t9 = EXPERIMENTS["s3-rotation-4-fedem"]
    paper = {"cflgp": (88.8, 1.0), "ifca": (86.4, 0.87), "cfl (MADMO)": (61.9, 0.02), "fedavg": (61.2, 0.0),
             "fedem": (76.9, 0.0)}
    cells = {(f"C={c}", m): {"acc": [a], "ari": [ari]} for c in (20, 40) for m, (a, ari) in paper.items()}
    assert t9.judge(cells, "small")[0] == "holds"
    cells[("C=40", "fedem")] = {"acc": [60.0], "ari": [0.0]}  # FedEM below the global model at one C
    assert t9.judge(cells, "small")[0] == "partly"
    t10s = EXPERIMENTS["s3-rotation-8-sweep"]
    acc = {"cflgp K=4": 87.0, "cflgp K=8": 87.5, "ifca K=4": 80.0, "ifca K=8": 84.0, "cfl (MADMO)": 64.0,
           "fedavg": 58.0}
    cells = {(f"C={c}", m): {"acc": [a], "ari": [1.0]} for c in (8, 16) for m, a in acc.items()}
    assert t10s.judge(cells, "small")[0] == "holds"
    cells[("C=8", "ifca K=4")] = {"acc": [60.0], "ari": [0.2]}
    assert t10s.judge(cells, "small")[0] == "partly"

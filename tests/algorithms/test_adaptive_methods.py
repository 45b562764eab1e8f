"""The adaptive baselines end to end: CFL splits two concepts and not one; CFL, ICFL, StoCFL and PACFL run,
record K^t with stable ids and events, keep Ω consistent with the models, and resume from their checkpoints to
the same numbers as an uninterrupted run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.evaluation.scores import mix_predictions
from fedcluster.engine.params import num_units
from fedcluster.engine.runner import Run
from fedcluster.tracking.run_dir import RunDir

FAST = ["num_clients=8", "progress=false", "threads=1"]
# Digits, 8 clients, one MLP: after 2 warm-up rounds the two concepts give max ‖Δθ_i‖ ≈ 0.33–0.40 and a
# single concept ≈ 0.24–0.25 (mean norms ≈ 0.13–0.18); tol1 = 0.2, tol2 = 0.3 separate the two.
CFL = ["algorithm=cfl", "algorithm.tol1=0.2", "algorithm.tol2=0.3", "algorithm.warmup=2", "rounds=3"]


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "rounds.csv").open() as f:
        return list(csv.DictReader(f))


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]


def test_cfl_splits_a_two_concept_federation(tmp_path: Path) -> None:
    out = tmp_path / "two"
    assert main(["run", *CFL, *FAST, "scenario=concept-swap", "scenario.concepts=2", "scenario.alpha=10",
                 f"out={out}"]) == 0
    rows = _rows(out)
    assert [int(r["num_clusters"]) for r in rows] == [1, 1, 2]
    assert float(rows[-1]["splits"]) == 1 and float(rows[-1]["ari"]) == 1.0  # the split follows the concepts
    last = _records(out)[-1]
    assert last["ids"] == [0, 1] and last["events"][0]["kind"] == "split" and last["events"][0]["others"] == [1]
    mass = np.array(last["concept"]["mass"])
    assert (np.count_nonzero(mass, axis=1) == 1).all()  # each cluster holds one concept


def test_cfl_does_not_split_a_one_concept_federation(tmp_path: Path) -> None:
    out = tmp_path / "one"
    assert main(["run", *CFL, *FAST, "scenario=iid", f"out={out}"]) == 0
    rows = _rows(out)
    assert all(int(r["num_clusters"]) == 1 and float(r["splits"]) == 0 for r in rows)
    assert float(rows[-1]["max_update_norm"]) < 0.3


METHODS = {
    "cfl": ["algorithm.warmup=0", "algorithm.tol1=1", "algorithm.tol2=0.1"],  # splits as soon as it can
    "icfl": ["algorithm.alpha0=0.01"],  # α_t ≈ 1 from round 2 on: the pool splits, then empties
    "stocfl": ["algorithm.tau=0.1"],
    "pacfl": ["algorithm.nu=20"],
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_runs_records_and_resumes(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert main(["run", f"algorithm={name}", *METHODS[name], "rounds=2", *FAST, f"out={out}"]) == 0
    assert main(["resume", str(out), "rounds=3"]) == 0
    full = tmp_path / f"{name}-full"
    assert main(["run", f"algorithm={name}", *METHODS[name], "rounds=3", *FAST, f"out={full}"]) == 0
    rows, records = _rows(out), _records(out)
    same = [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert same == [{k: v for k, v in r.items() if k != "seconds"} for r in _rows(full)]  # resume = one run
    assert records == _records(full)
    assert [int(r["round"]) for r in rows] == [1, 2, 3] and [r["round"] for r in records] == [1, 2, 3]
    for r, rec in zip(rows, records, strict=True):
        k = int(r["num_clusters"])
        assert len(rec["ids"]) == k == len(rec["concept"]["mass"]) and len(set(rec["ids"])) == k
        assert int(r["bytes_up"]) > 0 and int(r["bytes_down"]) > 0
        assert {"splits", "merges", "removals"} <= set(r)
    state = RunDir(out).load_checkpoint()["algorithm"]
    assert state["book"]["ids"] == records[-1]["ids"]
    assert num_units(state["models"]) == state["omega"].shape[1] == len(state["book"]["ids"])
    np.testing.assert_array_equal(state["omega"].argmax(1), state["cluster"])
    logged = [e for rec in records for e in rec["events"]]
    assert logged == state["book"]["events"]  # the per-round records hold the whole event log
    if name == "cfl":
        assert any(e["kind"] == "split" for e in logged)
    if name == "icfl":  # the lone pool (id 0) splits into two clusters, then is removed once empty
        kinds = [(e["kind"], e["cluster"]) for e in logged]
        assert ("split", 0) in kinds and ("remove", 0) in kinds and 0 not in records[-1]["ids"]
    if name == "stocfl":
        assert int(rows[0]["num_clusters"]) <= 8 and float(rows[-1]["bytes_down"]) == 2 * float(rows[-1]["bytes_up"])
    if name == "pacfl":  # signatures go up once, in the first round
        assert int(rows[0]["bytes_up"]) > int(rows[1]["bytes_up"]) == int(rows[1]["bytes_down"])


def test_own_cluster_prediction_equals_the_omega_mix(tmp_path: Path) -> None:
    cfg, typed = resolve(load_raw(None, ["algorithm=stocfl", "rounds=2", *FAST, f"out={tmp_path / 'p'}",
                                         "checkpoint_every=1000"]))
    run = Run(cfg, typed)
    run.execute()
    alg, val = run.alg, run.fed.val
    assert alg.num_clusters > 1
    fast = alg.predict(val, True)
    outputs, omega = alg.outputs(val.x), alg.omega  # all K^t models mixed by the one-hot Ω
    assert outputs.shape[0] == alg.num_clusters > 1
    mixed = mix_predictions(outputs, torch.as_tensor(omega, dtype=torch.float32), val.owner(), alg.ctx.fed.task)
    torch.testing.assert_close(fast, mixed, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_partial_participation_keeps_clusters_consistent(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert main(["run", f"algorithm={name}", *METHODS[name], "rounds=4", "num_clients=10", "clients_per_round=0.5",
                 "progress=false", "threads=1", f"out={out}"]) == 0
    state = RunDir(out).load_checkpoint()["algorithm"]
    k = num_units(state["models"])
    assert state["omega"].shape == (10, k) and len(state["book"]["ids"]) == k
    assert sorted(np.unique(state["cluster"])) == list(range(k))  # no empty cluster, no dangling position
    assert [int(r["num_clusters"]) for r in _rows(out)] == [len(rec["ids"]) for rec in _records(out)]

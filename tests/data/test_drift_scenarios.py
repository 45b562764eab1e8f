"""The drift scenarios (FedDrift paper §3: sudden, staggered and recurring concept drift): the ground truth of every
round, the labels a run trains and scores on in each round, test clients that drift, static scenarios untouched,
and bad parameters refused in one line."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.data.drift import Drift
from fedcluster.data.federation import Federation
from fedcluster.engine.callbacks import RoundCallback, RoundEnd
from fedcluster.engine.distributed.ranks import Ranks
from fedcluster.engine.runner import Run
from fedcluster.errors import UserError

RUN = {"dataset": "digits", "num_clients": 8, "model": "logistic", "lr": 0.5, "local_epochs": 1, "batch_size": 32,
       "threads": 1, "progress": False}


def build(scenario: str, *overrides: str, clients: int = 8) -> Federation:
    cfg, typed = resolve(load_raw(None, [f"scenario={scenario}", f"num_clients={clients}", *overrides]))
    return build_federation(cfg, typed["scenario"], use_cache=False)


class Labels(RoundCallback):
    """The training labels the run holds after each round (read from the trainer the method trains with)."""

    def __init__(self) -> None:
        self.run: Run | None = None
        self.seen: list[torch.Tensor] = []

    def on_round(self, end: RoundEnd) -> None:
        assert self.run is not None
        self.seen.append(self.run.fed.train.y.cpu().clone())  # on the host, wherever the run trains


def run_with_labels(tmp_path: Path, fed: Federation, scenario: str, **overrides: object
                    ) -> tuple[list[dict[str, str]], list[torch.Tensor]]:
    """Run on ``fed`` (key=value ``overrides``); rounds.csv's rows and the labels of every round."""
    out = tmp_path / str(overrides.get("algorithm", "run"))
    args = [f"{k}={v}" for k, v in {**RUN, "scenario": scenario, **overrides, "out": out}.items()]
    cfg, typed = resolve(load_raw(None, args))
    seen = Labels()
    seen.run = Run(cfg, typed, fed=fed, callbacks=[seen])
    seen.run.execute()
    with open(out / "rounds.csv") as f:
        return list(csv.DictReader(f)), seen.seen


def test_sudden_ground_truth_changes_in_round_at(tmp_path: Path) -> None:
    fed = build("drift-sudden", "scenario.at=3", "scenario.concepts=2", "scenario.ratio=0.5")
    drift = Drift.of(fed)
    assert drift is not None and drift.horizon == 3
    before, after = drift.concepts(2)[0], drift.concepts(3)[0]
    moved = np.flatnonzero(before != after)
    assert len(moved) == 4 and set(after[moved]) == {2} and np.array_equal(before, fed.true_cluster)
    assert np.array_equal(drift.concepts(50)[0], after)  # kept after the schedule
    y0 = fed.train.y.clone()
    rows, seen = run_with_labels(tmp_path, fed, "drift-sudden", algorithm="oracle", rounds=4,
                                 **{"algorithm.num_clusters": 3, "scenario.at": 3, "scenario.concepts": 2})
    maps = fed.extras["label_maps"]
    inverse = np.argsort(maps, axis=1)
    owner = fed.train.owner()
    for r, y in enumerate(seen, start=1):
        concept = drift.concepts(r)[0][owner]
        want = maps[concept, inverse[fed.true_cluster[owner], y0.numpy()]]
        assert np.array_equal(y.numpy(), want), f"round {r}"
    assert not torch.equal(seen[1], seen[2])  # rounds 2 and 3 train on other labels
    assert torch.equal(fed.train.y, y0) and np.array_equal(fed.true_cluster, before)  # the caller's copy is kept
    # the oracle follows the drift: ARI 1 in every round only when each round is scored on its own concepts
    assert [float(r["ari"]) for r in rows] == [1.0] * 4


def test_test_clients_drift_too() -> None:
    fed = build("drift-sudden", "scenario.at=4")
    drift = Drift.of(fed)
    assert drift is not None
    assert fed.test.num_clients == 2 and fed.test_cluster.tolist() == [0, 0]
    assert drift.concepts(3)[1].tolist() == [0, 0] and drift.concepts(4)[1].tolist() == [0, 1]
    y0 = fed.test.y.clone()
    copy = Drift.own_labels(fed)
    assert drift.apply(copy, 4).size == 4  # the drifting participating clients
    n = fed.test.sizes[0]
    assert torch.equal(copy.test.y[:n], y0[:n]) and torch.equal(copy.test.y[n:], 9 - y0[n:])  # y → C−1−y
    assert copy.test_cluster.tolist() == [0, 1]


def test_gradual_drift_is_staggered() -> None:
    fed = build("drift-gradual", "scenario.at=3", "scenario.window=4", "scenario.ratio=1", clients=8)
    drift = Drift.of(fed)
    assert drift is not None and drift.horizon == 6
    switch = drift.switch_rounds()
    assert sorted(switch.tolist()) == [3, 3, 4, 4, 5, 5, 6, 6]  # two clients a round over rounds 3..6
    assert (drift.concepts(6)[0] == 1).all() and (drift.concepts(2)[0] == 0).all()
    # one test client per schedule: the four switch rounds
    assert fed.test.num_clients == 4
    assert [int(np.argmax(drift.test[:, j] != 0)) + 1 for j in range(4)] == [3, 4, 5, 6]


def test_recurring_concept_returns(tmp_path: Path) -> None:
    fed = build("drift-recurring", "scenario.at=2", "scenario.back=4")
    drift = Drift.of(fed)
    assert drift is not None
    first, gone, back = drift.concepts(1)[0], drift.concepts(3)[0], drift.concepts(4)[0]
    assert np.array_equal(first, back) and (gone != first).sum() == 4
    y0 = fed.train.y.clone()
    _, seen = run_with_labels(tmp_path, fed, "drift-recurring", algorithm="fedavg", rounds=4)
    assert not torch.equal(seen[1], y0) and torch.equal(seen[3], y0)  # A → B → A


@pytest.mark.host_only(reason="engine=pool runs on the CPU only")
def test_pool_workers_train_on_the_new_labels(tmp_path: Path) -> None:
    """engine=pool's workers hold the labels they started with; after a drift they are restarted, so the pool
    trains exactly as the in-process sequential kernel does."""
    fed = build("drift-sudden", "scenario.at=2")
    out = {}
    for engine in ("sequential", "pool"):
        rows, _ = run_with_labels(tmp_path / engine, fed, "drift-sudden", algorithm="fedavg", rounds=3,
                                  engine=engine, workers=2)
        out[engine] = [r["val_acc"] for r in rows]
    assert out["pool"] == out["sequential"]


def test_static_scenarios_have_no_drift(tmp_path: Path) -> None:
    fed = build("concept-swap")
    assert Drift.of(fed) is None
    y0 = fed.train.y.clone()
    run_with_labels(tmp_path, fed, "concept-swap", algorithm="fedavg", rounds=2)
    assert torch.equal(fed.train.y, y0)


def test_ranks_refuse_a_drifting_federation() -> None:
    cfg, _ = resolve(load_raw(None, ["scenario=drift-sudden"]))
    with pytest.raises(UserError, match="changes the clients' concepts"):
        Ranks().check_drift(cfg)


@pytest.mark.parametrize(("scenario", "bad", "says"), [
    ("drift-sudden", "scenario.at=1", "at must be >= 2"),
    ("drift-sudden", "scenario.ratio=0", "ratio must be in (0, 1]"),
    ("drift-gradual", "scenario.window=0", "window must be >= 1"),
    ("drift-recurring", "scenario.back=5", "back must be > at"),
    ("drift-sudden", "scenario.concepts=0", "concepts must be >= 1"),
])
def test_bad_parameters_exit_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: str,
                                           bad: str, says: str) -> None:
    assert main(["scenario", scenario, bad, "num_clients=6", "--out", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_scenario_picture_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenario", "drift-recurring", "num_clients=6", "scenario.at=3", "scenario.back=6",
                 "--out", str(tmp_path / "p.png")]) == 0
    text = capsys.readouterr().out
    assert "round 3: clients" in text and "switch from concept 0 to 1" in text and "from concept 1 to 0" in text
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_true_k_of_a_drifting_federation_counts_the_concepts_of_every_round() -> None:
    """A fixed-K method in the benchmark (or a suite entry) given TRUE_K on drift-sudden gets the two concepts of
    its schedule, not the one of round 1."""
    from fedcluster.reproduce.run_suite import method_overrides
    from fedcluster.reproduce.spec import Method, Setting

    fed = build("drift-sudden", "dataset=digits", "scenario.at=3")
    assert len(set(fed.true_cluster.tolist())) == 1
    over = method_overrides(Setting(""), Method("ifca", ("algorithm=ifca", "num_clusters=TRUE_K")), [], fed)
    assert "num_clusters=2" in over
    static = build("concept-swap", "dataset=digits", "scenario.concepts=3")
    assert "num_clusters=3" in method_overrides(Setting(""), Method("ifca", ("num_clusters=TRUE_K",)), [], static)

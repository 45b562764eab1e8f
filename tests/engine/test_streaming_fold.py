"""Local training folded into the aggregation (backends.fold): for FedAvg, IFCA and FedRC, whose aggregation weights
are known before training, each vectorised call's trained models are added to the K weighted sums as the call
finishes and freed, so the trained units held at once do not grow with clients × K, and the results equal the
path that trains the whole cohort and then aggregates."""

from __future__ import annotations

import csv
import io
import math
import weakref
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.models.base import build_model
from fedcluster.tiers.aggregation import ClusterSums, ModelSums, cluster_update, server_update

DEVICE = torch.device("cpu")  # the run's device (named, so that the simulated accelerator counts these tensors its own)
# the vectorised path with a small budget per call (a few units each), so that a round takes several calls
RUN = ["rounds=2", "progress=false", "engine=vectorized", "chunk_mb=0.7", "threads=1"]
METHODS = {"fedavg": ["algorithm=fedavg"], "ifca": ["algorithm=ifca", "algorithm.num_clusters=3"],
           "fedrc": ["algorithm=fedrc", "algorithm.num_clusters=3"]}


class HeldUnits:
    """The most trained units alive at once: every result a training call returns is watched until it is freed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.watched: list[tuple[weakref.ref, int]] = []
        self.peak = 0
        self.calls = 0
        train = LocalTrainer._train

        def watched_train(trainer: LocalTrainer, *args: Any, **kwargs: Any) -> Any:
            out = train(trainer, *args, **kwargs)
            first = next(iter(out.values()))
            self.watched.append((weakref.ref(first), len(first)))
            self.calls += 1
            self.peak = max(self.peak, sum(n for ref, n in self.watched if ref() is not None))
            return out

        monkeypatch.setattr(LocalTrainer, "_train", watched_train)


def whole_cohort(trainer: LocalTrainer, sums: Any, init: Any, clients: np.ndarray, solver: Solver, round_: int,
                 weights: Any = None, stream: int = 0, init_index: Any = None) -> None:
    """The path without the fold: the cohort trained in one call, every unit held, then aggregated."""
    sums.add(0, len(clients), trainer.train(init, clients, solver, round_, weights=weights, stream=stream,
                                            init_index=init_index))


def _run(args: list[str], out: Path) -> list[dict[str, str]]:
    with redirect_stderr(io.StringIO()) as err, redirect_stdout(io.StringIO()):
        rc = main(["run", *RUN, *args, f"out={out}"])
    assert rc == 0, err.getvalue()
    with open(out / "rounds.csv", newline="") as f:
        return list(csv.DictReader(f))


def _same(a: list[dict[str, str]], b: list[dict[str, str]]) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        for key, va in ra.items():
            if "seconds" in key or key == "time":
                continue
            try:
                fa, fb = float(va), float(rb[key])
            except ValueError:
                assert va == rb[key], key
                continue
            assert math.isclose(fa, fb, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(fa) and math.isnan(fb)), key


@pytest.mark.parametrize("method", list(METHODS))
def test_held_units_do_not_grow_with_the_cohort_and_results_equal_the_whole_cohort_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    peaks = {}
    for clients in (6, 12):
        with monkeypatch.context() as m:
            held = HeldUnits(m)
            streamed = _run([*METHODS[method], f"num_clients={clients}"], tmp_path / f"s{clients}")
        assert held.calls > 2 * 2  # several calls a round
        peaks[clients] = held.peak
    with monkeypatch.context() as m:
        held = HeldUnits(m)
        m.setattr(LocalTrainer, "train_folded", whole_cohort)
        whole = _run([*METHODS[method], "num_clients=12"], tmp_path / "w12")
    units = 12 * (1 if method in ("fedavg", "ifca") else 3)
    assert held.peak == units  # without the fold every trained unit of the round is held at once
    assert peaks[6] == peaks[12] < units / 2, peaks  # with it, one call's units, however many clients
    _same(streamed, whole)


@pytest.mark.parametrize("pairs", [False, True])
def test_the_fold_adds_up_to_the_cluster_update(pairs: bool) -> None:
    """Trained in calls of 4 units (of 3 pairs each when ``pairs``), the folded K means equal the update of the
    whole cohort's models (within float rounding: the sum is split into partial sums)."""
    torch.manual_seed(0)
    x, y = torch.rand(60, 1, 6, 6, device=DEVICE), torch.randint(0, 4, (60,), device=DEVICE)
    module = build_model("mlp", (1, 6, 6), 4, None)
    tr = LocalTrainer(module, x, y, np.arange(0, 61, 6), "classification", seed=0, max_units=4)
    k, clients = 3, np.arange(10)
    models = {n: torch.stack([p.detach() + 0.01 * i for i in range(k)]) for n, p in module.named_parameters()}
    solver = Solver(lr=0.1, epochs=1, batch_size=4, momentum=0.9)
    weights = torch.rand(10, k, dtype=torch.float64, device=DEVICE)
    if pairs:
        units, index = np.repeat(clients, k), np.tile(np.arange(k), 10)
    else:
        units, index = clients, np.arange(10) % k
        weights = weights * torch.nn.functional.one_hot(torch.as_tensor(index, device=DEVICE), k)
    sums = ClusterSums(models, weights, pairs=pairs)
    tr.train_folded(sums, models, units, solver, 0, init_index=index)
    whole = tr.train(models, units, solver, 0, init_index=index)
    expected = cluster_update(models, {n: v.view(10, k, *v.shape[1:]) if pairs else v.unsqueeze(1).expand(
        10, k, *v.shape[1:]) for n, v in whole.items()}, weights, 0.5)
    got = sums.update(models, 0.5)
    for n in models:
        torch.testing.assert_close(got[n], expected[n], rtol=1e-6, atol=1e-7)


def test_one_model_sums_equal_the_server_update() -> None:
    stacked = {"w": torch.randn(10, 5, 3, device=DEVICE)}
    weights = torch.rand(10, dtype=torch.float64, device=DEVICE)
    current = {"w": torch.zeros(5, 3, device=DEVICE)}
    sums = ModelSums(weights)
    for lo in range(0, 10, 4):
        sums.add(lo, min(lo + 4, 10), {"w": stacked["w"][lo:lo + 4]})
    torch.testing.assert_close(sums.update(current, 0.7)["w"], server_update(current, stacked, weights, 0.7)["w"],
                               rtol=1e-6, atol=1e-7)
    whole = ModelSums(weights)
    whole.add(0, 10, stacked)  # in one piece: bitwise the server update
    assert torch.equal(whole.update(current, 0.7)["w"], server_update(current, stacked, weights, 0.7)["w"])

"""The round plan (algorithms/round_plan.py) and the one round template over it (ClusteredAlgorithm.step): a plan's
bytes are the models each client receives and uploads plus its tables, a hard plan joins with one-hot weights, and
the soft/EM methods write no round of their own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedcluster.algorithms.clustered import ClusteredAlgorithm
from fedcluster.algorithms.round_plan import RoundPlan
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from fedcluster.tiers.cohort import Cohort


def _cohort(sizes: list[int]) -> Cohort:
    m, n = len(sizes), sum(sizes)
    return Cohort(np.arange(m) + 10, np.arange(n), np.repeat(np.arange(m), sizes), np.asarray(sizes, float),
                  np.zeros(n, dtype=np.int64))


def shared_body(n: int) -> int:
    """Bytes of n models that share one extractor (1000 bytes) and have a 40-byte head each: not n times one."""
    return 1000 + 40 * n


def test_a_soft_plan_sends_and_uploads_its_models_and_its_table_each_way() -> None:
    cohort = _cohort([3, 2, 4])
    k = 3
    plan = RoundPlan.soft(cohort, np.full((9, k), 1 / k), np.full((3, k), 1 / k), np.ones((3, k)), sent=k,
                          uploaded=k, table=48, extra_up=12)
    assert plan.positions is None and plan.k == k and plan.folds
    up, down = plan.bytes(shared_body)
    assert (up, down) == (3 * (1120 + 48 + 12), 3 * (1120 + 48))
    assert isinstance(up, int) and isinstance(down, int)


def test_models_sent_per_client_count_a_shared_extractor_once_per_client() -> None:
    """FeSEM's plan: K models down to a client without a cluster, one to the others, one up."""
    cohort = _cohort([3, 2, 4, 1])
    plan = RoundPlan.hard(cohort, np.array([0, 1, 1, 2]), 3, sent=np.array([3, 1, 1, 3]))
    assert not plan.folds  # A comes once the clients join, after training
    up, down = plan.bytes(shared_body)
    assert up == 4 * shared_body(1)
    assert down == 2 * shared_body(3) + 2 * shared_body(1)


def test_a_hard_plan_joins_with_one_hot_weights_and_each_clients_size() -> None:
    cohort = _cohort([3, 2])
    plan = RoundPlan.hard(cohort, np.array([2, 2]), 3).join(np.array([1, 0]))
    np.testing.assert_array_equal(plan.omega, [[0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(plan.gamma, [[0, 1, 0]] * 3 + [[1, 0, 0]] * 2)
    np.testing.assert_array_equal(plan.weights, [[0, 3, 0], [2, 0, 0]])
    np.testing.assert_array_equal(plan.positions, [2, 2])  # the units still train from where they started
    assert plan.folds and not RoundPlan.hard(cohort, np.zeros(2), 3, fold=False).join(np.zeros(2)).folds


def _run(overrides: list[str]) -> Run:
    cfg, typed = resolve(load_raw(None, [*overrides, "num_clients=6", "rounds=2", "progress=false", "threads=1"]))
    return Run(cfg, typed)


@pytest.mark.parametrize(("method", "up_models", "table"), [("fedrc", 3, True), ("fedrc-trhc", 1, True),
                                                            ("ifca", 1, False), ("fesem", 1, False)])
def test_the_rounds_bytes_are_the_plans(method: str, up_models: int, table: bool, tmp_path: Path) -> None:
    """A round's reported bytes: K models down (FeSEM: to clients without a cluster, one to the others), the
    uploaded models, and FedRC's K × C label table (4 bytes a count) both ways."""
    name, *variant = (["fedrc", "algorithm.hard=train"] if method == "fedrc-trhc" else [method])
    run = _run([f"algorithm={name}", *variant, "algorithm.num_clusters=3", "clients_per_round=3",
                f"out={tmp_path}"])
    alg = run.alg
    assert isinstance(alg, ClusteredAlgorithm)
    k, classes = 3, run.fed.num_classes
    cells = 4 * k * classes if table else 0
    for t in range(2):
        clients = np.asarray(run.stream[t])
        new = (alg.assigned[clients] < 0).sum() if method == "fesem" else len(clients)
        res = alg.run_round(t, clients)
        m = len(clients)
        assert res.bytes_up == m * (alg.nbytes(up_models) + cells)
        assert res.bytes_down == new * alg.nbytes(k) + (m - new) * alg.nbytes(1) + m * cells


def test_the_soft_and_hard_em_methods_write_no_round_of_their_own() -> None:
    """The round is ClusteredAlgorithm.step, once; a method decides its plan (CLoVE keeps a round of its own)."""
    own = sorted(name for name in ALGORITHMS.names()
                 if isinstance(obj := ALGORITHMS.get(name).obj, type) and issubclass(obj, ClusteredAlgorithm)
                 and obj.step is not ClusteredAlgorithm.step)
    assert own == ["clove"]

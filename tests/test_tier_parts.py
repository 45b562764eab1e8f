"""The methods are built from tier parts: every tier option of algorithm=hcfl is a part in its table, no method
class sits more than three levels below the Algorithm protocol, hard and soft methods share one cluster-state type,
and the state's split / removal keeps every per-cluster field consistent."""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import pytest
import torch

import fedcluster.algorithms.hcfl as hcfl
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.runner import Run
from fedcluster.tiers.adaptation import ADAPTATIONS, CFLSplits, Fixed, GapSplits, LowMass
from fedcluster.tiers.adaptive import ClusterBook
from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tiers.distance import DISTANCE_PARTS, HeadUpdateDistance, PrototypeDistance, UpdateCosine
from fedcluster.tiers.formulation import FORMULATION_PARTS, Formulation, ServerStatistics
from fedcluster.tiers.weight_rules import WEIGHT_RULES, HardDistance, HardLoss, SoftEM

FAST = ["num_clients=8", "progress=false", "threads=1", "rounds=1"]


def _alg(tmp_path: Path, overrides: list[str]) -> Algorithm:
    cfg, typed = resolve(load_raw(None, [*FAST, f"out={tmp_path / 'x'}", *overrides]))
    return Run(cfg, typed).alg


def test_every_hcfl_tier_option_is_a_part() -> None:
    """Adding a tier option is adding a part: each name the config accepts has an entry in its table."""
    tables = [(Formulation, FORMULATION_PARTS), (hcfl.WeightRule, WEIGHT_RULES), (hcfl.Adaptive, ADAPTATIONS),
              (hcfl.Distance, DISTANCE_PARTS)]
    for names, table in tables:
        assert set(typing.get_args(names)) == set(table)


@pytest.mark.parametrize("overrides,parts", [
    ([], (SoftEM, GapSplits, PrototypeDistance)),
    (["algorithm.weights=hard-loss", "algorithm.adaptive=cfl", "algorithm.distance=update-cosine"],
     (HardLoss, CFLSplits, type(None))),
    (["algorithm.weights=hard-distance", "algorithm.adaptive=fixed"], (HardDistance, Fixed, type(None))),
    (["algorithm.adaptive=low-mass"], (SoftEM, LowMass, type(None))),
    (["algorithm.adaptive=split", "algorithm.distance=update-cosine"], (SoftEM, GapSplits, UpdateCosine)),
    (["algorithm.prototypes=head-update"], (SoftEM, GapSplits, HeadUpdateDistance)),
])
def test_hcfl_holds_the_parts_its_config_names(tmp_path: Path, overrides: list[str], parts: tuple) -> None:
    alg = _alg(tmp_path, ["algorithm=hcfl", *overrides])
    weighting, adaptation, distance = parts
    assert type(alg.weighting) is weighting and type(alg.adaptation) is adaptation
    assert type(getattr(alg.adaptation, "distance", None)) is distance


def test_no_method_sits_more_than_three_levels_below_the_protocol() -> None:
    """Algorithm → ClusteredAlgorithm / HardClusters → method: a method file reads top to bottom."""
    for entry in ALGORITHMS.registered():
        if isinstance(entry.obj, type):
            chain = entry.obj.__mro__[:entry.obj.__mro__.index(Algorithm)]
            assert len(chain) <= 2, f"{entry.name}: {[c.__name__ for c in chain]}"


@pytest.mark.parametrize("method", ["cfl", "fedem", "ifca", "fedavg", "hcfl"])
def test_hard_and_soft_methods_share_one_cluster_state(tmp_path: Path, method: str) -> None:
    alg = _alg(tmp_path, [f"algorithm={method}"])
    assert isinstance(alg.state, ClusterState)
    assert alg.models is alg.state.models and alg.omega is alg.state.omega
    alg.omega = np.ones((8, alg.num_clusters))
    assert alg.state.omega is alg.omega


def _state(k: int = 2, m: int = 4, rows: int = 3, classes: int = 3) -> tuple[ClusterState, np.ndarray]:
    rng = np.random.default_rng(0)
    owner = np.repeat(np.arange(m), rows)
    omega = rng.dirichlet(np.ones(k), m)
    gamma = rng.dirichlet(np.ones(k), m * rows).astype(np.float32)
    stats = ServerStatistics.start(m, k, classes)
    stats.counts = rng.random((m, k, classes))
    state = ClusterState(models={"head.weight": torch.randn(k, 2, 3)}, omega=omega, gamma=gamma,
                         sample_prior=gamma.copy(), stats=stats, book=ClusterBook.start(k),
                         assigned=np.array([0, 0, 1, 1]))
    return state, owner


def test_cluster_state_split_keeps_every_field_consistent() -> None:
    state, owner = _state()
    local = {"head.weight": torch.randn(4, 2, 2, 3)}  # [m, K, ...]
    old = {n: v.clone() for n, v in state.models.items()}
    counts = state.stats.counts.copy()
    new = state.split(0, np.array([0]), np.array([1]), local, np.ones((4, 2)), np.arange(4), old, soft_update=True,
                      global_lr=1.0, shared_body=False, owner=owner, round_=1)
    assert new == 2 and state.num_clusters == 3 and state.book.ids == [0, 1, 2]
    for w in (state.omega, state.gamma, state.sample_prior):
        assert w.shape[1] == 3 and np.allclose(w.sum(1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(state.stats.counts[:, 2], counts[:, 0])  # HCFL Alg. 4 lines 3–4
    assert state.stats.marginal.shape[0] == 3
    np.testing.assert_array_equal(state.assigned, [0, 2, 1, 1])  # client 1 moved from position 0
    torch.testing.assert_close(state.models["head.weight"][2], local["head.weight"][1, 0])


def test_cluster_state_removal_renormalises_and_repositions() -> None:
    state, owner = _state(k=3)
    state.remove(np.array([1]), owner=owner, round_=1)
    assert state.num_clusters == 2 and state.book.ids == [0, 2]
    for w in (state.omega, state.gamma, state.sample_prior):
        assert w.shape[1] == 2 and np.allclose(w.sum(1), 1.0, atol=1e-6)
    assert state.stats.counts.shape[1] == 2 and state.stats.marginal.shape[0] == 2
    np.testing.assert_array_equal(state.assigned, [0, 0, -1, -1])  # clients of the removed position unassigned


def test_methods_say_what_to_predict_with_and_nothing_else() -> None:
    """Evaluation is one path (Algorithm.predict mixing what ``prediction`` returns): no method re-implements the
    mixing, and FedRC's hard variants no longer need a weights hook of their own."""
    for entry in ALGORITHMS.registered():
        if isinstance(entry.obj, type):
            assert entry.obj.predict is Algorithm.predict, entry.name
            assert not hasattr(entry.obj, "prediction_weights"), entry.name
